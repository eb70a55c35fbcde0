"""Group commit: waiters are released only after an fsync covering them, and share fsyncs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio
from kraftpy.controller.log import partition_log
from kraftpy.controller.log.group_commit import GroupCommit, GroupCommitFailed
from kraftpy.controller.log.partition_log import PartitionLog


async def test_concurrent_writers_share_fsyncs_and_see_durable_offsets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = PartitionLog.open(tmp_path / "p", topic_id="AAAAAAAAAAAAAAAAAAAAAQ")
    group = GroupCommit(plog)
    synced_to: list[int] = []
    real_sync = partition_log.FlushTicket.sync

    def slow_sync(self: partition_log.FlushTicket) -> None:
        real_sync(self)
        synced_to.append(self.end_offset)

    monkeypatch.setattr(partition_log.FlushTicket, "sync", slow_sync)
    acked: list[tuple[int, int]] = []

    async def writer(w: int) -> None:
        for i in range(20):
            base = await group.append_durable([b"%d-%d" % (w, i)], leader_epoch=1, timestamp=0)
            # Told only after an fsync that covered this record.
            assert any(end > base for end in synced_to)
            acked.append((w, base))

    async with trio.open_nursery() as nursery:
        for w in range(16):
            nursery.start_soon(writer, w)
    assert len(acked) == 320 and len({b for _, b in acked}) == 320
    assert group.fsyncs < 320 / 2  # shared
    assert plog.high_watermark == 320
    plog.close()
    again = PartitionLog.open(tmp_path / "p")
    values = [v for b in again.read() for v in b.values()]
    assert sorted(values) == sorted(b"%d-%d" % (w, i) for w in range(16) for i in range(20))
    again.close()


async def test_a_failed_fsync_fails_every_waiter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plog = PartitionLog.open(tmp_path / "p")
    group = GroupCommit(plog)

    def broken(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken)
    failures = []

    async def writer() -> None:
        try:
            await group.append_durable([b"x"], leader_epoch=0, timestamp=0)
        except (GroupCommitFailed, OSError) as exc:
            failures.append(exc)

    async with trio.open_nursery() as nursery:
        for _ in range(4):
            nursery.start_soon(writer)
    assert len(failures) == 4 and plog.high_watermark == 0
    monkeypatch.undo()
    plog.close()
