"""The quorum: the only code that calls the QuorumController, and the task that commits.

Theory of operation. trio runs one task at a time, so a call that does not await is atomic.
`submit` runs a request through `handle`, appends the result's records (to each log's open
batch, which the operations of one commit round share, never splitting one) and applies
them, all without awaiting: operations are serialized exactly as if one task
ran them from a queue, in arrival order, and the next operation sees the new state, as in
Kafka's controller. It costs no task switch, so a request that writes nothing (most
InitProducerId answers) is answered at once. Durability is the commit task's job (`run`):
whenever something was appended it writes and fsyncs both logs in one round (group commit,
in a worker thread, while requests keep being handled and appended for the next round), then
calls `on_committed` and releases every waiting answer the new high watermarks cover. Answers
follow ControllerResult's rule: at once when they depend on nothing uncommitted, otherwise
after the fsync that covers everything appended up to and including their own records.
Timers run through `tick` every 100 ms and right after each commit. A snapshot's records are
taken on the loop right after a commit (the state there is the replay of everything appended),
and its file is written in a worker thread, beside later commits, once its offset is durable. A failed write or fsync
stops the node: memory is then ahead of disk, and only a restart (which replays the log) makes
them agree again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

import trio
from kraftpy.controller.result import ControllerResult

log = logging.getLogger("kraftpy.quorum")

TICK_INTERVAL_S = 0.1


class Storage(Protocol):
    """The two logs as the quorum sees them (`controller/log/storage.MetadataStorage`)."""

    def metadata_end_offset(self) -> int: ...

    def txn_end_offset(self) -> int: ...

    def append(self, result: ControllerResult, now_ms: int) -> tuple[int, int]:
        """Add the result's records to each log's open batch (never split, not yet durable);
        the offsets of its first records."""

    def flush(self) -> tuple[int, int]:
        """Write and fsync both logs; the (metadata, txn) high watermarks. Runs in a thread."""

    def after_commit(self, controller: Any, now_ms: int) -> Any:
        """Housekeeping after each commit (snapshots by policy), on the event loop. May return
        a job (`end_offset`, `write()` for a worker thread once `end_offset` is committed,
        `finish()` back on the loop, `abandon()`), which runs beside the commits."""


class NodeStopped(RuntimeError):
    """The quorum is not running (stopping, or stopped by a failed write)."""


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


async def _in_worker_thread(fn: Callable[[], Any]) -> Any:
    """`fn()` in trio's thread cache, uncancellable: a durable write is never abandoned
    halfway. Leaner than `trio.to_thread.run_sync` (no limiter, no context copy), which
    matters once per commit round."""
    task = trio.lowlevel.current_task()
    token = trio.lowlevel.current_trio_token()

    def deliver(result: Any) -> None:
        token.run_sync_soon(trio.lowlevel.reschedule, task, result)

    trio.lowlevel.start_thread_soon(fn, deliver)
    return await trio.lowlevel.wait_task_rescheduled(lambda _: trio.lowlevel.Abort.FAILED)


class Quorum:
    """Owns the controller: `submit` for requests, `run` as the commit-and-timers task."""

    def __init__(self, controller: Any, storage: Storage, *,
                 clock_ms: Callable[[], int] = wall_clock_ms) -> None:
        self.controller = controller
        self.storage = storage
        self.clock_ms = clock_ms
        self.hwm = (storage.metadata_end_offset(), storage.txn_end_offset())
        self.fsyncs = 0
        self._appended = trio.Event()  # set when records wait for a commit
        self._committed = trio.Event()  # replaced after every commit round
        self._stopping = False
        self._failed: BaseException | None = None
        self._background: trio.Nursery  # run's nursery: snapshot writes

    # --- callers -------------------------------------------------------------------------------
    async def submit(self, request: Any, api_version: int, listener: str | None = None) -> Any:
        """The response to `request`, once the rule for releasing it allows."""
        if self._failed is not None or self._stopping:
            self._check_running()
        storage = self.storage
        now = self.clock_ms()
        end = storage.metadata_end_offset()
        result = self.controller.handle(
            request, api_version, now_ms=now, next_offset=end, listener=listener)
        written = None
        if result.records or result.txn_records or result.events:  # most answers have none
            written = self._write(result, now)
        if written is not None:
            # The log ends are now just past this result's records (nothing ran in between).
            end, txn_end = written[0] + len(result.records), written[1] + len(result.txn_records)
        elif result.respond_before_commit:
            return result.response
        else:
            txn_end = storage.txn_end_offset()
        if not result.respond_before_commit:
            # Inline (no coroutine per answer): wait until everything appended so far is durable.
            while self.hwm[0] < end or self.hwm[1] < txn_end:
                if self._failed is not None:
                    raise NodeStopped("the write of this request failed") from self._failed
                await self._committed.wait()
        return result.response

    def stop(self) -> None:
        """Refuse new requests; `run` commits what is pending and returns."""
        self._stopping = True
        self._appended.set()

    def _check_running(self) -> None:
        if self._failed is not None:
            raise NodeStopped("the controller stopped after a failed write") from self._failed
        if self._stopping:
            raise NodeStopped("the controller is shutting down")

    def _write(self, result: ControllerResult, now_ms: int) -> tuple[int, int] | None:
        """Log the result's events; append and apply its records and wake the commit task.
        The offsets of its first records, or None when it has none."""
        for line in result.events:
            log.info("%s", line)
        if not result.records and not result.txn_records:
            return None
        offset, txn_offset = self.storage.append(result, now_ms)
        self.controller.apply(result, offset=offset, txn_offset=txn_offset)
        self._appended.set()
        return offset, txn_offset

    # --- the commit task -----------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        next_tick = trio.current_time()
        try:
            async with trio.open_nursery() as self._background:  # snapshot writes
                while True:
                    with trio.move_on_at(next_tick):
                        await self._appended.wait()
                    if trio.current_time() >= next_tick:
                        self._tick()
                        next_tick = trio.current_time() + TICK_INTERVAL_S
                    if self._pending():
                        await self._commit()
                        self._tick()  # timers the commit made due (e.g. id prefetch)
                        if self._pending():
                            continue
                    if self._stopping and not self._pending():
                        break
        except BaseException as exc:
            self._failed = exc
            raise
        finally:
            self._committed.set()

    def _pending(self) -> bool:
        end = (self.storage.metadata_end_offset(), self.storage.txn_end_offset())
        return end[0] > self.hwm[0] or end[1] > self.hwm[1]

    def _tick(self) -> None:
        if self._failed is not None:
            return
        now = self.clock_ms()
        self._write(self.controller.tick(now_ms=now,
                                         next_offset=self.storage.metadata_end_offset()), now)

    async def _commit(self) -> None:
        self._appended = trio.Event()
        hwm, txn_hwm = await _in_worker_thread(self.storage.flush)
        self.fsyncs += 1
        self.hwm = (hwm, txn_hwm)
        self.controller.on_committed(hwm, txn_hwm)
        done, self._committed = self._committed, trio.Event()
        done.set()
        job = self.storage.after_commit(self.controller, self.clock_ms())
        if callable(getattr(job, "write", None)):
            self._background.start_soon(self._write_snapshot, job)

    async def _write_snapshot(self, job: Any) -> None:
        """A snapshot taken on the loop, written in a worker thread once its end offset is
        committed; commits and requests go on meanwhile. A failed write stops the node."""
        try:
            while self.hwm[0] < job.end_offset:
                if self._failed is not None:
                    job.abandon()
                    return
                await self._committed.wait()
            await trio.to_thread.run_sync(job.write)
        except BaseException:
            job.abandon()
            raise
        job.finish()
