"""The one trio task that owns the QuorumController: events in, durable answers out.

Theory of operation. Connections `submit` requests; they queue on a channel. The task takes
every event waiting (a round), runs each through `handle` one at a time, appends each result's
records as one batch to __cluster_metadata-0 (and its txn records to __transaction_state-0),
applies them at once so the next event sees the new state, and then fsyncs once for the whole
round (group commit, in a worker thread so the loop's clock and channel stay live). Answers are
released by the rule in ControllerResult: at once when they depend on nothing uncommitted,
otherwise after the fsync that covers them. Timers run through `tick` every 100 ms and right
after each commit. A failed write or fsync stops the node: memory is then ahead of disk, and
only a restart (which replays the log) makes them agree again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import trio
from kraftpy.controller.result import ControllerResult

log = logging.getLogger("kraftpy.quorum")

TICK_INTERVAL_S = 0.1
MAX_ROUND = 2048


class Storage(Protocol):
    """The two logs as the loop sees them (implemented over controller/log by recovery.py)."""

    def metadata_end_offset(self) -> int: ...

    def txn_end_offset(self) -> int: ...

    def append(self, result: ControllerResult, now_ms: int) -> tuple[int, int]:
        """Write the result's records (one batch each log); returns their base offsets."""

    def flush(self) -> tuple[int, int]:
        """fsync both logs; returns the (metadata, txn) high watermarks. Runs in a thread."""

    def after_commit(self, controller: Any, now_ms: int) -> None:
        """Housekeeping once durable (snapshots by policy). Runs on the loop."""


class NodeStopped(RuntimeError):
    """The quorum task is not running (stopping, or failed on a write)."""


@dataclass(eq=False)
class _Event:
    request: Any
    api_version: int
    listener: str | None
    done: trio.Event = field(default_factory=trio.Event)
    response: Any = None
    error: BaseException | None = None

    def resolve(self, response: Any = None, error: BaseException | None = None) -> None:
        self.response, self.error = response, error
        self.done.set()


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Quorum:
    """Owns the controller; `run` is the task, `submit` is how everyone else talks to it."""

    def __init__(
        self,
        controller: Any,
        storage: Storage,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
        queue_size: int = 65536,
    ) -> None:
        self.controller = controller
        self.storage = storage
        self.clock_ms = clock_ms
        self._send, self._receive = trio.open_memory_channel[_Event](queue_size)
        self._stopping = False
        self._failed: BaseException | None = None
        self.rounds = 0
        self.fsyncs = 0

    # --- callers -------------------------------------------------------------------------------
    async def submit(self, request: Any, api_version: int, listener: str | None = None) -> Any:
        """The response to `request`, once the rule for releasing it allows."""
        if self._stopping or self._failed is not None:
            raise NodeStopped("the controller is shutting down")
        event = _Event(request, api_version, listener)
        await self._send.send(event)
        await event.done.wait()
        if event.error is not None:
            raise event.error
        return event.response

    async def stop(self) -> None:
        """Finish the queued events, commit them, end the task."""
        self._stopping = True
        await self._send.aclose()

    # --- the task ------------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        next_tick = trio.current_time()
        try:
            while True:
                batch: list[_Event] = []
                closed = False
                with trio.move_on_at(next_tick):
                    try:
                        batch.append(await self._receive.receive())
                    except trio.EndOfChannel:
                        closed = True
                while not closed and len(batch) < MAX_ROUND:
                    try:
                        batch.append(self._receive.receive_nowait())
                    except trio.WouldBlock:
                        break
                    except trio.EndOfChannel:
                        closed = True
                tick_due = trio.current_time() >= next_tick
                await self._round(batch, tick=tick_due)
                if tick_due:
                    next_tick = trio.current_time() + TICK_INTERVAL_S
                if closed:
                    return
        except BaseException as exc:
            self._failed = exc
            raise
        finally:
            self._fail_waiting()

    def _fail_waiting(self) -> None:
        while True:
            try:
                event = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel, trio.ClosedResourceError):
                return
            event.resolve(error=NodeStopped("the controller stopped"))

    async def _round(self, batch: list[_Event], *, tick: bool) -> None:
        self.rounds += 1
        waiting: list[_Event] = []
        wrote = False
        for event in batch:
            now = self.clock_ms()
            try:
                result = self.controller.handle(
                    event.request, event.api_version, now_ms=now,
                    next_offset=self.storage.metadata_end_offset(), listener=event.listener,
                )
            except Exception as exc:
                # A refused request (e.g. an API the controller does not serve) fails alone.
                event.resolve(error=exc)
                continue
            wrote |= self._write(result, now)
            if result.respond_before_commit:
                event.resolve(result.response)
            else:
                event.response = result.response
                waiting.append(event)
        if tick:
            wrote |= self._tick()
        if wrote:
            await self._commit()
            if self._tick():  # timers that the commit made due (e.g. id prefetch)
                await self._commit()
        for event in waiting:
            event.resolve(event.response)

    def _tick(self) -> bool:
        now = self.clock_ms()
        result = self.controller.tick(now_ms=now, next_offset=self.storage.metadata_end_offset())
        return self._write(result, now)

    def _write(self, result: ControllerResult, now_ms: int) -> bool:
        for line in result.events:
            log.info("%s", line)
        if not result.records and not result.txn_records:
            return False
        offset, txn_offset = self.storage.append(result, now_ms)
        self.controller.apply(result, offset=offset, txn_offset=txn_offset)
        return True

    async def _commit(self) -> None:
        # Shielded: a durable write is never abandoned halfway by a cancellation.
        with trio.CancelScope(shield=True):
            hwm, txn_hwm = await trio.to_thread.run_sync(self.storage.flush)
        self.fsyncs += 1
        self.controller.on_committed(hwm, txn_hwm)
        self.storage.after_commit(self.controller, self.clock_ms())
