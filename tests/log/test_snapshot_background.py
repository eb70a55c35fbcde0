"""Snapshots of the committed image, written in a worker thread (or, for a large image, by a
forked child), under unbroken load.

A lone voter (the node's own quorum on a real data dir, as `kraftpy serve` runs one) with
writers that never pause: the snapshot is still taken, of the committed image (never of
state past the high watermark), and written off the loop while answers keep coming; the
segments it covers go only after its rename, and a restart from it plus the log suffix
equals replaying every record.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import trio
from kraftpy.controller import committed_image, replay
from kraftpy.controller.committed_image import SnapshotJob
from kraftpy.controller.log.partition_log import PartitionLog
from kraftpy.controller.log.snapshots import list_snapshots
from kraftpy.controller.log.storage import METADATA_PARTITION, MetadataStorage
from kraftpy.controller.quorum_controller import QuorumController
from support.lone_quorum import broker, open_lone, running_lone

WRITERS = 8
OPS_PER_WRITER = 150
SMALL = {"metadata.log.segment.bytes": "4096",
         "metadata.log.max.record.bytes.between.snapshots": "6000",
         "metadata.log.max.snapshot.interval.ms": "0"}


def _image(controller: QuorumController) -> dict:
    image = controller.describe()
    # The features epoch is the offset where the features were last read from: the snapshot's
    # end when loaded from one, as in Kafka, so it differs from a whole replay's.
    image.pop("features_epoch", None)
    for broker_image in image.get("brokers", []):
        broker_image.pop("last_contact_ms", None)  # a session clock, not replayed state
    return image


@pytest.mark.parametrize("in_child", [False, True], ids=["thread", "forked-child"])
async def test_snapshots_are_written_off_the_loop_under_unbroken_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, in_child: bool
) -> None:
    # A large image's snapshot is written by a forked child: here every one is.
    monkeypatch.setattr(committed_image, "CHILD_AT_PARTITIONS", 0 if in_child else 1 << 60)
    d = tmp_path / "data"
    quorum = open_lone(d, SMALL)
    storage, controller = quorum.storage, quorum.controller
    mdir = d / METADATA_PARTITION
    appended: list[tuple[object, int, int]] = []  # every record at its offset
    acked = 0
    writes: list[dict] = []

    real_apply = controller.apply

    def recording_apply(result, *, offset, txn_offset):
        # Applied at the offsets the records are appended at, whichever way they reach the log.
        appended.extend((r, v, offset + i) for i, (r, v) in enumerate(result.records))
        real_apply(result, offset=offset, txn_offset=txn_offset)

    monkeypatch.setattr(controller, "apply", recording_apply)
    real_run = SnapshotJob.run

    def observed_run(job: SnapshotJob) -> None:
        seen = acked
        deadline = time.monotonic() + 5
        while acked < seen + 10 and acked < WRITERS * OPS_PER_WRITER and \
                time.monotonic() < deadline:
            time.sleep(0.002)  # answers must keep coming while this thread holds the snapshot
        end = job.snapshot_id.end_offset
        writes.append({
            "end": end,
            "answered_meanwhile": acked - seen,
            "in_worker_thread": threading.current_thread() is not threading.main_thread(),
            "in_child": job.in_child,
            "committed": quorum.hwm[0] >= end and storage.metadata.flushed_offset >= end,
        })
        real_run(job)

    monkeypatch.setattr(SnapshotJob, "run", observed_run)
    real_delete = PartitionLog.delete_segments_below

    def checked_delete(plog: PartitionLog, offset: int):
        # Segments go only once the snapshot covering them is renamed into place.
        assert any(sid.end_offset == offset for sid, _ in list_snapshots(mdir))
        assert not list(mdir.glob("*.part"))
        return real_delete(plog, offset)

    monkeypatch.setattr(PartitionLog, "delete_segments_below", checked_delete)

    async def writer(broker_id: int) -> None:
        nonlocal acked
        request = await broker(quorum, broker_id)
        for _ in range(OPS_PER_WRITER):  # never a pause: something always awaits an fsync
            reply = await quorum.submit(request, 0)
            assert reply.error_code == 0
            acked += 1

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await running_lone(quorum, nursery)
            async with trio.open_nursery() as writing:
                for broker_id in range(2, WRITERS + 2):
                    writing.start_soon(writer, broker_id)
            quorum.stop()
    assert acked == WRITERS * OPS_PER_WRITER
    assert len(writes) >= 2, writes
    assert all(w["in_worker_thread"] and w["committed"] for w in writes), writes
    assert all(w["in_child"] is in_child for w in writes), writes
    assert any(w["answered_meanwhile"] >= 10 for w in writes), writes  # the loop went on
    assert storage.metadata.log_start_offset > 0  # covered segments were deleted
    live = _image(controller)
    storage.close()

    snaps = list_snapshots(mdir)
    assert snaps and snaps[-1][0].end_offset == max(w["end"] for w in writes)
    again = MetadataStorage.open(d, node_id=1)
    restarted = quorum.host.make_controller()
    _, snapshot_records, log_records = replay.replay_snapshot_and_log(
        [restarted], again.snapshot, again.metadata, None)
    suffix = again.metadata.log_end_offset - again.snapshot.snapshot_id.end_offset
    again.close()
    assert again.snapshot.snapshot_id == snaps[-1][0] and snapshot_records
    # The log after the newest snapshot is replayed too; it is empty only when the last
    # snapshot happened to cover the log's very end (the writers' last records).
    assert (log_records > 0) == (suffix > 0), (log_records, suffix)
    full = quorum.host.make_controller()
    for record, version, offset in appended:
        full.replay(record, version, offset)
    assert _image(restarted) == _image(full)
    # This node's own id block is volatile (a restart claims a fresh one); the rest is state.
    assert {k: v for k, v in _image(restarted)["producer_ids"].items() if "own" not in k} == {
        k: v for k, v in live["producer_ids"].items() if "own" not in k}
    assert _image(restarted)["brokers"] == live["brokers"]
