"""metadata.log.segment.ms and metadata.max.retention.{bytes,ms}, with a fake clock.

Time enters only as record timestamps and the `now_ms` of each call, so the tests set the
clock by hand: a segment rolls once a batch is more than segment.ms newer than its first;
retention drops old snapshots (never the newest) and the segments only they cover, and a
restart from what is left replays to the same state.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from kraftpy.controller.log.partition_log import PartitionLog
from kraftpy.controller.log.retention import RetentionPolicy, SnapshotInfo, snapshots_to_drop
from kraftpy.controller.log.snapshots import list_snapshots, read_snapshot_timestamp
from kraftpy.controller.log.storage import (
    METADATA_PARTITION,
    MetadataStorage,
    RetentionJob,
    SnapshotPolicy,
    format_storage,
)
from kraftpy.controller.quorum_controller import QuorumController
from kraftpy.controller.settings import ControllerSettings
from kraftpy.protocol.records.producer_ids_record import ProducerIdsRecord

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def _infos(*rows: tuple[int, int, int | None]) -> list[SnapshotInfo]:
    return [SnapshotInfo(end, size, ts) for end, size, ts in rows]


def test_retention_rules_as_kafkas_clean_snapshots() -> None:
    snaps = _infos((100, 10, 1000), (200, 10, 2000), (300, 10, 3000))

    def log_from(offset: int) -> int:
        return 1000 - offset  # each snapshot's end frees that many bytes of log

    def drop(max_bytes: int, max_ms: int, now: int = 3500) -> int:
        return snapshots_to_drop(snaps, log_bytes=1000, log_bytes_from=log_from, now_ms=now,
                                 policy=RetentionPolicy(max_bytes, max_ms))

    assert drop(-1, -1) == 0
    assert drop(10_000, -1) == 0  # under the limit
    assert drop(1025, -1) == 1  # 1000 + 30 > 1025; then 800 + 20 fits
    assert drop(0, -1) == 2  # never the newest
    assert drop(-1, 2000) == 1  # only the first is older than 2 s at 3.5 s
    assert drop(-1, 0, now=10**9) == 2
    unreadable = _infos((100, 10, None), (200, 10, 0), (300, 10, 0))
    assert snapshots_to_drop(unreadable, log_bytes=0, log_bytes_from=log_from, now_ms=10**9,
                             policy=RetentionPolicy(-1, 1)) == 0


def test_segment_ms_rolls_by_record_time_and_survives_a_restart(tmp_path: Path) -> None:
    d = tmp_path / "p"
    plog = PartitionLog.open(d, topic_id=TOPIC_ID, segment_ms=1000)
    for ts in (5_000, 5_400, 6_000):  # 6000 - 5000 is not more than 1000: same segment
        plog.accumulate([b"v%d" % ts], leader_epoch=1, timestamp=ts)
        plog.flush()
    plog.accumulate([b"late"], leader_epoch=1, timestamp=6_001)
    plog.flush()
    assert [s.base_offset for s in plog.segments] == [0, 3]
    plog.close()
    again = PartitionLog.open(d, topic_id=TOPIC_ID, segment_ms=1000)
    again.append([b"x"], leader_epoch=1, timestamp=7_000)  # 7000 - 6001 <= 1000
    again.append([b"y"], leader_epoch=1, timestamp=7_002)  # first timestamp read from the file
    again.flush()
    assert [s.base_offset for s in again.segments] == [0, 3, 5]
    assert [v for b in again.read(0) for v in b.values()] == [
        b"v5000", b"v5400", b"v6000", b"late", b"x", b"y"]
    again.close()
    without = PartitionLog.open(d, topic_id=TOPIC_ID)  # no segment.ms: size only
    without.append([b"z"], leader_epoch=1, timestamp=10**9)
    without.flush()
    assert len(without.segments) == 3
    without.close()


def _op(i: int) -> SimpleNamespace:
    return SimpleNamespace(records=[(ProducerIdsRecord(broker_id=1, broker_epoch=5,
                                                       next_producer_id=1000 * (i + 1)), 0)],
                           txn_records=[])


def _drive(storage: MetadataStorage, controller: QuorumController, ops: range,
           clock: list[int]) -> None:
    for i in ops:
        clock[0] += 1000  # one second per operation
        offset, _ = storage.append(_op(i), clock[0])
        controller.replay(_op(i).records[0][0], 0, offset)
        storage.flush()
        job = storage.after_commit(controller, clock[0])
        if job is not None and hasattr(job, "write"):  # background mode: run it here
            job.write()
            job.finish()


def _storage(d: Path, retention: RetentionPolicy, **kwargs) -> MetadataStorage:
    return MetadataStorage.open(
        d, node_id=1, segment_bytes=1024, retention=retention,
        policy=SnapshotPolicy(max_record_bytes=600, interval_ms=0), **kwargs,
    )


def _controller() -> QuorumController:
    return QuorumController(ControllerSettings(cluster_id=CLUSTER, node_id=1))


def test_retention_by_time_keeps_young_snapshots_and_the_log_they_need(tmp_path: Path) -> None:
    d = tmp_path / "data"
    format_storage(d, cluster_id=CLUSTER, node_id=1, metadata_version=27)
    storage = _storage(d, RetentionPolicy(max_bytes=-1, max_ms=30_000))
    controller = _controller()
    storage.begin_epoch(now_ms=1000)
    clock = [1000]
    _drive(storage, controller, range(120), clock)
    mdir = d / METADATA_PARTITION
    snaps = list_snapshots(mdir)
    assert len(snaps) >= 3  # unlike the default, older snapshots stay while young enough
    stamps = [read_snapshot_timestamp(p) for _, p in snaps]
    assert all(ts is not None for ts in stamps)
    # Everything but the newest is at most 30 s old (the oldest kept may be the one just past).
    assert all(clock[0] - ts <= 30_000 for ts in stamps[1:-1])  # type: ignore[operator]
    oldest = snaps[0][0]
    start = storage.metadata.log_start_offset
    assert 0 < start <= oldest.end_offset  # segments only older snapshots covered are gone
    assert len(storage.metadata.segments) > 2
    storage.close()

    again = MetadataStorage.open(d, node_id=1)
    restarted = _controller()
    stats = again.replay_into(restarted)
    again.close()
    assert stats.snapshot == snaps[-1][0]
    assert restarted.describe()["producer_ids"] == controller.describe()["producer_ids"]


def test_retention_by_bytes_in_a_background_job(tmp_path: Path) -> None:
    d = tmp_path / "data"
    format_storage(d, cluster_id=CLUSTER, node_id=1, metadata_version=27)
    storage = _storage(d, RetentionPolicy(max_bytes=6000, max_ms=-1), background_snapshots=True)
    controller = _controller()
    storage.begin_epoch(now_ms=1000)
    clock = [1000]
    _drive(storage, controller, range(200), clock)
    mdir = d / METADATA_PARTITION
    snaps = list_snapshots(mdir)
    total = storage.metadata.size_bytes + sum(p.stat().st_size for _, p in snaps)
    assert len(snaps) >= 2 and total <= 6000 + 1024 + snaps[0][1].stat().st_size
    assert storage.metadata.log_start_offset <= snaps[0][0].end_offset
    # Growing the limit lets everything stay: nothing is deleted by the next snapshots.
    storage.retention = RetentionPolicy(max_bytes=10**9, max_ms=-1)
    before = {p.name for p in mdir.iterdir()}
    _drive(storage, controller, range(200, 260), clock)
    after = {p.name for p in mdir.iterdir()}
    assert before <= after and len(after) > len(before)
    # Time retention becomes due with no new snapshot: a RetentionJob does the deleting.
    storage.retention = RetentionPolicy(max_bytes=-1, max_ms=1)
    job = storage.after_commit(controller, clock[0] + 10**6)
    assert isinstance(job, RetentionJob)
    job.write()
    job.finish()
    assert len(list_snapshots(mdir)) == 1
    storage.close()
    again = MetadataStorage.open(d, node_id=1)
    restarted = _controller()
    again.replay_into(restarted)
    again.close()
    assert restarted.describe()["producer_ids"] == controller.describe()["producer_ids"]


def test_without_a_retention_policy_the_newest_snapshot_trims_as_before(tmp_path: Path) -> None:
    d = tmp_path / "data"
    format_storage(d, cluster_id=CLUSTER, node_id=1, metadata_version=27)
    storage = MetadataStorage.open(d, node_id=1, segment_bytes=1024,
                                   policy=SnapshotPolicy(max_record_bytes=600, interval_ms=0))
    controller = _controller()
    storage.begin_epoch(now_ms=1000)
    _drive(storage, controller, range(120), [1000])
    snaps = list_snapshots(d / METADATA_PARTITION)
    assert len(snaps) == 2  # the newest and one fallback
    newest = snaps[-1][0].end_offset
    segs = storage.metadata.segments
    assert 0 < segs[0].base_offset <= newest  # every segment wholly below the newest is gone
    assert all(s.base_offset > newest for s in segs[1:])
    storage.close()


def test_settings_read_from_the_properties() -> None:
    """By default each new snapshot trims the log below itself (no retention policy); setting
    either metadata.max.retention.* turns on Kafka's retention, the other at Kafka's default."""
    import pytest
    from kraftpy.controller.config import ConfigError, load_config
    from kraftpy.controller.recovery import retention_policy

    default = load_config(None)
    week = 7 * 24 * 60 * 60 * 1000
    assert (default.metadata_log_segment_ms, default.metadata_max_retention_bytes,
            default.metadata_max_retention_ms) == (week, None, None)
    assert retention_policy(default) is None
    set_ = load_config(None, ["metadata.log.segment.ms=60000",
                              "metadata.max.retention.bytes=-1",
                              "metadata.max.retention.ms=3600000"])
    assert (set_.metadata_log_segment_ms, set_.metadata_max_retention_bytes,
            set_.metadata_max_retention_ms) == (60000, -1, 3600000)
    assert retention_policy(set_) == RetentionPolicy(max_bytes=-1, max_ms=3600000)
    only_ms = load_config(None, ["metadata.max.retention.ms=1000"])
    assert retention_policy(only_ms) == RetentionPolicy(max_bytes=100 * 1024 * 1024, max_ms=1000)
    assert "metadata.max.retention.ms" not in only_ms.extra
    with pytest.raises(ConfigError, match=r"metadata\.max\.retention\.bytes"):
        load_config(None, ["metadata.max.retention.bytes=-2"])
    with pytest.raises(ConfigError, match=r"metadata\.log\.segment\.ms"):
        load_config(None, ["metadata.log.segment.ms=soon"])
