"""PartitionLog: Kafka's segment layout, recovery of torn tails, refusal of damage."""

from __future__ import annotations

import hashlib
import logging
import shutil
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords
from kraftpy.controller.log.files import LogDirError, read_leader_epochs
from kraftpy.controller.log.partition_log import LogCorruptError, PartitionLog
from kraftpy.protocol.record_batch import iter_record_batches
from support.paths import reference

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def _fill(plog: PartitionLog, batches: int, *, per_batch: int = 3, epoch: int = 1) -> list[bytes]:
    values = []
    for i in range(batches):
        vals = [b"value-%d-%d" % (i, j) * (1 + j) for j in range(per_batch)]
        plog.append(vals, leader_epoch=epoch, timestamp=1_700_000_000_000 + i)
        values.extend(vals)
    plog.flush()
    return values


def _all_values(plog: PartitionLog, start: int | None = None) -> list[bytes | None]:
    return [v for b in plog.read(start) for v in b.values()]


def _digest(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


def test_append_flush_reopen_and_read_back(tmp_path: Path) -> None:
    d = tmp_path / "__cluster_metadata-0"
    plog = PartitionLog.open(d, topic_id=TOPIC_ID)
    assert plog.log_end_offset == 0 and plog.flushed_offset == 0
    base = plog.append([b"a", b"b"], leader_epoch=0, timestamp=5)
    assert base == 0 and plog.log_end_offset == 2 and plog.flushed_offset == 0
    assert plog.flush() == 2
    values = _fill(plog, 50)
    plog.close()
    assert (d / "partition.metadata").read_text() == f"version: 0\ntopic_id: {TOPIC_ID}"
    assert (d / "leader-epoch-checkpoint").read_text() == "0\n2\n3 0\n1 2\n" or read_leader_epochs(
        d
    )
    again = PartitionLog.open(d, topic_id=TOPIC_ID)
    assert again.log_end_offset == 2 + len(values)
    assert _all_values(again) == [b"a", b"b", *values]
    assert _all_values(again, 100)[0] == values[100 - 2 - (100 - 2) % 3]  # batch holding 100
    again.close()


def test_leader_epochs_are_checkpointed_like_kafka(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "p", topic_id=TOPIC_ID)
    plog.append([b"x"], leader_epoch=1, timestamp=1)
    plog.append([b"y"], leader_epoch=1, timestamp=1)
    plog.append([b"z"], leader_epoch=4, timestamp=1)
    plog.flush()
    assert (tmp_path / "p" / "leader-epoch-checkpoint").read_text() == "0\n2\n1 0\n4 2\n"
    with pytest.raises(ValueError, match="leader epoch"):
        plog.append([b"w"], leader_epoch=2, timestamp=1)
    plog.close()


def test_kafka_python_reads_every_batch_we_wrote(tmp_path: Path) -> None:
    plog = PartitionLog.open(tmp_path / "p", topic_id=TOPIC_ID, segment_bytes=4000)
    values = _fill(plog, 200, per_batch=2)
    plog.close()
    offsets, got = [], []
    segments = sorted((tmp_path / "p").glob("*.log"))
    assert len(segments) > 3  # rolled
    for seg in segments:
        records = MemoryRecords(seg.read_bytes())
        first = True
        while records.has_next():
            batch = records.next_batch()
            assert batch.validate_crc()
            if first:
                assert batch.base_offset == int(seg.stem)
                first = False
            assert batch.leader_epoch == 1 and batch.producer_id == -1
            for record in batch:
                assert record.key is None and record.headers == []
                offsets.append(record.offset)
                got.append(record.value)
    assert offsets == list(range(len(values)))
    assert got == values


def test_rebuilt_indexes_match_kafka_byte_for_byte(tmp_path: Path) -> None:
    real = reference("real-metadata-logs", "flink-on-prem", "data", "__cluster_metadata-0")
    d = tmp_path / "__cluster_metadata-0"
    shutil.copytree(real, d)
    for p in d.iterdir():
        p.chmod(0o644)
    d.chmod(0o755)
    (d / "00000000000000000000.index").unlink()
    (d / "00000000000000000000.timeindex").unlink()
    plog = PartitionLog.open(d, topic_id=TOPIC_ID)
    assert plog.log_end_offset == 17027
    plog.close()  # a clean close adds the final time index entry, as Kafka's does
    for suffix in (".index", ".timeindex"):
        name = "00000000000000000000" + suffix
        assert (d / name).read_bytes() == (real / name).read_bytes()
    assert (d / "leader-epoch-checkpoint").read_bytes() == (
        real / "leader-epoch-checkpoint"
    ).read_bytes()


def _three_batch_log(tmp_path: Path) -> tuple[Path, list[int], list[bytes]]:
    d = tmp_path / "p"
    plog = PartitionLog.open(d, topic_id=TOPIC_ID)
    values = _fill(plog, 3, per_batch=4)
    plog.close()
    log_file = d / "00000000000000000000.log"
    starts = [b.position for b in iter_record_batches(log_file.read_bytes())]
    return log_file, starts, values


def test_torn_tail_at_every_byte_recovers_to_the_previous_batch(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    log_file, starts, values = _three_batch_log(tmp_path)
    whole = log_file.read_bytes()
    for cut in range(starts[2], len(whole)):
        log_file.write_bytes(whole[:cut])
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="kraftpy.log"):
            plog = PartitionLog.open(log_file.parent, topic_id=TOPIC_ID)
        assert plog.log_end_offset == 8, cut
        assert _all_values(plog) == values[:8]
        plog.close()
        assert log_file.stat().st_size == starts[2]
        if cut > starts[2]:
            message = caplog.text
            assert str(log_file) in message and f"position {starts[2]}" in message
            assert f"dropping {cut - starts[2]} bytes" in message
    # and the log takes appends again where it was cut
    plog = PartitionLog.open(log_file.parent, topic_id=TOPIC_ID)
    assert plog.append([b"next"], leader_epoch=1, timestamp=0) == 8
    plog.close()


def test_crc_failing_last_batch_is_a_torn_tail(tmp_path: Path) -> None:
    log_file, starts, values = _three_batch_log(tmp_path)
    data = bytearray(log_file.read_bytes())
    data[-1] ^= 0x40
    log_file.write_bytes(bytes(data))
    plog = PartitionLog.open(log_file.parent, topic_id=TOPIC_ID)
    assert plog.log_end_offset == 8 and log_file.stat().st_size == starts[2]
    plog.close()


def test_zero_filled_tail_is_a_torn_tail(tmp_path: Path) -> None:
    log_file, starts, values = _three_batch_log(tmp_path)
    with open(log_file, "ab") as f:
        f.write(bytes(4096))
    plog = PartitionLog.open(log_file.parent, topic_id=TOPIC_ID)
    assert plog.log_end_offset == 12 and _all_values(plog) == values
    plog.close()


def test_flipped_bit_in_the_middle_batch_refuses_and_touches_nothing(tmp_path: Path) -> None:
    log_file, starts, _values = _three_batch_log(tmp_path)
    whole = log_file.read_bytes()
    folder = log_file.parent
    for byte in range(starts[1], starts[2]):
        for bit in range(8):
            bad = bytearray(whole)
            bad[byte] ^= 1 << bit
            log_file.write_bytes(bytes(bad))
            before = _digest(folder)
            with pytest.raises(LogCorruptError) as info:
                PartitionLog.open(folder, topic_id=TOPIC_ID)
            assert info.value.path == log_file and info.value.position == starts[1], (byte, bit)
            assert str(log_file) in str(info.value) and f"position {starts[1]}" in str(info.value)
            assert _digest(folder) == before
    log_file.write_bytes(whole)


def test_recovery_point_skips_validation_of_trusted_batches(tmp_path: Path) -> None:
    log_file, starts, _values = _three_batch_log(tmp_path)
    data = bytearray(log_file.read_bytes())
    data[starts[1] - 1] ^= 1  # damage the first batch (offsets 0-3)
    log_file.write_bytes(bytes(data))
    with pytest.raises(LogCorruptError):
        PartitionLog.open(log_file.parent, topic_id=TOPIC_ID, recovery_point=0)
    # Below the recovery point batches were fsynced and checked before: not re-read at open.
    plog = PartitionLog.open(log_file.parent, topic_id=TOPIC_ID, recovery_point=8)
    assert plog.log_end_offset == 12
    plog.close()
    # A snapshot file's end offset is the default recovery point.
    (log_file.parent / "00000000000000000008-0000000001.checkpoint").write_bytes(b"")
    PartitionLog.open(log_file.parent, topic_id=TOPIC_ID).close()


def test_delete_segments_below_and_leftovers(tmp_path: Path) -> None:
    d = tmp_path / "p"
    plog = PartitionLog.open(d, topic_id=TOPIC_ID, segment_bytes=2000)
    values = _fill(plog, 60, per_batch=2)
    bases = [s.base_offset for s in plog.segments]
    assert len(bases) > 3
    deleted = plog.delete_segments_below(bases[2] + 1)
    assert {p.name for p in deleted} >= {f"{bases[0]:020d}.log", f"{bases[1]:020d}.index"}
    assert plog.log_start_offset == bases[2]
    assert _all_values(plog) == values[bases[2] :]
    plog.close()
    (d / "00000000000000000001.log.deleted").write_bytes(b"x")
    (d / "00000000000000000000.index").write_bytes(b"")  # orphan without its .log
    plog = PartitionLog.open(d, topic_id=TOPIC_ID, segment_bytes=2000)
    assert not (d / "00000000000000000001.log.deleted").exists()
    assert not (d / "00000000000000000000.index").exists()
    assert plog.log_start_offset == bases[2] and plog.log_end_offset == len(values)
    plog.close()


def test_topic_id_mismatch_and_missing_dir_are_clear_errors(tmp_path: Path) -> None:
    PartitionLog.open(tmp_path / "p", topic_id=TOPIC_ID).close()
    with pytest.raises(LogDirError, match="topic id"):
        PartitionLog.open(tmp_path / "p", topic_id="AAAAAAAAAAAAAAAAAAAAAg")
    with pytest.raises(LogDirError, match="does not exist"):
        PartitionLog.open(tmp_path / "nope", read_only=True)


@pytest.mark.parametrize(
    ("sample", "end", "start"),
    [
        ("flink-on-prem", 17027, 0),
        ("spring-kafka", 245533, 232914),
        ("kafka-4.1-generated", 308, 0),
    ],
)
def test_real_kafka_logs_open_read_only_with_zero_errors(sample: str, end: int, start: int) -> None:
    d = reference("real-metadata-logs", sample, "data", "__cluster_metadata-0")
    before = _digest(d)
    plog = PartitionLog.open(d, read_only=True)
    assert (plog.log_start_offset, plog.log_end_offset) == (start, end)
    count = sum(len(b.values()) for b in plog.read())
    assert count == end - start
    plog.close()
    assert _digest(d) == before


def test_torn_tail_before_an_empty_rolled_segment_leaves_no_gap(tmp_path: Path) -> None:
    d = tmp_path / "p"
    plog = PartitionLog.open(d, topic_id=TOPIC_ID, segment_bytes=600)
    _fill(plog, 6, per_batch=3)
    plog.close()
    segments = sorted(d.glob("*.log"))
    last = segments[-1]
    # A crash right after a roll: the new segment exists but is empty, the old one is torn.
    (d / f"{int(last.stem) + 3:020d}.log").write_bytes(b"")
    last.write_bytes(last.read_bytes()[:-7])
    plog = PartitionLog.open(d, topic_id=TOPIC_ID, segment_bytes=600)
    assert (
        plog.log_end_offset
        == int(last.stem) + len(list(iter_record_batches(last.read_bytes()))) * 3
    )
    assert plog.active.path == last and not (d / f"{int(last.stem) + 3:020d}.log").exists()
    assert plog.append([b"x"], leader_epoch=1, timestamp=0) == plog.log_end_offset - 1
    plog.close()


def test_a_missing_segment_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "p"
    plog = PartitionLog.open(d, topic_id=TOPIC_ID, segment_bytes=600)
    _fill(plog, 12, per_batch=3)
    plog.close()
    segments = sorted(d.glob("*.log"))
    assert len(segments) >= 3
    segments[1].unlink()
    with pytest.raises(LogCorruptError, match="ends at"):
        PartitionLog.open(d, topic_id=TOPIC_ID, segment_bytes=600, recovery_point=0)


def _open_fds() -> set[int]:
    import os

    return {int(name) for name in os.listdir("/proc/self/fd")}


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_flush_rounds_share_a_segments_sync_descriptor_which_outlives_its_close(
        tmp_path: Path) -> None:
    import os

    plog = PartitionLog.open(tmp_path / "p", topic_id=TOPIC_ID)
    plog.append([b"a"], leader_epoch=1, timestamp=1)
    first = plog.begin_flush()
    first.fsync()
    plog.append([b"b"], leader_epoch=1, timestamp=1)
    second = plog.begin_flush()
    assert first.fds == second.fds and len(first.fds) == 1  # one duplicate, not one per round
    fd = first.fds[0]
    first.release()
    plog.complete_flush(first)
    segment = plog.active
    before = _open_fds()
    segment.close()  # as retention may, in a thread, while `second` is in flight
    assert fd in _open_fds() and fd in before
    os.fsync(fd)  # still the segment's file
    assert os.fstat(fd).st_ino == segment.path.stat().st_ino
    second.fsync()
    second.release()
    assert fd not in _open_fds()  # the last round to let go closed it
    plog.close()
    assert second.release() is None  # releasing twice is harmless


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc/self/fd")
def test_a_closed_log_leaves_no_sync_descriptor_open(tmp_path: Path) -> None:
    import os

    before = _open_fds()
    plog = PartitionLog.open(tmp_path / "p", topic_id=TOPIC_ID, segment_bytes=200)
    for i in range(20):  # several segments, each synced at least once
        plog.append([b"x" * 50], leader_epoch=1, timestamp=i)
        plog.flush()
    assert len(plog.segments) > 3
    # Rolled segments keep their own descriptor, but none for syncing; the active one has both.
    opened = []
    for fd in _open_fds() - before:
        try:
            opened.append(os.readlink(f"/proc/self/fd/{fd}"))
        except FileNotFoundError:  # the descriptor listdir itself had open
            pass
    per_segment = [opened.count(str(seg.path)) for seg in plog.segments]
    assert max(per_segment[:-1]) == 1 and per_segment[-1] == 2, per_segment
    plog.close()
    assert _open_fds() <= before


def test_appended_batches_are_on_disk_before_their_flush_which_still_fsyncs_them(
        tmp_path: Path) -> None:
    """Batches appended while a flush is in flight (rolling a segment on the way) are in the
    files at once, decodable (a Fetch reads them from there), yet durable only through the
    next flush, whose ticket names every segment they went to."""
    plog = PartitionLog.open(tmp_path / "p", topic_id=TOPIC_ID, segment_bytes=300)
    plog.append([b"a"], leader_epoch=1, timestamp=1)
    in_flight = plog.begin_flush()
    for _ in range(6):
        plog.append([b"x" * 60], leader_epoch=1, timestamp=2)
    assert len(plog.segments) > 1
    on_disk = []  # as kafka-python reads the files
    for seg in plog.segments:
        records = MemoryRecords(seg.path.read_bytes())
        while records.has_next():
            batch = records.next_batch()
            assert batch.validate_crc()
            on_disk += [record.value for record in batch]
    assert on_disk == [b"a"] + [b"x" * 60] * 6
    in_flight.fsync()
    in_flight.release()
    assert plog.complete_flush(in_flight) == 1  # the round in flight covers "a" only
    written = {seg.path for seg in plog.segments}
    next_round = plog.begin_flush()
    assert next_round.end_offset == 7 and {s.path for s in next_round.segments} == written
    next_round.fsync()
    next_round.release()
    assert plog.complete_flush(next_round) == 7
    plog.close()
