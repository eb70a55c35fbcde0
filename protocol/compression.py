"""Decompression of the records of a v2 batch, for the codecs Kafka writes.

KRaft writes its log uncompressed, but logs and captures from brokers may hold any of Kafka's
codecs, framed as Kafka frames them: gzip (RFC 1952), snappy in snappy-java's "xerial"
stream framing (a 16-byte header, then big-endian int32-length-prefixed raw snappy blocks;
a stream without the header is one raw snappy block, as snappy-java also accepts), lz4 in
the LZ4 frame format (independent blocks), zstd frames. The codecs come from cramjam.
"""

from __future__ import annotations

import struct
import zlib

try:
    import cramjam
except ImportError:  # a declared dependency; without it those codecs are a clear error
    cramjam = None

__all__ = ["CODEC_NAMES", "MAX_DECOMPRESSED", "DecompressError", "decompress"]

CODEC_NAMES = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
# No batch Kafka accepts comes near this once decompressed; more is a bomb or garbage.
MAX_DECOMPRESSED = 256 * 1024 * 1024

XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = 16  # magic, int32 version, int32 minimum compatible version
_INT32 = struct.Struct(">i")


class DecompressError(ValueError):
    """The bytes do not decompress with the batch's codec (or grow past MAX_DECOMPRESSED)."""


_CRAMJAM_ERROR: type[Exception] = DecompressError if cramjam is None else cramjam.DecompressionError


def decompress(codec: int, data: bytes) -> bytes:
    """The records of a batch whose attributes name `codec` (1-4)."""
    name = CODEC_NAMES.get(codec)
    if name is None or codec == 0:
        raise DecompressError(f"unknown compression codec {codec}")
    try:
        if codec == 1:
            return _gunzip(data)
        if cramjam is None:
            raise DecompressError(f"{name} records need the cramjam package")
        if codec == 2:
            return _snappy(data)
        if codec == 3:
            out = bytes(cramjam.lz4.decompress(data))
        else:
            out = bytes(cramjam.zstd.decompress(data))
    except DecompressError:
        raise
    except (_CRAMJAM_ERROR, zlib.error, ValueError, OSError) as exc:
        raise DecompressError(f"{name} records do not decompress ({exc})") from None
    _check_size(name, len(out))
    return out


def _check_size(name: str, size: int) -> None:
    if size > MAX_DECOMPRESSED:
        raise DecompressError(f"{name} records decompress past {MAX_DECOMPRESSED} bytes")


def _gunzip(data: bytes) -> bytes:
    # gzip members may follow one another (gzip.decompress reads them all); bounded output
    parts: list[bytes] = []
    size = 0
    rest = data
    while True:
        d = zlib.decompressobj(wbits=31)
        out = d.decompress(rest, MAX_DECOMPRESSED + 1 - size)
        size += len(out)
        parts.append(out)
        _check_size("gzip", size)
        if d.unconsumed_tail:
            raise DecompressError(f"gzip records decompress past {MAX_DECOMPRESSED} bytes")
        if not d.eof:
            raise DecompressError("gzip records do not decompress (the stream ends early)")
        rest = d.unused_data
        if not rest:
            return b"".join(parts)


def _snappy(data: bytes) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _snappy_block(data)
    if len(data) < _XERIAL_HEADER:
        raise DecompressError("snappy records do not decompress (xerial header cut short)")
    pos = _XERIAL_HEADER
    parts: list[bytes] = []
    size = 0
    while pos < len(data):
        if pos + 4 > len(data):
            raise DecompressError("snappy records do not decompress (block length cut short)")
        n = _INT32.unpack_from(data, pos)[0]
        pos += 4
        if n < 0 or pos + n > len(data):
            raise DecompressError(f"snappy records do not decompress (block of {n} bytes "
                                  f"with {len(data) - pos} left)")
        block = _snappy_block(data[pos : pos + n])
        size += len(block)
        _check_size("snappy", size)
        parts.append(block)
        pos += n
    return b"".join(parts)


def _snappy_block(block: bytes) -> bytes:
    # a raw snappy block starts with its uncompressed length: refuse a bomb before allocating
    n = shift = i = 0
    while True:
        if i >= len(block) or i > 4:
            raise DecompressError("snappy records do not decompress (bad block preamble)")
        b = block[i]
        n |= (b & 0x7F) << shift
        i += 1
        if b < 0x80:
            break
        shift += 7
    _check_size("snappy", n)
    return bytes(cramjam.snappy.decompress_raw(block))
