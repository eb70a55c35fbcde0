"""PreparedRecords: a drain pass's operations reach the log together, each one whole.

What a pass prepares must land exactly as if each operation had been appended on its own:
the same values at the offsets `add` promised, no operation split across batches, batches
within the limit, and an operation that fails (cannot be encoded, could never fit, or fails
after it was encoded and before it was kept) leaves no trace.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kraftpy.controller.log.partition_log import PartitionLog
from kraftpy.controller.log.storage import PreparedRecords
from kraftpy.protocol.errors import EncodeError
from kraftpy.protocol.metadata_frame import encode_metadata_record
from kraftpy.protocol.record_batch import RECORD_BATCH_OVERHEAD, iter_record_batches
from kraftpy.protocol.records.config_record import ConfigRecord

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def _config(name_bytes: int) -> tuple[ConfigRecord, int]:
    return ConfigRecord(resource_type=2, resource_name="t", name="n" * name_bytes, value="v"), 0


def _batches(d: Path) -> list:
    return list(iter_record_batches(b"".join(p.read_bytes() for p in sorted(d.glob("*.log")))))


@settings(max_examples=40, deadline=None)
@given(
    passes=st.lists(st.lists(st.lists(st.integers(0, 250), min_size=1, max_size=4),
                             min_size=1, max_size=12), min_size=1, max_size=4),
    limit=st.integers(min_value=RECORD_BATCH_OVERHEAD + 1200, max_value=4000),
)
def test_prepared_operations_land_whole_at_the_offsets_promised(
    tmp_path_factory: pytest.TempPathFactory, passes: list[list[list[int]]], limit: int
) -> None:
    d = tmp_path_factory.mktemp("p")
    plog = PartitionLog.open(d, topic_id=TOPIC_ID, max_batch_bytes=limit)
    expected: list[bytes] = []
    spans: list[tuple[int, int]] = []  # (first offset, next offset) of every operation
    for ops in passes:
        prepared = PreparedRecords(plog, 1)
        for sizes in ops:
            records = [_config(n) for n in sizes]
            first = prepared.add(records)
            assert first == len(expected) and prepared.end == first + len(records)
            spans.append((first, prepared.end))
            expected += [encode_metadata_record(r, v) for r, v in records]
        assert plog.log_end_offset < prepared.end  # nothing in the log before `append`
        prepared.append(now_ms=7)
        assert plog.log_end_offset == prepared.end == len(expected) and not prepared
        plog.flush()
    batches = _batches(d)
    starts, ends = {s for s, _ in spans}, {e for _, e in spans}
    for batch in batches:
        assert batch.base_offset in starts and batch.next_offset in ends  # whole operations
        assert batch.size <= limit
    assert [v for b in batches for v in b.values()] == expected
    plog.close()


def test_an_operation_that_cannot_be_encoded_or_fit_leaves_nothing(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "p", topic_id=TOPIC_ID, max_batch_bytes=1000)
    prepared = PreparedRecords(plog, 1)
    prepared.add([_config(10)])
    bad = ConfigRecord(resource_type=999, resource_name="t", name="n", value="v")
    with pytest.raises(EncodeError):
        prepared.add([_config(10), (bad, 0)])
    with pytest.raises(ValueError, match="does not fit a record batch"):
        prepared.add([_config(2000)])
    assert prepared.end == 1
    prepared.append(now_ms=1)
    plog.flush()
    assert [b.values() for b in _batches(tmp_path / "p")] == [
        [encode_metadata_record(*_config(10))]]
    plog.close()


@pytest.mark.parametrize("first_sizes", [[10], [300, 300]])
def test_encode_keeps_nothing_until_kept(tmp_path: Path, first_sizes: list[int]) -> None:
    # [300, 300] fills the room, so what is kept after them begins a chunk of its own.
    plog = PartitionLog.open(tmp_path / "p", topic_id=TOPIC_ID, max_batch_bytes=800)
    prepared = PreparedRecords(plog, 1)
    kept = [_config(n) for n in first_sizes]
    prepared.add(kept)
    prepared.encode([_config(200), _config(1)])  # an operation that then failed
    assert prepared.end == len(kept)
    later = [_config(200), _config(3)]
    assert prepared.keep(*prepared.encode(later)) == len(kept)
    prepared.append(now_ms=1)
    plog.flush()
    batches = _batches(tmp_path / "p")
    assert [v for b in batches for v in b.values()] == [
        encode_metadata_record(r, v) for r, v in [*kept, *later]]
    assert len(batches) == len(first_sizes)  # the second chunk is a batch of its own
    plog.close()
