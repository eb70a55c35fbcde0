"""The frame of a KRaft metadata record value: uvarint frame version (1), uvarint record type,
uvarint record version, then the record at that version.

Frame version 0 was a pre-release format and is refused, as Kafka does.
"""

from __future__ import annotations

import importlib
from typing import Any

from kraftpy.protocol.errors import DecodeError, EncodeError
from kraftpy.protocol.message import Message
from kraftpy.protocol.primitives import UV1, read_uvarint, uvarint_bytes
from kraftpy.protocol.records import METADATA_TYPES

FRAME_VERSION = 1
_PREFIX = UV1[FRAME_VERSION]

# Record classes are imported when first needed (from the generated index), so a reader of a
# log with a few record types loads a few codecs.
_CLASSES: dict[int, type[Message] | None] = {}
# frame prefix (version 1, one-byte type, one-byte version) -> (class, version, decoder), or
# None when the prefix is not one of those; filled as prefixes are met.
Frame = tuple[type[Message], int, Any]
_FRAMES: dict[bytes, Frame | None] = {}
_UNSEEN: Any = object()
# (class, version) -> its frame prefix and one-pack encoder (None: not fixed-size), once the
# class was checked to be a metadata record.
_ENCODINGS: dict[tuple[type, int], tuple[bytes, Any]] = {}


def record_class(record_type: int) -> type[Message] | None:
    """The generated class of a metadata record type (None for a type Kafka does not define)."""
    try:
        return _CLASSES[record_type]
    except KeyError:
        pass
    row = METADATA_TYPES.get(record_type)
    cls = None
    if row is not None:
        cls = getattr(importlib.import_module(f"kraftpy.protocol.records.{row[0]}"), row[1])
    _CLASSES[record_type] = cls
    return cls


def frame_class(prefix: bytes) -> Frame | None:
    """(class, version, generated decoder) for values framed with this 3-byte prefix (frame version 1, one-byte
    type and version, a version the class has: every type Kafka defines); else None."""
    try:
        return _FRAMES[prefix]
    except KeyError:
        pass
    found = None
    if len(prefix) == 3 and prefix[0] == FRAME_VERSION and prefix[1] < 0x80 and prefix[2] < 0x80:
        cls = record_class(prefix[1])
        if cls is not None and prefix[2] in cls._DECODERS:
            found = (cls, prefix[2], cls._DECODERS[prefix[2]])
    _FRAMES[bytes(prefix)] = found
    return found


def encode_metadata_record(record: Message, version: int) -> bytes:
    try:
        prefix, fixed = _ENCODINGS[type(record), version]
    except (KeyError, TypeError):  # TypeError: an unhashable version, refused below
        prefix, fixed = _encoding(record, version)
    if fixed is not None:  # one pack for the fixed-size records (the common ones)
        try:
            return prefix + fixed(record)
        except Exception:  # noqa: S110 - the checked path below raises it as EncodeError
            pass
    parts = [prefix]
    record.encode_into(parts.append, version)
    return b"".join(parts)


def _encoding(record: Message, version: int) -> tuple[bytes, Any]:
    record_type = record.API_KEY
    if record_type is None or record_class(record_type) is not type(record):
        raise EncodeError(f"{type(record).__name__} is not a metadata record")
    if not isinstance(version, int) or isinstance(version, bool):
        raise EncodeError(f"record version {version!r} is not an integer")
    prefix = _PREFIX + uvarint_bytes(record_type) + uvarint_bytes(version)
    found = _ENCODINGS[type(record), version] = (prefix, type(record)._BYTES.get(version))
    return found


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
    entry = _FRAMES.get(value[:3], _UNSEEN)  # the common case: one-byte type and version
    if entry is _UNSEEN:
        entry = frame_class(value[:3])
    if entry is not None:
        record, end = entry[2](value, 3)
        if end != len(value):
            raise DecodeError(f"{len(value) - end} trailing bytes after {type(record).__name__}",
                              offset=end)
        return record, entry[1]
    record_type, version, pos = decode_metadata_header(value)
    cls = record_class(record_type)
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
