"""The frame of a KRaft metadata record value: uvarint frame version (1), uvarint record type,
uvarint record version, then the record at that version.

Frame version 0 was a pre-release format and is refused, as Kafka does.
"""

from __future__ import annotations

from kraftpy.protocol.errors import DecodeError, EncodeError
from kraftpy.protocol.message import Message
from kraftpy.protocol.primitives import UV1, read_uvarint, uvarint_bytes
from kraftpy.protocol.registry import METADATA_RECORDS

FRAME_VERSION = 1
_PREFIX = UV1[FRAME_VERSION]
# frame prefix (version 1, one-byte type, one-byte version) -> (decoder, version)
_FAST = {bytes((FRAME_VERSION, t, v)): (fn, v) for t, cls in METADATA_RECORDS.items()
         for v, fn in cls._DECODERS.items() if t < 0x80 and v < 0x80}


def encode_metadata_record(record: Message, version: int) -> bytes:
    record_type = record.API_KEY
    if record_type is None or METADATA_RECORDS.get(record_type) is not type(record):
        raise EncodeError(f"{type(record).__name__} is not a metadata record")
    parts = [_PREFIX, uvarint_bytes(record_type), uvarint_bytes(version)]
    record.encode_into(parts.append, version)
    return b"".join(parts)


def decode_metadata_header(value: bytes) -> tuple[int, int, int]:
    """(record type, record version, offset of the payload) of a framed value."""
    frame, pos = read_uvarint(value, 0)
    if frame != FRAME_VERSION:
        raise DecodeError(f"unsupported metadata frame version {frame}", offset=0, field="frameVersion")
    record_type, pos = read_uvarint(value, pos)
    version, pos = read_uvarint(value, pos)
    return record_type, version, pos


def decode_metadata_record(value: bytes | bytearray | memoryview) -> tuple[Message, int]:
    """(record, version) of a framed metadata record value; DecodeError for anything wrong."""
    if type(value) is not bytes:
        if value is None:
            raise DecodeError("a metadata record cannot have a null value", offset=0)
        value = bytes(value)
    entry = _FAST.get(value[:3])  # the common case: one-byte type and version
    if entry is not None:
        record, end = entry[0](value, 3)
        if end != len(value):
            raise DecodeError(f"{len(value) - end} trailing bytes after {type(record).__name__}",
                              offset=end)
        return record, entry[1]
    record_type, version, pos = decode_metadata_header(value)
    cls = METADATA_RECORDS.get(record_type)
    if cls is None:
        raise DecodeError(f"unknown metadata record type {record_type}", offset=1, field="recordType")
    try:
        fn = cls._DECODERS[version]
    except KeyError:
        raise DecodeError(f"{cls.__name__} has no version {version}", offset=pos, field="version") from None
    record, end = fn(value, pos)
    if end != len(value):
        raise DecodeError(f"{len(value) - end} trailing bytes after {cls.__name__} v{version}", offset=end)
    return record, version
