"""metadata.log.segment.ms and metadata.max.retention.{bytes,ms}, with a fake clock.

Time enters only as record timestamps and the node's clock, so the tests set the clock by
hand: a segment rolls once a batch is more than segment.ms newer than its first; retention
drops old snapshots (never the newest) and the segments only they cover, and a restart from
what is left replays to the same state. The node is a lone voter driven step by step
through its own road (requests, commits, snapshot jobs), as `kraftpy serve` runs it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kraftpy.controller import replay
from kraftpy.controller.committed_image import RetentionJob
from kraftpy.controller.log.partition_log import PartitionLog
from kraftpy.controller.log.retention import RetentionPolicy, SnapshotInfo, snapshots_to_drop
from kraftpy.controller.log.snapshots import list_snapshots, read_snapshot_timestamp
from kraftpy.controller.log.storage import METADATA_PARTITION, MetadataStorage
from kraftpy.controller.quorum import Quorum
from kraftpy.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from support.lone_quorum import ask, registration, stepped_lone

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
        plog.append([b"v%d" % ts], leader_epoch=1, timestamp=ts)
        plog.flush()
    plog.append([b"late"], leader_epoch=1, timestamp=6_001)
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


SMALL = {"metadata.log.segment.bytes": "1024",
         "metadata.log.max.record.bytes.between.snapshots": "600",
         "metadata.log.max.snapshot.interval.ms": "0"}


def _node(d: Path, clock: list[int], **retention: str) -> tuple[Quorum, AllocateProducerIdsRequest]:
    """A lone voter on the test's clock, and a registered broker's block request."""
    quorum = stepped_lone(d, {**SMALL, **retention}, clock)
    registered = ask(quorum, registration(2), 4)
    beat = ask(quorum, BrokerHeartbeatRequest(
        broker_id=2, broker_epoch=registered.broker_epoch,
        current_metadata_offset=quorum.storage.metadata.log_end_offset, want_fence=False,
        want_shut_down=False), 1)
    assert not beat.is_fenced
    return quorum, AllocateProducerIdsRequest(broker_id=2,
                                              broker_epoch=registered.broker_epoch)


def _drive(quorum: Quorum, request: AllocateProducerIdsRequest, count: int,
           clock: list[int]) -> None:
    """One block allocation per second of the test's clock, each committed."""
    for _ in range(count):
        clock[0] += 1000
        assert ask(quorum, request, 0).error_code == 0


def _restarted(quorum: Quorum, d: Path) -> Any:
    """The state a restart replays from what is on disk (the newest snapshot + the log)."""
    again = MetadataStorage.open(d, node_id=1)
    controller = quorum.host.make_controller()
    replay.replay_snapshot_and_log([controller], again.snapshot, again.metadata, None)
    again.close()
    return controller


def test_retention_by_time_keeps_young_snapshots_and_the_log_they_need(tmp_path: Path) -> None:
    d = tmp_path / "data"
    clock = [1000]
    quorum, request = _node(d, clock, **{"metadata.max.retention.bytes": "-1",
                                         "metadata.max.retention.ms": "30000"})
    storage = quorum.storage
    _drive(quorum, request, 120, clock)
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
    live = quorum.controller.describe()["producer_ids"]
    storage.close()
    assert _restarted(quorum, d).describe()["producer_ids"] == live


def test_retention_by_bytes_and_time_in_jobs_of_their_own(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    d = tmp_path / "data"
    clock = [1000]
    quorum, request = _node(d, clock, **{"metadata.max.retention.bytes": "6000",
                                         "metadata.max.retention.ms": "-1"})
    storage, files = quorum.storage, quorum.storage.snapshots
    _drive(quorum, request, 200, clock)
    mdir = d / METADATA_PARTITION
    snaps = list_snapshots(mdir)
    total = storage.metadata.size_bytes + sum(p.stat().st_size for _, p in snaps)
    assert len(snaps) >= 2 and total <= 6000 + 1024 + snaps[0][1].stat().st_size
    assert storage.metadata.log_start_offset <= snaps[0][0].end_offset
    # Growing the limit lets everything stay: nothing is deleted by the next snapshots.
    files.retention = RetentionPolicy(max_bytes=10**9, max_ms=-1)
    before = {p.name for p in mdir.iterdir()}
    _drive(quorum, request, 60, clock)
    after = {p.name for p in mdir.iterdir()}
    assert before <= after and len(after) > len(before)
    # Time retention becomes due with no new snapshot: a RetentionJob does the deleting, and
    # the core learns where the log now starts.
    files.retention = RetentionPolicy(max_bytes=-1, max_ms=1)
    jobs: list[Any] = []
    run = RetentionJob.run
    monkeypatch.setattr(RetentionJob, "run", lambda job: (jobs.append(job), run(job)))
    clock[0] += 10**6
    quorum.host.maybe_snapshot()
    assert len(jobs) == 1 and jobs[0].trimmed_to is not None
    assert len(list_snapshots(mdir)) == 1
    assert quorum.raft.log.start_offset == jobs[0].trimmed_to.end_offset
    live = quorum.controller.describe()["producer_ids"]
    storage.close()
    assert _restarted(quorum, d).describe()["producer_ids"] == live


def test_without_a_retention_policy_the_newest_snapshot_trims_as_before(tmp_path: Path) -> None:
    d = tmp_path / "data"
    clock = [1000]
    quorum, request = _node(d, clock)
    _drive(quorum, request, 120, clock)
    snaps = list_snapshots(d / METADATA_PARTITION)
    assert len(snaps) == 2  # the newest and one fallback
    newest = snaps[-1][0].end_offset
    segs = quorum.storage.metadata.segments
    assert 0 < segs[0].base_offset <= newest  # every segment wholly below the newest is gone
    assert all(s.base_offset > newest for s in segs[1:])
    assert quorum.raft.log.start_offset == newest  # the core knows where the log starts
    quorum.storage.close()


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
