"""Compressed record batches: each of Kafka's codecs, framed as Kafka frames it, decoded by
ours from bytes made by other libraries (kafka-python's codec module, lz4, zstandard, zlib);
broken or oversized input is a clear error."""

from __future__ import annotations

import gzip
import struct
import zlib

import crc32c
import lz4.frame
import pytest
import snappy
import zstandard
from kafka.codec import snappy_encode
from kraftpy.protocol import compression
from kraftpy.protocol.compression import DecompressError, decompress
from kraftpy.protocol.record_batch import CorruptBatchError, build_record_batch, iter_record_batches

PLAIN = b"".join(b"record %d of the batch; " % i for i in range(5000))  # ~120 KB


def test_snappy_xerial_blocks_and_raw() -> None:
    framed = snappy_encode(PLAIN, xerial_compatible=True, xerial_blocksize=32 * 1024)
    assert framed.startswith(b"\x82SNAPPY\x00") and len(PLAIN) > 3 * 32 * 1024  # several blocks
    assert decompress(2, framed) == PLAIN
    assert decompress(2, snappy.compress(PLAIN)) == PLAIN  # no xerial header: one raw block
    assert decompress(2, snappy_encode(b"", xerial_compatible=True)) == b""


@pytest.mark.parametrize("linked", [False, True])
@pytest.mark.parametrize("checksum", [False, True])
def test_lz4_frames(linked: bool, checksum: bool) -> None:
    data = lz4.frame.compress(PLAIN, block_linked=linked, content_checksum=checksum,
                              block_size=lz4.frame.BLOCKSIZE_MAX64KB)
    assert decompress(3, data) == PLAIN


@pytest.mark.parametrize("size", [False, True])
def test_zstd_frames_with_and_without_content_size(size: bool) -> None:
    data = zstandard.ZstdCompressor(write_content_size=size).compress(PLAIN)
    assert decompress(4, data) == PLAIN


def test_gzip_members_follow_one_another() -> None:
    data = gzip.compress(PLAIN[:1000]) + gzip.compress(PLAIN[1000:])
    assert decompress(1, data) == PLAIN


@pytest.mark.parametrize("codec,name", [(1, "gzip"), (2, "snappy"), (3, "lz4"), (4, "zstd")])
def test_garbage_names_the_codec(codec: int, name: str) -> None:
    # (b"\x00" alone is a valid raw snappy block: the empty one)
    for junk in (b"", b"\x01" if codec == 2 else b"\x00", b"not compressed at all", b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x09ab"):
        with pytest.raises(DecompressError, match=name):
            decompress(codec, junk)


def test_truncated_streams_are_errors() -> None:
    for codec, data in ((1, gzip.compress(PLAIN)), (2, snappy_encode(PLAIN)),
                        (3, lz4.frame.compress(PLAIN)), (4, zstandard.ZstdCompressor().compress(PLAIN))):
        with pytest.raises(DecompressError):
            decompress(codec, data[: len(data) // 2])


def test_unknown_codec() -> None:
    for codec in (0, 5, 7):
        with pytest.raises(DecompressError, match="codec"):
            decompress(codec, b"x")


def test_bombs_stop_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compression, "MAX_DECOMPRESSED", 50_000)
    for codec, data in ((1, gzip.compress(PLAIN)), (2, snappy_encode(PLAIN)), (2, snappy.compress(PLAIN)),
                        (3, lz4.frame.compress(PLAIN)), (4, zstandard.ZstdCompressor().compress(PLAIN))):
        with pytest.raises(DecompressError, match="past 50000"):
            decompress(codec, data)
    # a raw snappy block claiming 4 GiB is refused from its preamble, before any allocation
    with pytest.raises(DecompressError, match="past"):
        decompress(2, b"\xff\xff\xff\xff\x0f" + b"\x00" * 8)


def _with_codec(raw: bytes, codec: int, records: bytes) -> bytes:
    out = bytearray(raw[:61]) + records
    out[22] |= codec
    out[8:12] = struct.pack(">i", len(out) - 12)
    out[17:21] = struct.pack(">I", crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_batches_of_each_codec_give_the_plain_records(codec: int) -> None:
    values = [b"value-%d" % i * (i % 7 + 1) for i in range(300)]
    plain = build_record_batch(values, base_offset=10, timestamp=5)
    records = plain[61:]
    packed = {1: lambda d: gzip.compress(d), 2: snappy_encode, 3: lambda d: lz4.frame.compress(d, block_linked=False),
              4: lambda d: zstandard.ZstdCompressor(write_content_size=False).compress(d)}[codec](records)
    (batch,) = iter_record_batches(_with_codec(plain, codec, packed))
    (ref,) = iter_record_batches(plain)
    assert batch.compression == codec
    assert batch.values() == values
    assert batch.records() == ref.records()
    (broken,) = iter_record_batches(_with_codec(plain, codec, packed[:-5] + zlib.compress(b"")))
    with pytest.raises(CorruptBatchError, match="base offset 10"):
        broken.values()
