"""BatchAccumulator (the transaction log's): several operations share one batch, none is ever
split.

The batch a flush seals must be exactly the batch `build_record_batch` makes of the same
records (and kafka-python must read it as Kafka's); indexes written while appending must equal
the ones recovery rebuilds; an operation that cannot fit changes nothing.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.memory_records import MemoryRecords
from kraftpy.controller.log.accumulator import BatchAccumulator
from kraftpy.controller.log.files import read_leader_epochs
from kraftpy.controller.log.partition_log import MAX_BATCH_BYTES, PartitionLog
from kraftpy.protocol.record_batch import (
    RECORD_BATCH_OVERHEAD,
    build_record_batch,
    iter_record_batches,
)

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def _open(d: Path, **kwargs: object) -> tuple[PartitionLog, BatchAccumulator]:
    plog = PartitionLog.open(d, topic_id=TOPIC_ID, **kwargs)  # type: ignore[arg-type]
    return plog, BatchAccumulator(plog)


def _segments(d: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))


def test_operations_between_flushes_share_one_batch_byte_for_byte(tmp_path: Path) -> None:
    plog, acc = _open(tmp_path / "p")
    ops = [[b"a"], [b"bb", b"ccc"], [b"d" * 300], [b"e"] * 70]  # deltas past one varint byte
    bases = [acc.add(op, leader_epoch=3, timestamp=1000 + i) for i, op in enumerate(ops)]
    assert bases == [0, 1, 3, 4] and acc.log_end_offset == 74 and plog.flushed_offset == 0
    assert acc.flush() == 74
    values = [v for op in ops for v in op]
    # One batch, with the first operation's timestamp (as KRaft's accumulator stamps a batch).
    expected = build_record_batch(values, base_offset=0, partition_leader_epoch=3, timestamp=1000)
    assert _segments(tmp_path / "p") == expected
    acc.seal()
    plog.close()


def test_kafka_python_reads_accumulated_batches(tmp_path: Path) -> None:
    rng = random.Random(7)
    plog, acc = _open(tmp_path / "p", segment_bytes=3000)
    values: list[bytes] = []
    for round_ in range(40):
        for _ in range(rng.randint(1, 9)):
            op = [b"%d" % len(values + [b""] * i) * rng.randint(1, 20)
                  for i in range(rng.randint(1, 4))]
            acc.add(op, leader_epoch=1, timestamp=round_)
            values.extend(op)
        acc.flush()
    acc.seal()
    plog.close()
    offsets, got = [], []
    segments = sorted((tmp_path / "p").glob("*.log"))
    assert len(segments) > 2  # rolled between sealed batches
    for seg in segments:
        records = MemoryRecords(seg.read_bytes())
        while records.has_next():
            batch = records.next_batch()
            assert batch.validate_crc() and batch.leader_epoch == 1
            for record in batch:
                offsets.append(record.offset)
                got.append(record.value)
    assert offsets == list(range(len(values))) and got == values


@settings(max_examples=40, deadline=None)
@given(
    ops=st.lists(st.lists(st.binary(max_size=120), min_size=1, max_size=6), min_size=1,
                 max_size=30),
    limit=st.integers(min_value=RECORD_BATCH_OVERHEAD + 150, max_value=2000),
)
def test_an_operation_is_never_split_and_batches_stay_under_the_limit(
    tmp_path_factory: pytest.TempPathFactory, ops: list[list[bytes]], limit: int
) -> None:
    d = tmp_path_factory.mktemp("p")
    plog, acc = _open(d, max_batch_bytes=limit)
    starts = {acc.add(op, leader_epoch=1, timestamp=5) for op in ops}
    acc.flush()
    ends = {s + len(op) for s, op in zip(sorted(starts), ops, strict=True)}
    batches = list(iter_record_batches(_segments(d)))
    for batch in batches:
        assert batch.base_offset in starts and batch.next_offset in ends  # whole operations
        # Only an operation too big for the limit on its own gets a batch past it.
        assert batch.size <= limit or batch.base_offset + 1 >= batch.next_offset or any(
            s == batch.base_offset and s + len(op) == batch.next_offset
            for s, op in zip(sorted(starts), ops, strict=True)
        )
    assert [v for b in batches for v in b.values()] == [v for op in ops for v in op]
    acc.seal()
    plog.close()


def test_a_new_leader_epoch_seals_the_batch_and_is_checkpointed(tmp_path: Path) -> None:
    d = tmp_path / "p"
    plog, acc = _open(d)
    acc.add([b"x", b"y"], leader_epoch=1, timestamp=1)
    acc.add([b"z"], leader_epoch=2, timestamp=2)
    assert read_leader_epochs(d) == [(1, 0)]  # epoch 1's batch sealed; epoch 2's still open
    acc.seal()
    assert read_leader_epochs(d) == [(1, 0), (2, 2)]  # as its batch reaches the log
    with pytest.raises(ValueError, match="leader epoch 1 below 2"):
        acc.add([b"old"], leader_epoch=1, timestamp=3)
    acc.flush()
    batches = list(iter_record_batches(_segments(d)))
    assert [(b.base_offset, b.partition_leader_epoch, b.values()) for b in batches] == [
        (0, 1, [b"x", b"y"]), (2, 2, [b"z"])
    ]
    acc.seal()
    plog.close()


def test_sealed_batches_read_back_at_their_offsets_and_survive_a_restart(
        tmp_path: Path) -> None:
    d = tmp_path / "p"
    plog, acc = _open(d)
    assert acc.add([b"a"], leader_epoch=1, timestamp=1) == 0
    assert acc.add([b"b", b"c"], leader_epoch=1, timestamp=3) == 1
    assert acc.pending and plog.log_end_offset == 0  # open: not in the log yet
    acc.seal()
    assert not acc.pending and plog.log_end_offset == 3
    assert [(b.base_offset, b.values()) for b in plog.read(0)] == [(0, [b"a", b"b", b"c"])]
    assert acc.add([b"d"], leader_epoch=1, timestamp=4) == 3
    acc.seal()
    plog.close()
    again = PartitionLog.open(d, topic_id=TOPIC_ID)
    assert [(b.base_offset, b.values()) for b in again.read(0)] == [
        (0, [b"a", b"b", b"c"]), (3, [b"d"])]
    again.close()


def test_keyed_and_tombstone_records_share_a_batch_like_build_record_batch(
    tmp_path: Path,
) -> None:
    plog, acc = _open(tmp_path / "t", contiguous=False)
    acc.add([b"v1", None], keys=[b"k1", b"k2"], leader_epoch=1, timestamp=9)
    acc.add([b"v3"], leader_epoch=1, timestamp=10)  # no keys: null keys
    acc.add([None], keys=[b"k4"], leader_epoch=1, timestamp=11)
    acc.flush()
    expected = build_record_batch(
        [b"v1", None, b"v3", None], keys=[b"k1", b"k2", None, b"k4"], base_offset=0,
        partition_leader_epoch=1, timestamp=9,
    )
    assert _segments(tmp_path / "t") == expected
    acc.seal()
    plog.close()


def test_an_operation_too_big_for_any_batch_changes_nothing(tmp_path: Path) -> None:
    plog, acc = _open(tmp_path / "p")
    acc.add([b"kept"], leader_epoch=1, timestamp=1)
    with pytest.raises(ValueError, match="exceeds"):
        acc.add([b"x" * (MAX_BATCH_BYTES // 2)] * 2, leader_epoch=1, timestamp=2)
    assert acc.log_end_offset == 1
    # Near the limit (over it by the estimate, under it exactly): its own batch, as append.
    near = b"y" * (MAX_BATCH_BYTES - RECORD_BATCH_OVERHEAD - 20)
    assert acc.add([near], leader_epoch=1, timestamp=3) == 1
    acc.add([b"after"], leader_epoch=1, timestamp=4)
    assert acc.flush() == 3
    assert [len(b.values()) for b in plog.read(0)] == [1, 1, 1]
    acc.seal()
    plog.close()


def test_indexes_written_while_accumulating_equal_rebuilt_ones(tmp_path: Path) -> None:
    d = tmp_path / "p"
    plog, acc = _open(d, segment_bytes=20_000)
    for i in range(600):
        acc.add([b"r%05d" % i * 20], leader_epoch=1, timestamp=1_700_000_000_000 + i)
        if i % 7 == 6:
            acc.flush()
    acc.seal()
    plog.close()
    written = {p.name: p.read_bytes() for p in d.glob("*index")}
    assert len(written) >= 6 and any(written.values())
    for p in d.glob("*index"):
        p.unlink()
    PartitionLog.open(d, topic_id=TOPIC_ID, segment_bytes=20_000).close()
    rebuilt = {p.name: p.read_bytes() for p in d.glob("*index")}
    assert rebuilt.keys() == written.keys()
    for name, data in written.items():
        if name.endswith(".index"):
            assert rebuilt[name] == data, name
        else:  # a roll adds a final time entry; recovery rebuilds the entries before it
            assert data.startswith(rebuilt[name]) and len(data) - len(rebuilt[name]) in (0, 12)
