"""A node's snapshot parts without peers: a download into a partial file and its atomic
install, the log dropped and started at the snapshot's end, a voter that stopped between the
two finishing it at its next start (a single voter still refuses such a dir), and a snapshot
taken of the committed image where it stands rather than at the log end."""

from __future__ import annotations

import re
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from kraftpy.controller.committed_image import CommittedImage, RetentionJob, SnapshotGenerator
from kraftpy.controller.log import files
from kraftpy.controller.log.consistency import InconsistentLogError
from kraftpy.controller.log.partition_log import PartitionLog
from kraftpy.controller.log.snapshot_download import SnapshotDownload, SnapshotDownloadError
from kraftpy.controller.log.snapshot_files import SnapshotPolicy
from kraftpy.controller.log.snapshots import (
    SnapshotId,
    encode_snapshot,
    list_snapshots,
    read_snapshot,
    write_snapshot,
)
from kraftpy.controller.log.storage import MetadataStorage, format_storage
from kraftpy.protocol.metadata_frame import encode_metadata_record
from kraftpy.protocol.records.producer_ids_record import ProducerIdsRecord

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
PART = re.compile(r"^\d{20}-\d{10}-\d+\.checkpoint\.part$")  # Kafka's createTempFile name


def _snapshot_bytes(next_id: int, epoch: int = 3) -> bytes:
    value = encode_metadata_record(
        ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=next_id), 0)
    return b"".join(encode_snapshot([value] * 50, epoch=epoch, last_contained_log_timestamp=7,
                                    timestamp=8))


def test_a_download_goes_to_a_partial_file_and_is_installed_whole(tmp_path: Path) -> None:
    data = _snapshot_bytes(4000)
    download = SnapshotDownload(tmp_path)
    download.write((120, 3), 0, data[:100])
    (partial,) = tmp_path.iterdir()
    assert PART.match(partial.name) and partial.name.startswith("00000000000000000120-0000000003-")
    with pytest.raises(SnapshotDownloadError, match="at position 50"):
        download.write((120, 3), 50, data[50:])  # not where the partial file ends
    with pytest.raises(SnapshotDownloadError, match="not downloaded"):
        download.install((121, 3))
    download.write((120, 3), 100, data[100:])
    assert not list(tmp_path.glob("*.checkpoint"))  # nothing visible before the install
    snapshot, size = download.install((120, 3))
    assert size == len(data)
    assert [p.name for p in tmp_path.iterdir()] == ["00000000000000000120-0000000003.checkpoint"]
    assert snapshot.path.read_bytes() == data and len(list(snapshot.iter_values())) == 50
    assert read_snapshot(snapshot.path).last_contained_log_timestamp == 7


def test_a_snapshot_held_already_is_installed_without_a_download(tmp_path: Path) -> None:
    """The core installs a snapshot this node holds (not downloaded): it reads back whole,
    becomes the newest, and older ones go; one that is neither held nor downloaded is
    refused with a clear error."""
    from kraftpy.controller.log.snapshot_files import SnapshotFiles

    older, held = SnapshotId(60, 2), SnapshotId(120, 3)
    (tmp_path / older.file_name).write_bytes(_snapshot_bytes(1000, 2))
    (tmp_path / held.file_name).write_bytes(_snapshot_bytes(4000))
    files = SnapshotFiles(tmp_path, log=None)
    snapshot, size = files.install((120, 3))
    assert size == (tmp_path / held.file_name).stat().st_size
    assert len(list(snapshot.iter_values())) == 50 and files.newest is snapshot
    assert [p.name for p in tmp_path.iterdir()] == [held.file_name]
    with pytest.raises(SnapshotDownloadError, match="not downloaded"):
        files.install((130, 3))


def test_a_new_download_drops_the_old_partial_and_a_broken_one_is_never_installed(
        tmp_path: Path) -> None:
    data = _snapshot_bytes(4000)
    download = SnapshotDownload(tmp_path)
    download.write((120, 3), 0, data[:64])
    first = next(tmp_path.iterdir())
    download.write((130, 4), 0, data[:64])  # position 0: begun anew (another snapshot)
    assert not first.exists() and len(list(tmp_path.iterdir())) == 1
    with pytest.raises(SnapshotDownloadError, match="not whole: .*only 64 remain"):
        download.install((130, 4))  # the bytes stop short of the footer
    assert list(tmp_path.iterdir()) == []  # neither a partial nor a checkpoint is left
    download.write((130, 4), 0, data[:64])
    download.abandon()
    assert list(tmp_path.iterdir()) == []


def test_reset_to_drops_the_log_and_starts_it_at_the_offset(tmp_path: Path) -> None:
    d = tmp_path / "__cluster_metadata-0"
    log = PartitionLog.open(d, segment_bytes=1024)
    for i in range(40):
        log.append([b"x" * 50], leader_epoch=1 + i // 20, timestamp=i)
    stale = log.begin_flush()  # an fsync of the old log still in flight
    assert len(log.segments) > 2
    log.reset_to(500)
    stale.sync()
    assert log.complete_flush(stale) == 500  # it covers nothing of the new log
    assert (log.log_start_offset, log.log_end_offset, log.leader_epochs) == (500, 500, [])
    log.append([b"y"], leader_epoch=5, timestamp=99)
    log.close()
    again = PartitionLog.open(d)
    assert (again.log_start_offset, again.log_end_offset) == (500, 501)
    assert again.leader_epochs == [(5, 500)]
    assert [b.base_offset for b in again.read()] == [500]
    again.close()


def _formatted(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    format_storage(d, cluster_id=CLUSTER, node_id=1, metadata_version=27, now_ms=1)
    storage = MetadataStorage.open(d, node_id=1, segment_bytes=1024)
    files.write_quorum_state(d / "__cluster_metadata-0", leader_id=2, leader_epoch=1,
                             voters=[1, 2, 3], data_version=0)  # a follower of a quorum
    for i in range(30):
        storage.metadata.append([b"v" * 40], leader_epoch=1, timestamp=i)
    storage.metadata.flush()
    storage.close()
    return d


def _installed_then_killed(d: Path) -> Path:
    """What a follower leaves when it stops after renaming a downloaded snapshot into place
    but before dropping its log: a snapshot ending past the log, and a partial leftover."""
    mdir = d / "__cluster_metadata-0"
    value = encode_metadata_record(
        ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=9000), 0)
    write_snapshot(mdir, SnapshotId(200, 4), [value], last_contained_log_timestamp=5,
                   timestamp=6)
    leftover = mdir / "00000000000000000300-0000000004-123.checkpoint.part"
    leftover.write_bytes(b"half")
    return leftover


def test_a_voter_stopped_between_install_and_log_drop_finishes_it(tmp_path: Path) -> None:
    d = _formatted(tmp_path)
    leftover = _installed_then_killed(d)
    with pytest.raises(InconsistentLogError, match="taken at offset 200"):
        MetadataStorage.open(d, node_id=1)  # one voter: records past its log end are lost
    assert leftover.exists()  # refused before anything changed
    storage = MetadataStorage.open(d, node_id=1, downloads=True)
    assert not leftover.exists()
    meta = storage.metadata
    assert (meta.log_start_offset, meta.log_end_offset, meta.leader_epochs) == (200, 200, [])
    assert storage.snapshot is not None and storage.snapshot.snapshot_id == SnapshotId(200, 4)
    storage.close()
    again = MetadataStorage.open(d, node_id=1, downloads=True)  # and it stays so
    assert again.metadata.log_end_offset == 200
    again.close()


def test_a_snapshot_of_the_committed_image_stands_where_the_image_does(tmp_path: Path) -> None:
    """A follower's image at its high watermark (30) while its log goes on (33, uncommitted):
    the snapshot ends at 30, with the epoch and timestamp of offset 29, not the log end's."""
    d = _formatted(tmp_path)
    storage = MetadataStorage.open(d, node_id=1, segment_bytes=1024,
                                   policy=SnapshotPolicy(max_record_bytes=100, interval_ms=0),
                                   downloads=True)
    log = storage.metadata
    log.append([b"w"] * 3, leader_epoch=2, timestamp=1000)  # at 30, uncommitted
    log.flush()
    image = CommittedImage(SimpleNamespace(snapshot_values=lambda: iter(())), 30)
    generator = SnapshotGenerator(storage.snapshots)

    def take(now_ms: int) -> object:
        return generator.maybe_take(image, now_ms, durable=log.flushed_offset, committed=30,
                                    epoch_of=lambda o: log.epoch_at(o) or 0,
                                    timestamp_below=log.timestamp_below,
                                    control_at=lambda o: [])

    job = take(5000)
    assert job.snapshot_id == SnapshotId(30, 1)  # the epoch of offset 29, not the log end's
    assert job.last_contained_log_timestamp == 29
    assert image.held and take(5000) is None  # one at a time, the image held meanwhile
    job.run()
    generator.done(job)
    assert not image.held and job.trimmed_to == SnapshotId(30, 1)
    assert [sid for sid, _ in list_snapshots(d / "__cluster_metadata-0")] == [SnapshotId(30, 1)]
    assert take(6000) is None  # nothing new committed
    storage.close()


def test_no_snapshot_past_what_this_node_has_fsynced(tmp_path: Path) -> None:
    """A follower's high watermark (the leader's: other voters' disks) may pass what its own
    flush covers. A snapshot there would vouch for records a power loss can still tear off
    this log (recovery trusts the log below the newest snapshot; the node then refused to
    start on a torn batch it took for damage): it waits for the flush."""
    d = _formatted(tmp_path)
    storage = MetadataStorage.open(d, node_id=1, segment_bytes=1024,
                                   policy=SnapshotPolicy(max_record_bytes=100, interval_ms=0),
                                   downloads=True)
    log = storage.metadata
    log.append([b"w"] * 3, leader_epoch=2, timestamp=1000)  # 30-32: fetched, not flushed
    image = CommittedImage(SimpleNamespace(snapshot_values=lambda: iter(())), 33)
    generator = SnapshotGenerator(storage.snapshots)

    def take() -> object:
        return generator.maybe_take(image, 5000, durable=log.flushed_offset, committed=33,
                                    epoch_of=lambda o: log.epoch_at(o) or 0,
                                    timestamp_below=log.timestamp_below,
                                    control_at=lambda o: [])

    assert log.flushed_offset == 30 and take() is None and not image.held
    log.flush()
    job = take()
    assert job is not None and job.snapshot_id == SnapshotId(33, 2)
    generator.done(job)
    storage.close()


def _voter_of_three(d: Path, **properties: str) -> Any:
    from kraftpy.controller.config import build_config
    from kraftpy.controller.quorum import open_quorum

    config = build_config({
        "process.roles": "controller", "node.id": "1", "cluster.id": CLUSTER,
        "listeners": "CONTROLLER://127.0.0.1:9093", "controller.listener.names": "CONTROLLER",
        "metadata.log.dir": str(d), "metadata.log.segment.bytes": "1024", **properties})
    return open_quorum(config, {1: ("127.0.0.1", 9093), 2: ("127.0.0.1", 9094),
                                3: ("127.0.0.1", 9095)})


def test_a_restarted_voter_applies_retention_once_past_its_newest_snapshot(
        tmp_path: Path) -> None:
    """A retention policy keeps the log below the snapshots. Restarted, a voter knows no
    high watermark (its log start): a retention job then told the core of a snapshot past
    it, the core refused and the node stopped. Retention now waits for the high watermark
    to pass the newest snapshot (which the voter may not take as committed at once: it may
    have installed it over a divergent log just before a power loss); found by the
    whole-node simulation."""
    d = _formatted(tmp_path)
    value = encode_metadata_record(
        ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=9000), 0)
    for end in (10, 20):
        write_snapshot(d / "__cluster_metadata-0", SnapshotId(end, 1), [value],
                       last_contained_log_timestamp=end - 1, timestamp=end)
    quorum = _voter_of_three(d, **{"metadata.max.retention.bytes": "1"})
    try:
        host, jobs = quorum.host, []
        host.start_job = jobs.append
        core = quorum.runner.core
        assert (core.log.start_offset, core.high_watermark) == (0, 0)
        host.maybe_snapshot()
        assert jobs == []  # retention is due, but nothing past 0 is known committed here
        core.log.high_watermark = host.hwm = 25  # as the leader's fetch answers tell it
        host.maybe_snapshot()
        assert len(jobs) == 1 and isinstance(jobs[0], RetentionJob)
        host.run_job_here(jobs.pop())
        assert host.failure is None and core.log.start_offset == 20
    finally:
        quorum.storage.close()


def test_a_rebuild_whose_snapshot_was_deleted_meanwhile_starts_anew(tmp_path: Path) -> None:
    """A rebuild reads its snapshot file off the loop; an installed snapshot deletes every
    older one meanwhile. The rebuild starts again from the newest snapshot instead of
    stopping the node on the missing file (found by the whole-node simulation)."""
    d = _formatted(tmp_path)
    mdir = d / "__cluster_metadata-0"
    value = encode_metadata_record(
        ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=9000), 0)
    write_snapshot(mdir, SnapshotId(20, 1), [value], last_contained_log_timestamp=19,
                   timestamp=20)
    quorum = _voter_of_three(d)
    try:
        host, jobs = quorum.host, []
        host.start_job = jobs.append
        host._start_rebuild(20)  # as a lost leadership or an install starts one
        newer = encode_metadata_record(
            ProducerIdsRecord(broker_id=1, broker_epoch=5, next_producer_id=9500), 0)
        write_snapshot(mdir, SnapshotId(25, 1), [newer], last_contained_log_timestamp=24,
                       timestamp=25)
        (mdir / SnapshotId(20, 1).file_name).unlink()  # as the install of 25 deletes it
        host.run_job_here(jobs.pop(0))
        assert host.failure is None and host.rebuilding is jobs[0]  # anew, from 25
        host.run_job_here(jobs.pop(0))
        assert host.rebuilding is None and host.failure is None
        assert host.controller.producer_ids.next_producer_id == 9500
    finally:
        quorum.storage.close()


def _topics_log(tmp_path: Path) -> tuple[Path, list[bytes]]:
    """A follower's data dir: TopicRecords t0-t29 in the log, a snapshot of t0-t19 at 20."""
    from kraftpy.protocol.records.topic_record import TopicRecord

    d = tmp_path / "data"
    format_storage(d, cluster_id=CLUSTER, node_id=1, metadata_version=27, now_ms=1)
    storage = MetadataStorage.open(d, node_id=1, segment_bytes=1024)
    mdir = d / "__cluster_metadata-0"
    files.write_quorum_state(mdir, leader_id=2, leader_epoch=1, voters=[1, 2, 3],
                             data_version=0)
    topics = [encode_metadata_record(TopicRecord(name=f"t{i}", topic_id=uuid.UUID(int=i + 1)),
                                     0) for i in range(30)]
    for i, value in enumerate(topics):
        storage.metadata.append([value], leader_epoch=1, timestamp=i)
    storage.metadata.flush()
    storage.close()
    write_snapshot(mdir, SnapshotId(20, 1), topics[:20], last_contained_log_timestamp=19,
                   timestamp=20)
    return d, topics


def test_a_rebuild_whose_log_a_newer_snapshot_trimmed_meanwhile_starts_anew(
        tmp_path: Path) -> None:
    """A leader loses its leadership while writing a snapshot: the rebuild of its
    controller reads the newest snapshot and the log after it, off the loop, while the
    snapshot job trims the log below the new snapshot. The rebuild missed the records
    between (and built a state nothing committed, silently); it now notices the log moved
    on and starts anew from the newest snapshot (found by the whole-node simulation)."""
    d, topics = _topics_log(tmp_path)
    mdir = d / "__cluster_metadata-0"
    quorum = _voter_of_three(d)
    try:
        host, jobs = quorum.host, []
        host.start_job = jobs.append
        host._start_rebuild(28)  # from snapshot 20 and the log 20-27
        write_snapshot(mdir, SnapshotId(25, 1), topics[:25], last_contained_log_timestamp=24,
                       timestamp=25)  # the snapshot job meanwhile: written, then its trim
        quorum.storage.metadata.delete_segments_below(25)
        assert quorum.storage.metadata.log_start_offset > 20
        host.run_job_here(jobs.pop(0))
        while jobs:  # started anew, from 25
            host.run_job_here(jobs.pop(0))
        assert host.rebuilding is None and host.failure is None and host.applied == 28
        assert sorted(host.controller.replication.topics_by_name) == sorted(
            f"t{i}" for i in range(28))
    finally:
        quorum.storage.close()


def test_a_follower_holds_its_state_once_and_a_leader_builds_its_image_apart(
        tmp_path: Path) -> None:
    """A follower's controller is its committed image (one replay at open, at an install and
    per commit). A new leader keeps that state as its controller and builds its image apart,
    off the loop: meanwhile the image is the state of nothing and no snapshot is taken; once
    built it is the committed state, another object. Losing the leadership, the image is the
    state again, with no rebuild."""
    from kraftpy.controller.host import HostState

    d, _ = _topics_log(tmp_path)
    quorum = _voter_of_three(d)
    try:
        host, jobs = quorum.host, []
        host.start_job = jobs.append
        assert host.shared and host.controller is host.image.controller
        host.committed(28)  # the quorum committed up to 28: replayed once
        names = sorted(f"t{i}" for i in range(28))
        assert (host.applied, host.image.offset) == (28, 28)
        assert sorted(host.controller.replication.topics_by_name) == names
        host._build_image_apart()  # as the activation of a new leader does
        assert not host.shared and host.image.offset == 0
        assert not host.image.controller.replication.topics_by_name
        host.maybe_snapshot()
        assert jobs == [host.image_job]  # no snapshot of an image being built
        host.run_job_here(jobs.pop())
        assert host.image_job is None and host.image.offset == 28
        assert host.image.controller is not host.controller
        assert sorted(host.image.controller.replication.topics_by_name) == names
        host.state = HostState.ACTIVE
        host.leadership_changed(False)
        assert host.shared and host.controller is host.image.controller
        assert host.state is HostState.FOLLOWER and host.rebuilding is None and not jobs
    finally:
        quorum.storage.close()
