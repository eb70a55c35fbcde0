"""The metadata log after a power loss that keeps only what was fsynced.

`SimFS` (the whole-node simulation's disk, `tests/support/sim_disk.py`) records how much of
each file an fsync made durable; `capture` with a cut at that point is the directory a power
loss leaves. Both orders below were found by the simulation: a record of the log written
durably before the records it vouches for, so that the log came back refusing to start.
"""

from __future__ import annotations

import random
from pathlib import Path

from kraftpy.controller.log.storage import MetadataStorage, format_storage
from kraftpy.protocol.record_batch import build_record_batch
from support.sim_disk import DiskFaults, SimCrash, SimFS

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


class _DurableOnly(random.Random):
    """A power loss at its worst: nothing written after the last fsync survives."""

    def randint(self, a: int, b: int) -> int:
        return a

    def random(self) -> float:
        return 0.99


def _open(data: Path, **kwargs: object) -> MetadataStorage:
    return MetadataStorage.open(data, node_id=1, downloads=True, **kwargs)


def _lose_power(fs: SimFS, storage: MetadataStorage) -> None:
    image = fs.capture("node1", tear=True)
    for seg in storage.metadata.segments:
        seg.close()
    assert storage.lock is not None
    storage.lock.release()
    fs.restore("node1", image)


def _batch(base: int, count: int, epoch: int) -> bytes:
    return build_record_batch([b"r%d" % (base + i) for i in range(count)], base_offset=base,
                              partition_leader_epoch=epoch, timestamp=base)


def test_a_fetch_of_a_new_epoch_cut_by_a_power_loss_opens(tmp_path: Path) -> None:
    """A follower appends a fetch's batches, the last of a new epoch, and loses power before
    its flush. leader-epoch-checkpoint (written durably as the new epoch's batch is appended)
    names that batch's offset; the batches below it must be durable by then, or the log comes
    back ending before it and is refused as one that lost records."""
    data = tmp_path / "node1"
    format_storage(data, cluster_id=CLUSTER, node_id=1, metadata_version=27)
    fs = SimFS(tmp_path, _DurableOnly())
    fs.mark_durable("node1")
    fs.install(random.Random(0))
    try:
        storage = _open(data)
        log = storage.metadata
        for raw in (_batch(0, 3, 1), _batch(3, 2, 1), _batch(5, 1, 2)):
            log.append_batch(raw)
        assert log.leader_epochs == [(1, 0), (2, 5)]
        _lose_power(fs, storage)
        reopened = _open(data)
    finally:
        fs.uninstall()
    assert reopened.metadata.log_end_offset >= 5
    assert reopened.metadata.leader_epochs[0] == (1, 0)
    reopened.close()


def test_a_roll_cut_by_a_power_loss_opens(tmp_path: Path) -> None:
    """Appends roll the segment; the power goes before any flush. The rolled segment must be
    whole on disk before the next one exists: recovery takes a torn segment with another
    after it for damage and refuses to start."""
    data = tmp_path / "node1"
    format_storage(data, cluster_id=CLUSTER, node_id=1, metadata_version=27)
    fs = SimFS(tmp_path, _DurableOnly())
    fs.mark_durable("node1")
    fs.install(random.Random(0))
    try:
        storage = _open(data, segment_bytes=1024)
        log = storage.metadata
        for offset in range(12):
            log.append([b"x" * 100], leader_epoch=1, timestamp=offset)
        assert len(log.segments) == 2
        _lose_power(fs, storage)
        reopened = _open(data, segment_bytes=1024)
    finally:
        fs.uninstall()
    assert reopened.metadata.log_end_offset >= reopened.metadata.segments[-1].base_offset > 0
    reopened.close()


def test_a_truncation_cut_by_a_power_loss_at_each_of_its_steps_opens(tmp_path: Path) -> None:
    """A follower drops a diverging suffix of two epochs; the power goes at its first disk
    operation, then at its second, ...: every directory left behind opens, holding the log
    either cut or whole. (The checkpoint used to be rewritten after the cut: a power loss
    between left it naming an epoch past the log end, and the node refused to start.)"""
    steps = 0
    while True:
        steps += 1
        data = tmp_path / f"run{steps}" / "node1"
        format_storage(data, cluster_id=CLUSTER, node_id=1, metadata_version=27)
        fs = SimFS(data.parent, _DurableOnly())
        fs.mark_durable("node1")
        fs.install(random.Random(0))
        try:
            storage = _open(data)
            log = storage.metadata
            for raw in (_batch(0, 3, 1), _batch(3, 2, 2), _batch(5, 2, 3)):
                log.append_batch(raw)
            log.flush()
            fs.faults["node1"] = DiskFaults(crash_in=steps)
            try:
                log.truncate_to(3)
            except SimCrash:
                image = fs.captured.pop("node1")
            else:
                image = None
            fs.faults["node1"].crash_in = None
            if image is None:  # every step went through: the cut log closes and reopens
                storage.close()
                reopened = _open(data)
                assert reopened.metadata.log_end_offset == 3
                assert reopened.metadata.leader_epochs == [(1, 0)]
                reopened.close()
                break
            for seg in log.segments:
                seg.close()
            assert storage.lock is not None
            storage.lock.release()
            fs.restore("node1", image)
            reopened = _open(data)
            assert reopened.metadata.log_end_offset in (3, 7), steps
            reopened.close()
        finally:
            fs.uninstall()
    assert steps > 3
