"""Kafka's wire primitives, offset-based, plus construct classes that host them.

Hot paths (generated codecs, record batches) call the plain functions here on a bytes buffer
and an offset: `read_x(buf, pos) -> (value, pos)` and `x_bytes(value) -> bytes`. The
construct classes wrap the same functions so every primitive also parses and builds as a
construct, and compiles (construct's `compile()`) into a direct call of the same function.
"""

from __future__ import annotations

import io
import struct
import uuid
from typing import Any

import construct as cs
from kraftpy.protocol.errors import DecodeError, EncodeError

ZERO_UUID = uuid.UUID(int=0)
_new = object.__new__
_setattr = object.__setattr__
_SAFE_UNKNOWN = uuid.SafeUUID.unknown

# uvarint of 0..127 as one byte each, looked up instead of computed
UV1 = tuple(bytes((i,)) for i in range(128))


class AbsentFieldError(EncodeError):
    """A non-default value for a field the target version lacks (the caller adds the version)."""

    def __init__(self, field: str):
        self.field = field
        super().__init__(f"non-default value for field {field}, which this version lacks")


# Metadata logs repeat a few ids (topics, directories, incarnations) very often; UUIDs are
# immutable, so decoders share one object per id. Generated code tries `UUID_CACHE.get(raw)`
# inline and calls uuid_from_bytes only on a miss.
UUID_CACHE: dict[bytes, uuid.UUID] = {}
_UUID_CACHE_MAX = 4096

# struct.Struct(">{n}{code}") for arrays of fixed-size elements, n < 64
ARRAY_STRUCTS = {code: tuple(struct.Struct(f">{n}{code}") for n in range(64)) for code in "?bhHiIqd"}
# n 16-byte pieces in one call, for arrays of n < 64 uuids
UUID_ARRAYS = tuple(struct.Struct(">" + "16s" * n) for n in range(64))


def uuid_from_bytes(raw: bytes) -> uuid.UUID:
    """A UUID from 16 big-endian bytes, without uuid.UUID's argument checks (hot path)."""
    u = UUID_CACHE.get(raw)
    if u is not None:
        return u
    n = int.from_bytes(raw, "big")
    u = _new(uuid.UUID)
    _setattr(u, "int", n)
    _setattr(u, "is_safe", _SAFE_UNKNOWN)
    if len(UUID_CACHE) >= _UUID_CACHE_MAX:
        UUID_CACHE.clear()
    UUID_CACHE[bytes(raw)] = u
    return u


def nest(err: DecodeError, field: str | None) -> DecodeError:
    """The same error, its field path prefixed by the enclosing field."""
    if field is None:
        return err
    path = field if err.field is None else f"{field}.{err.field}"
    new = DecodeError(err.reason, offset=err.offset, field=path)
    return new


def truncated(pos: int, field: str | None) -> DecodeError:
    return DecodeError("truncated input", offset=pos, field=field)


# --- unsigned varints (flexible message versions) --------------------------------------


def read_uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 of at most 5 bytes (Kafka rejects a 5th byte with its high bit set)."""
    start = pos
    value = 0
    shift = 0
    try:
        while True:
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value, pos
            shift += 7
            if shift >= 35:
                raise DecodeError("varint is too long", offset=start)
    except IndexError:
        raise DecodeError("truncated varint", offset=start) from None


def uvarint_bytes(value: int) -> bytes:
    if 0 <= value < 0x80:
        return UV1[value]
    if value < 0 or value > 0xFFFFFFFF:
        raise EncodeError(f"uvarint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# --- zig-zag varints (record format) -----------------------------------------------------


def _read_zigzag(buf: bytes, pos: int, max_bytes: int, what: str) -> tuple[int, int]:
    start = pos
    value = 0
    shift = 0
    try:
        for _ in range(max_bytes):
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return (value >> 1) ^ -(value & 1), pos
            shift += 7
    except IndexError:
        raise DecodeError(f"truncated {what}", offset=start) from None
    raise DecodeError(f"{what} is too long", offset=start)


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    """Zig-zag int32 varint (at most 5 bytes)."""
    b = buf[pos] if pos < len(buf) else 0x80
    if not b & 0x80 and pos < len(buf):
        return (b >> 1) ^ -(b & 1), pos + 1
    return _read_zigzag(buf, pos, 5, "varint")


def read_varlong(buf: bytes, pos: int) -> tuple[int, int]:
    """Zig-zag int64 varlong (at most 10 bytes)."""
    return _read_zigzag(buf, pos, 10, "varlong")


def varint_bytes(value: int) -> bytes:
    if not -0x80000000 <= value <= 0x7FFFFFFF:
        raise EncodeError(f"varint out of range: {value}")
    return _zigzag_bytes((value << 1) ^ (value >> 31))


def varlong_bytes(value: int) -> bytes:
    if not -0x8000000000000000 <= value <= 0x7FFFFFFFFFFFFFFF:
        raise EncodeError(f"varlong out of range: {value}")
    return _zigzag_bytes((value << 1) ^ (value >> 63))


def _zigzag_bytes(z: int) -> bytes:
    if z < 0x80:
        return UV1[z]
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


# --- tagged-field sections -----------------------------------------------------------------


def write_tagged_fields(tags: list[tuple[int, bytes]], append: Any) -> None:
    """Write a tagged-field section; `tags` must already be in ascending tag order."""
    append(uvarint_bytes(len(tags)))
    for tag, data in tags:
        append(uvarint_bytes(tag))
        append(uvarint_bytes(len(data)))
        append(data)


def read_tagged_fields(buf: bytes, pos: int) -> tuple[dict[int, bytes], int]:
    """Read a tagged-field section as raw bytes per tag."""
    count, pos = read_uvarint(buf, pos)
    if count > len(buf) - pos:
        raise DecodeError(f"{count} tagged fields cannot fit in {len(buf) - pos} bytes", offset=pos)
    out: dict[int, bytes] = {}
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        end = pos + size
        if end > len(buf):
            raise DecodeError(f"tagged field {tag} of {size} bytes is truncated", offset=pos)
        out[tag] = buf[pos:end]
        pos = end
    return out, pos


def tagged_fields_bytes(tags: dict[int, bytes]) -> bytes:
    parts: list[bytes] = []
    write_tagged_fields(sorted(tags.items()), parts.append)
    return b"".join(parts)


# --- strings and bytes ----------------------------------------------------------------------

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def read_string(buf: bytes, pos: int, *, compact: bool, nullable: bool) -> tuple[str | None, int]:
    start = pos
    if compact:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        if pos + 2 > len(buf):
            raise truncated(pos, None)
        n = _I16.unpack_from(buf, pos)[0]
        pos += 2
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise DecodeError("null or negative length in a non-nullable string", offset=start)
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"string of {n} bytes is truncated", offset=start)
    try:
        return buf[pos:end].decode(), end
    except UnicodeDecodeError:
        raise DecodeError("string is not valid UTF-8", offset=pos) from None


def string_bytes(value: str | None, *, compact: bool) -> bytes:
    if value is None:
        return b"\x00" if compact else b"\xff\xff"
    data = value.encode()
    if compact:
        return uvarint_bytes(len(data) + 1) + data
    if len(data) > 0x7FFF:
        raise EncodeError(f"string of {len(data)} bytes is too long for an int16 length")
    return _I16.pack(len(data)) + data


def read_bytes(buf: bytes, pos: int, *, compact: bool, nullable: bool) -> tuple[bytes | None, int]:
    start = pos
    if compact:
        n, pos = read_uvarint(buf, pos)
        n -= 1
    else:
        if pos + 4 > len(buf):
            raise truncated(pos, None)
        n = _I32.unpack_from(buf, pos)[0]
        pos += 4
    if n < 0:
        if n == -1 and nullable:
            return None, pos
        raise DecodeError("null or negative length in non-nullable bytes", offset=start)
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"bytes of {n} announced are truncated", offset=start)
    return buf[pos:end], end


def bytes_bytes(value: bytes | None, *, compact: bool) -> bytes:
    if value is None:
        return b"\x00" if compact else b"\xff\xff\xff\xff"
    if compact:
        return uvarint_bytes(len(value) + 1) + bytes(value)
    return _I32.pack(len(value)) + bytes(value)


# --- construct hosting ------------------------------------------------------------------------


def _stream_buffer(stream: Any) -> tuple[bytes, int]:
    if isinstance(stream, io.BytesIO):
        return stream.getvalue(), stream.tell()
    pos = stream.tell()
    data = stream.read()
    stream.seek(pos)
    return b"\x00" * pos + data, pos  # offsets stay those of the stream


class OffsetConstruct(cs.Construct):
    """A construct whose parse and build are offset-based functions.

    `reader(buf, pos) -> (value, pos)` and `writer(value) -> bytes`. `compile()` emits a
    direct call of the same functions, so compiled and interpreted forms share one codec.
    """

    def __init__(self, reader: Any, writer: Any, name: str = "offset"):
        super().__init__()
        self.reader = reader
        self.writer = writer
        self.label = name
        self.flagbuildnone = False

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        buf, pos = _stream_buffer(stream)
        try:
            value, end = self.reader(buf, pos)
        except DecodeError as exc:
            raise cs.StreamError(str(exc), path=path) from exc
        stream.seek(end)
        return value

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        stream.write(self.writer(obj))
        return obj

    def _sizeof(self, context: Any, path: str) -> int:
        raise cs.SizeofError("Kafka encodings have no fixed size", path=path)

    def _emitparse(self, code: Any) -> str:
        key = id(self)
        code.linkedinstances[key] = self
        code.append(f"""
            def parse_offset_{key}(io, this):
                buf, pos = _kraftpy_stream_buffer(io)
                value, end = linkedinstances[{key}].reader(buf, pos)
                io.seek(end)
                return value
        """)
        code.append("from kraftpy.protocol.primitives import _stream_buffer as _kraftpy_stream_buffer")
        return f"parse_offset_{key}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        key = id(self)
        code.linkedinstances[key] = self
        return f"(io.write(linkedinstances[{key}].writer(obj)), obj)[1]"

    def __repr__(self) -> str:
        return f"<{self.label}>"


UVarInt = OffsetConstruct(read_uvarint, uvarint_bytes, "uvarint")
VarInt = OffsetConstruct(read_varint, varint_bytes, "varint")
VarLong = OffsetConstruct(read_varlong, varlong_bytes, "varlong")
String = OffsetConstruct(lambda b, p: read_string(b, p, compact=False, nullable=False),
                         lambda v: string_bytes(v, compact=False), "string")
NullableString = OffsetConstruct(lambda b, p: read_string(b, p, compact=False, nullable=True),
                                 lambda v: string_bytes(v, compact=False), "nullable_string")
CompactString = OffsetConstruct(lambda b, p: read_string(b, p, compact=True, nullable=False),
                                lambda v: string_bytes(v, compact=True), "compact_string")
CompactNullableString = OffsetConstruct(lambda b, p: read_string(b, p, compact=True, nullable=True),
                                        lambda v: string_bytes(v, compact=True),
                                        "compact_nullable_string")
Bytes = OffsetConstruct(lambda b, p: read_bytes(b, p, compact=False, nullable=False),
                        lambda v: bytes_bytes(v, compact=False), "bytes")
NullableBytes = OffsetConstruct(lambda b, p: read_bytes(b, p, compact=False, nullable=True),
                                lambda v: bytes_bytes(v, compact=False), "nullable_bytes")
CompactBytes = OffsetConstruct(lambda b, p: read_bytes(b, p, compact=True, nullable=False),
                               lambda v: bytes_bytes(v, compact=True), "compact_bytes")
CompactNullableBytes = OffsetConstruct(lambda b, p: read_bytes(b, p, compact=True, nullable=True),
                                       lambda v: bytes_bytes(v, compact=True),
                                       "compact_nullable_bytes")


def read_uuid(buf: bytes, pos: int) -> tuple[uuid.UUID, int]:
    end = pos + 16
    if end > len(buf):
        raise truncated(pos, None)
    return uuid_from_bytes(buf[pos:end]), end


Uuid = OffsetConstruct(read_uuid, lambda v: v.bytes, "uuid")
TaggedFields = OffsetConstruct(read_tagged_fields, tagged_fields_bytes, "tagged_fields")


class _Unset:
    """The 'argument not given' marker of generated constructors (lists and structs are fresh)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()
