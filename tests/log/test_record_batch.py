"""The v2 record batch against independent code (kafka-python, kio) and real Kafka logs."""

from __future__ import annotations

import datetime as dt
import gzip
import io
import struct

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords
from kio.records.schema import NewRecordBatch
from kio.records.schema import Record as KioRecord
from kio.records.schema import RecordHeader as KioHeader
from kio.records.writers import write_batch
from kio.static.primitive import i8, i16, i32, i64
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.record_batch import (
    ATTR_CONTROL,
    CorruptBatchError,
    RecordBatch,
    TruncatedBatchError,
    build_record_batch,
    decode_varint,
    encode_varint,
    iter_record_batches,
)
from support.paths import reference

values_st = st.lists(st.one_of(st.none(), st.binary(max_size=300)), min_size=1, max_size=40)


def kafka_python_batches(data: bytes) -> list:
    records = MemoryRecords(data)
    out = []
    while records.has_next():
        out.append(records.next_batch())
    return out


def test_varints_round_trip_at_the_edges() -> None:
    for value in [0, 1, -1, 63, -64, 64, -65, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)]:
        raw = encode_varint(value)
        assert decode_varint(raw + b"\xff", 0) == (value, len(raw))
    assert encode_varint(-1) == b"\x01" and encode_varint(300) == b"\xd8\x04"


def test_kraft_shape_matches_kafka_layout() -> None:
    raw = build_record_batch(
        [b"\x01\x14\x00\x00"], base_offset=7, partition_leader_epoch=3, timestamp=99
    )
    base, length, epoch, magic, crc = struct.unpack_from(">qiibI", raw)
    assert (base, length, epoch, magic) == (7, len(raw) - 12, 3, 2)
    assert crc == crc32c.crc32c(raw[21:])
    # record: length 10 (zig-zag 0x14), attrs 0, ts delta 0, offset delta 0, key -1, value len 4, value, 0 headers
    assert raw[61:] == b"\x14\x00\x00\x00\x01\x08\x01\x14\x00\x00\x00"
    (batch,) = iter_record_batches(raw)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
    assert (batch.base_timestamp, batch.max_timestamp, batch.records_count) == (99, 99, 1)


@settings(max_examples=60, deadline=None)
@given(
    values=values_st,
    base_offset=st.integers(0, 2**40),
    epoch=st.integers(0, 2**31 - 1),
    ts=st.integers(0, 2**42),
)
def test_kafka_python_reads_our_batches(values, base_offset, epoch, ts) -> None:
    raw = build_record_batch(
        values, base_offset=base_offset, partition_leader_epoch=epoch, timestamp=ts
    )
    (theirs,) = kafka_python_batches(raw)
    assert theirs.validate_crc()
    assert theirs.base_offset == base_offset and theirs.leader_epoch == epoch
    assert theirs.last_offset == base_offset + len(values) - 1
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs]
    assert got == [(base_offset + i, ts, None, v, []) for i, v in enumerate(values)]
    (ours,) = iter_record_batches(raw)
    assert ours.values() == values
    assert [tuple(r) for r in ours.records()] == [(o, t, k, v, list(h)) for o, t, k, v, h in got]


@pytest.mark.parametrize("nulls", [False, True], ids=["values", "with-nulls"])
def test_kraft_shape_at_every_varint_width_agrees_with_kafka_python(nulls: bool) -> None:
    """A KRaft-shaped batch makes each record's head once per value length and offset-delta
    width: a batch of 70,000 records crosses the one-, two- and three-byte deltas and the
    table's end, with values of 0 to 70,000 bytes; it reads back the same with kafka-python
    and matches the general path (explicit null keys) byte for byte. With null values the
    batch takes the general path and still agrees."""
    sizes = [0, 1, 63, 64, 127, 128, 4095, 4096, 5000, 8191, 8192, 70_000]
    values = [None if nulls and i % 997 == 0
              else bytes([i % 251]) * sizes[i % len(sizes) if i % 5000 == 11 else i % 9]
              for i in range(70_000)]
    raw = build_record_batch(values, base_offset=3, timestamp=11)
    assert raw == build_record_batch(values, base_offset=3, timestamp=11,
                                     keys=[None] * len(values))
    (theirs,) = kafka_python_batches(raw)
    assert theirs.validate_crc()
    assert [(r.offset, r.key, r.value) for r in theirs] == [
        (3 + i, None, v) for i, v in enumerate(values)]
    (ours,) = iter_record_batches(raw)
    assert ours.values() == values


def test_the_offset_delta_varint_table_is_encode_varint() -> None:
    """Record offset deltas come from a table of varints built once (the three-byte ones cut
    from repeated byte strings); every entry is the varint itself."""
    from kraftpy.protocol import record_batch

    table = record_batch.offset_delta_varints()
    assert len(table) == 1 << 16
    assert all(table[v] == encode_varint(v) for v in range(len(table)))


@settings(max_examples=40, deadline=None)
@given(
    data=st.lists(
        st.tuples(
            st.one_of(st.none(), st.binary(max_size=50)),
            st.one_of(st.none(), st.binary(max_size=200)),
            st.lists(
                st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))),
                max_size=3,
            ),
            st.integers(0, 10**6),
        ),
        min_size=1,
        max_size=20,
    )
)
def test_headers_keys_and_timestamps_agree_with_kafka_python(data) -> None:
    keys = [k for k, _, _, _ in data]
    values = [v for _, v, _, _ in data]
    headers = [h for _, _, h, _ in data]
    stamps = [1_700_000_000_000 + t for *_, t in data]
    raw = build_record_batch(values, keys=keys, headers=headers, timestamps=stamps, base_offset=5)
    (theirs,) = kafka_python_batches(raw)
    assert theirs.validate_crc()
    expected = [(5 + i, stamps[i], keys[i], values[i], headers[i]) for i in range(len(data))]
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs] == expected
    (ours,) = iter_record_batches(raw)
    assert [tuple(r) for r in ours.records()] == expected
    assert ours.values() == values
    assert ours.max_timestamp == max(stamps)


@pytest.mark.parametrize("compression", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_we_read_kafka_python_builder_batches(compression: int) -> None:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression,
        is_transactional=True,
        producer_id=42,
        producer_epoch=3,
        base_sequence=10,
        batch_size=1 << 20,
    )
    for i in range(25):
        builder.append(
            i, timestamp=1000 + i, key=b"k%d" % i, value=b"v" * i, headers=[("h", b"%d" % i)]
        )
    raw = bytes(builder.build())
    (batch,) = iter_record_batches(raw)
    assert batch.is_transactional and batch.compression == compression
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 3, 10)
    records = batch.records()
    assert [r.offset for r in records] == list(range(25))
    assert [r.timestamp for r in records] == [1000 + i for i in range(25)]
    assert [r.headers for r in records] == [[("h", b"%d" % i)] for i in range(25)]
    assert batch.values() == [b"v" * i for i in range(25)]


def test_log_append_time_and_long_varints_agree_with_kafka_python() -> None:
    # multi-byte varints everywhere: 200 records, 300-byte keys and values, big timestamp deltas
    n = 200
    values = [b"v" * (i + 100) for i in range(n)]
    keys = [None if i % 3 else b"k" * 300 for i in range(n)]
    headers = [[("h" * 70, b"x" * 80), ("n", None)] if i % 2 else [] for i in range(n)]
    stamps = [1_700_000_000_000 + i * 1_000_003 for i in range(n)]
    raw = bytearray(build_record_batch(values, keys=keys, headers=headers, timestamps=stamps,
                                       base_offset=1 << 40))
    raw[22] |= 0x08  # LogAppendTime: every record takes the batch's max timestamp
    raw[35:43] = struct.pack(">q", 1_800_000_000_000)
    raw[17:21] = struct.pack(">I", crc32c.crc32c(bytes(raw[21:])))
    raw = bytes(raw)
    (theirs,) = kafka_python_batches(raw)
    expected = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in theirs]
    assert {t for _, t, *_ in expected} == {1_800_000_000_000}
    (ours,) = iter_record_batches(raw)
    assert [tuple(r) for r in ours.records()] == expected
    assert ours.values() == values


def test_we_read_kio_writer_batches() -> None:
    base = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    records = tuple(
        KioRecord(
            attributes=i8(0),
            timestamp=base + dt.timedelta(milliseconds=3 * i),
            offset=i64(100 + i),
            key=None if i % 2 else b"key%d" % i,
            value=b"value-%d" % i,
            headers=(KioHeader(key=b"x", value=None),) if i % 3 == 0 else (),
        )
        for i in range(10)
    )
    new = NewRecordBatch(
        producer_id=i64(-1),
        producer_epoch=i16(-1),
        partition_leader_epoch=i32(4),
        base_sequence=i32(-1),
        records=records,
        attributes=i16(0),
    )
    buf = io.BytesIO()
    write_batch(buf, new)
    (batch,) = iter_record_batches(buf.getvalue())
    assert batch.base_offset == 100 and batch.partition_leader_epoch == 4
    got = batch.records()
    base_ms = int(base.timestamp() * 1000)
    assert [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in got] == [
        (
            100 + i,
            base_ms + 3 * i,
            None if i % 2 else b"key%d" % i,
            b"value-%d" % i,
            [("x", None)] if i % 3 == 0 else [],
        )
        for i in range(10)
    ]


def test_control_batch_flag() -> None:
    raw = build_record_batch(
        [b"\x00\x00\x00\x00\x00\x00"], keys=[b"\x00\x00\x00\x01"], control=True
    )
    (batch,) = iter_record_batches(raw)
    assert batch.is_control and batch.attributes == ATTR_CONTROL
    (theirs,) = kafka_python_batches(raw)
    assert theirs.is_control_batch
    (record,) = list(theirs)
    assert record.type == 1  # COMMIT, as kafka-python reads the control key


def _three_batches() -> tuple[bytes, list[int]]:
    parts = [
        build_record_batch([b"a" * 20, b"b" * 30], base_offset=2 * i, timestamp=5) for i in range(3)
    ]
    starts = [0, len(parts[0]), len(parts[0]) + len(parts[1])]
    return b"".join(parts), starts


def test_truncation_at_every_byte_is_a_truncated_batch_error() -> None:
    data, starts = _three_batches()
    for cut in range(starts[2] + 1, len(data)):
        with pytest.raises(TruncatedBatchError) as info:
            list(iter_record_batches(data[:cut], position=1000))
        assert info.value.offset == 1000 + starts[2]


def test_flipped_bits_are_corrupt_batch_errors_naming_the_position() -> None:
    data, starts = _three_batches()
    for byte in range(starts[1] + 16, starts[2]):  # magic onwards: covered by magic + CRC
        for bit in (0, 3, 7):
            bad = bytearray(data)
            bad[byte] ^= 1 << bit
            with pytest.raises(DecodeError) as info:
                list(iter_record_batches(bytes(bad)))
            assert info.value.offset == starts[1], (byte, bit)


def test_bad_record_layout_with_a_valid_crc_is_refused() -> None:
    raw = bytearray(build_record_batch([b"abc"], timestamp=1))
    raw[61] = 0x7E  # record length 63: runs past the batch
    raw[17:21] = struct.pack(">I", crc32c.crc32c(bytes(raw[21:])))
    (batch,) = iter_record_batches(bytes(raw))
    with pytest.raises(CorruptBatchError, match="base offset 0"):
        batch.values()
    with pytest.raises(CorruptBatchError):
        batch.records()


def test_trailing_bytes_inside_a_batch_are_refused() -> None:
    raw = bytearray(build_record_batch([b"abc"], timestamp=1) + b"\x00")
    raw[8:12] = struct.pack(">i", len(raw) - 12)
    raw[17:21] = struct.pack(">I", crc32c.crc32c(bytes(raw[21:])))
    (batch,) = iter_record_batches(bytes(raw))
    with pytest.raises(CorruptBatchError, match="1 bytes left"):
        batch.values()


def test_unsupported_compression_is_a_clear_error() -> None:
    raw = bytearray(build_record_batch([b"abc"], timestamp=1))
    raw[22] |= 4  # zstd
    raw[17:21] = struct.pack(">I", crc32c.crc32c(bytes(raw[21:])))
    (batch,) = iter_record_batches(bytes(raw))
    with pytest.raises(CorruptBatchError, match="zstd"):
        batch.values()


def test_gzip_garbage_is_a_clear_error() -> None:
    raw = bytearray(build_record_batch([b"abc"], timestamp=1))
    raw[22] |= 1
    raw[61:] = gzip.compress(b"xyz")[:-3]
    raw[8:12] = struct.pack(">i", len(raw) - 12)
    raw[17:21] = struct.pack(">I", crc32c.crc32c(bytes(raw[21:])))
    (batch,) = iter_record_batches(bytes(raw))
    with pytest.raises(CorruptBatchError, match="decompress"):
        batch.values()


def test_memoryview_buffers_give_bytes() -> None:
    raw = build_record_batch([b"abc", None], timestamp=1)
    (batch,) = iter_record_batches(memoryview(raw))  # type: ignore[arg-type]
    assert batch.values() == [b"abc", None]
    assert all(type(v) is bytes for v in batch.values() if v is not None)


@pytest.mark.parametrize(
    "segment",
    [
        ("flink-on-prem", "00000000000000000000.log"),
        ("spring-kafka", "00000000000000232914.log"),
        ("kafka-4.1-generated", "00000000000000000000.log"),
    ],
)
def test_real_kafka_segments_decode_and_rebuild_byte_for_byte(segment: tuple[str, str]) -> None:
    path = reference("real-metadata-logs", segment[0], "data", "__cluster_metadata-0", segment[1])
    data = path.read_bytes()
    expected_offset = None
    rebuilt = 0
    for batch in iter_record_batches(data):
        assert isinstance(batch, RecordBatch)
        if expected_offset is not None:
            assert batch.base_offset == expected_offset
        expected_offset = batch.next_offset
        values = batch.values()
        assert len(values) == batch.records_count == batch.last_offset_delta + 1
        if not batch.is_control:
            assert all(v is not None and v[0] == 1 for v in values)  # metadata frame version 1
            again = build_record_batch(
                values,
                base_offset=batch.base_offset,
                partition_leader_epoch=batch.partition_leader_epoch,
                timestamp=batch.base_timestamp,
            )
            assert again == batch.raw()
            rebuilt += 1
    assert rebuilt > 0


@settings(max_examples=300, deadline=None)
@given(values_st, st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 7)), max_size=3))
def test_values_agree_with_records_on_mutated_batches(values, flips) -> None:
    # values() reads small records with one unpack; whatever records() accepts, values() must
    # read the same way, and a batch records() refuses must not crash values()
    raw = bytearray(build_record_batch(values, base_offset=3, timestamp=1))
    for where, bit in flips:
        i = 61 + where % (len(raw) - 61)
        raw[i] ^= 1 << bit
    (batch,) = iter_record_batches(bytes(raw), verify_crc=False)
    try:
        expected = [r.value for r in batch.records()]
    except CorruptBatchError:
        try:  # values() skips header text, so it may accept it; anything but this error fails
            batch.values()
        except CorruptBatchError:
            pass
        return
    assert batch.values() == expected
    if not flips:
        assert expected == values


def test_values_of_every_varint_width() -> None:
    # record and value lengths of one, two and three varint bytes, next to each other
    values = [b"a" * n for n in (0, 10, 63, 64, 100, 8191, 8192, 20_000, 1_100_000)] + [None]
    raw = build_record_batch(values, base_offset=0, timestamp=1)
    (batch,) = iter_record_batches(raw)
    assert batch.values() == values
    assert [r.value for r in batch.records()] == values
    (theirs,) = kafka_python_batches(raw)
    assert [r.value for r in theirs] == values


def test_records_from_memoryview_and_bytearray_buffers() -> None:
    raw = build_record_batch([b"abc", None, b"x" * 300], timestamp=7, base_offset=4)
    (ref,) = iter_record_batches(raw)
    for buffer in (memoryview(raw), bytearray(raw), memoryview(b"pad" + raw)[3:]):
        (batch,) = iter_record_batches(buffer)  # type: ignore[arg-type]
        got = batch.records()
        assert got == ref.records()
        assert [r.offset for r in got] == [4, 5, 6] and {r.timestamp for r in got} == {7}
        assert all(type(r.value) is bytes for r in got if r.value is not None)
