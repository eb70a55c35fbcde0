"""Group commit for trio: concurrent appenders share one write and one fsync.

An appender calls `log.append(...)` (cheap: the batch is kept in memory) and then
`await group.wait_durable(end_offset)`. The first waiter that finds no fsync running starts
one: the pending batches of everyone go out in one write, then one fsync runs in a worker
thread while the event loop keeps accepting appends. When it finishes, every waiter whose
records it covered is released; anyone left starts the next round. Nobody is told before the
fsync that covers their records has returned.
"""

from __future__ import annotations

import trio
from kraftpy.controller.log.partition_log import PartitionLog


class GroupCommitFailed(RuntimeError):
    """An fsync failed: nothing after the last good one may be acknowledged, ever."""


class GroupCommit:
    """Shares fsyncs of one PartitionLog among the trio tasks waiting on it."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.fsyncs = 0
        self._running = False
        self._done = trio.Event()
        self._failure: BaseException | None = None

    async def wait_durable(self, end_offset: int) -> int:
        """Return (the high watermark) once every offset below `end_offset` is fsynced."""
        while self.log.high_watermark < end_offset:
            if self._failure is not None:
                raise GroupCommitFailed(f"fsync of {self.log.directory} failed") from self._failure
            if self._running:
                await self._done.wait()
                continue
            await self._flush_round()
        if self._failure is not None:
            raise GroupCommitFailed(f"fsync of {self.log.directory} failed") from self._failure
        return self.log.high_watermark

    async def append_durable(
        self, values: list[bytes | None], *, leader_epoch: int, timestamp: int
    ) -> int:
        """Append one batch and return its base offset once it is durable."""
        base = self.log.append(values, leader_epoch=leader_epoch, timestamp=timestamp)
        await self.wait_durable(base + len(values))
        return base

    async def _flush_round(self) -> None:
        self._running = True
        try:
            # Let every task that is ready to append do so first: they share this fsync.
            # Twice, as trio runs each batch of ready tasks in random order.
            await trio.lowlevel.checkpoint()
            await trio.lowlevel.checkpoint()
            ticket = self.log.begin_flush()
            # Shielded: an fsync, once started, is finished and accounted for.
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(ticket.sync)
            self.log.complete_flush(ticket)
            self.fsyncs += 1
        except BaseException as exc:
            self._failure = exc
            raise
        finally:
            self._running = False
            done, self._done = self._done, trio.Event()
            done.set()
