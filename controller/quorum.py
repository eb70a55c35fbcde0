"""The quorum: the only code that calls the QuorumController, and the task that commits.

Theory of operation. trio runs one task at a time, so a call that does not await is atomic.
`submit` runs a request through `handle`, appends the result's records (to each log's open
batch, which the operations of one commit round share, never splitting one) and applies
them, all without awaiting: operations are serialized exactly as if one task ran them from a
queue, in arrival order, and the next operation sees the new state, as in Kafka's controller.
It costs no task switch, so a request that writes nothing (most InitProducerId answers) is
answered at once. Under load (a round due or in flight) requests do go to a queue, which the
commit task handles in one pass, in arrival order (`_drain`): the same steps, for a fraction
of the cost of taking them one task at a time, and the pass's metadata records reach the
log's open batch in one append (`Storage.prepare`) instead of one each.

Durability is pipelined group commit, as Kafka's controller keeps appending while the raft
thread flushes the previous batch. A commit round writes what both logs have pending (on the
loop) and fsyncs it off the loop; meanwhile requests keep being handled, applied and
appended for the next round. When the fsync returns, the round's high watermarks become
`hwm`, exactly the waiters those cover are released (an answer waits for the first fsync
that STARTED after its records, and everything appended before them, were written), and the
next round starts at once if anything is pending. What a pass appends while a round is in
flight is written at once (`Storage.write_ahead`), so that start has only its fsync to hand
over: the loop would otherwise write it just as the disk goes idle. One round is in flight
at a time, so the high watermark only moves forward. With no round in flight, an append asks
the commit task to start one, which it does after the tasks runnable now: a burst of writers
shares one fsync.

Off the loop means an io_uring (`log/fsync_ring.py`) where the kernel has one: the kernel's
own workers fsync while the loop goes on, and the loop sees the end from shared memory as it
drains, or when the ring's descriptor turns readable. Elsewhere a worker thread fsyncs, which
must win the GIL from the loop at both ends; its end is seen by the next `submit`. When
answers wait for a round and nothing else could run meanwhile, the commit task fsyncs it on
the loop itself (while the last fsync took under `inline_fsync_s`): any hand-off would only
add to the wait. When the loop idles through fsyncs and the writers in play cost it (all its
CPU time per answer) more than an fsync and a half, the queue is split: one half's round is
fsynced while the other half is handled, and the halves alternate (`_overlap`).

Answers follow ControllerResult's rule: at once when they depend on nothing uncommitted,
otherwise after the fsync that covers everything appended up to and including their own
records. Timers run through `tick` every 100 ms and after commits. A snapshot's records are
taken on the loop after a commit (the state there is the replay of everything appended), and
its file is written in a worker thread, beside later commits, once its offset is durable. A
failed write or fsync stops the node and fails every answer not yet released: memory is then
ahead of disk, and only a restart (which replays the log) makes them agree again.
"""

from __future__ import annotations

import logging
import os
import time
from collections import deque
from collections.abc import Callable
from functools import partial
from typing import Any, Protocol

import outcome
import trio
from kraftpy.controller.log.fsync_ring import FsyncRing
from kraftpy.controller.metrics_stats import Timings
from kraftpy.controller.result import ControllerResult

log = logging.getLogger("kraftpy.quorum")

TICK_INTERVAL_S = 0.1
# A round is fsynced on the loop itself (when nothing else could run meanwhile) only while the
# last fsync took at most this long, so a slow disk never stalls the loop for longer than one.
INLINE_FSYNC_MAX_S = 0.001

_reschedule = trio.lowlevel.reschedule
_current_task = trio.lowlevel.current_task
_wait_task_rescheduled = trio.lowlevel.wait_task_rescheduled
_perf_counter = time.perf_counter


class _Released(outcome.Outcome[None]):
    """What a released waiter is rescheduled with: its response is in its entry. One shared
    instance, never counted as used, instead of an outcome.Value per answer, which cost a
    fifth of a release (made, then marked used by the waiter)."""

    __slots__ = ()

    def unwrap(self) -> None:
        return None

    def send(self, gen: Any) -> Any:
        return gen.send(None)

    async def asend(self, agen: Any) -> Any:
        return await agen.asend(None)


_RELEASED = _Released()


class FlushRound(Protocol):
    def fsync(self) -> None: ...

    def files(self) -> list[int]:
        """The descriptors `fsync` syncs (open until `release`), for an FsyncRing."""

    def release(self) -> None: ...


class Storage(Protocol):
    """The two logs as the quorum sees them (`controller/log/storage.MetadataStorage`)."""

    def metadata_end_offset(self) -> int: ...

    def txn_end_offset(self) -> int: ...

    def append(self, result: ControllerResult, now_ms: int) -> tuple[int, int]:
        """Add the result's records to each log's open batch (never split, not yet durable);
        the offsets of its first records."""

    def flush(self) -> tuple[int, int]:
        """Write and fsync both logs; the (metadata, txn) high watermarks. Runs in a thread
        when the storage has no `begin_flush`."""

    # Optional, for drain passes: `prepare()` gives a place (`log/storage.PreparedRecords`)
    # where the operations of a pass keep their encoded metadata records, to be appended
    # together (`append(now_ms)`); with it, `append_txn(txn_records, now_ms)` appends a
    # result's transaction log records alone.
    # Optional, for pipelined rounds: `begin_flush()` writes what is pending (on the loop)
    # and returns a FlushRound, whose `fsync()` runs in a worker thread (or whose `files()`
    # an FsyncRing fsyncs);
    # `complete_flush(round)` then gives the (metadata, txn) high watermarks it covered;
    # `write_ahead()` writes what is pending for a later round (nothing durable yet).

    def after_commit(self, controller: Any, now_ms: int) -> Any:
        """Housekeeping after commits (snapshots by policy), on the event loop. May return
        a job (`end_offset`, `write()` for a worker thread once `end_offset` is committed,
        `finish()` back on the loop, `abandon()`), which runs beside the commits."""


def _log_lines(events: list[Any]) -> None:
    """A result's event lines at INFO: a str, or a (format, *args) tuple."""
    for line in events:
        if type(line) is tuple:
            log.info(*line)
        else:
            log.info("%s", line)


class NodeStopped(RuntimeError):
    """The quorum is not running (stopping, or stopped by a failed write)."""


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class Quorum:
    """Owns the controller: `submit` for requests, `run` as the commit-and-timers task."""

    def __init__(self, controller: Any, storage: Storage, *,
                 clock_ms: Callable[[], int] = wall_clock_ms,
                 inline_fsync_s: float = INLINE_FSYNC_MAX_S, fsync_ring: bool = True) -> None:
        self.controller = controller
        self.inline_fsync_s = inline_fsync_s  # 0: every fsync in a worker thread
        self.storage = storage
        self.clock_ms = clock_ms
        self.hwm = (storage.metadata_end_offset(), storage.txn_end_offset())
        self.fsyncs = 0
        # For the metrics (controller/metrics.py), added to once per round or drain pass:
        # each round's fsync; each pass's wait (from its first request queued) and handling.
        self.fsync_timings = Timings()
        self.queue_timings = Timings()
        self.pass_timings = Timings()
        self._queued_at = 0.0
        # Waiting answers in append order, so their (metadata end, txn end) only grow:
        # [end, txn end, task, response] (task None once cancelled).
        self._waiters: deque[list[Any]] = deque()
        # Requests that came while a round was due or in flight, for the commit task to handle
        # in one pass: [0, 0, task, request, version, listener], then as a waiter.
        self._queue: deque[list[Any]] = deque()
        self._draining = False  # the commit task has been asked to drain the queue
        self._draining_task = False  # `run` is running: there is a commit task to drain it
        # Which requests may queue: those whose answers wait for a commit anyway (all of them
        # for a controller that does not say).
        self._usually_writes: Callable[[Any], bool] = getattr(
            controller, "usually_writes", lambda request: True)
        self._round: Any = None  # the round being fsynced (a FlushRound, or None)
        self._in_flight = False
        self._deferred = False  # the commit task is to start the next round
        self._synced: outcome.Outcome[Any] | None = None  # its outcome, set by its thread
        self._fsync_s = 0.0  # how long the last round's fsync took
        # io_uring for rounds' fsyncs, opened by `run` when the storage hands out its files
        # (`FlushRound.files`) and the kernel allows it; else a worker thread fsyncs.
        self.use_fsync_ring = fsync_ring
        self._ring: FsyncRing | None = None
        self._ring_round = 0  # the ring round in flight (its fsyncs' user_data), 0 for none
        self._ring_left = 0  # its fsyncs not completed yet
        self._ring_error: OSError | None = None
        self._ring_began = 0.0
        # Measured between rounds, on average (see `_overlap`): the loop's CPU time per answer
        # released (all of it: the writers' turns, handling, rounds), and how long per round
        # it had nothing to do.
        self._cpu_per_answer_s = 0.0
        self._idle_per_round_s = 0.0
        self._cpu_mark, self._wall_mark = time.thread_time(), time.perf_counter()
        self._overlapping = False  # see `_overlap`
        self._rounds = 0  # rounds finished since the commit task last did its housekeeping
        self._tick_due = False
        # Whether event lines are logged, read again at every drain pass and tick (a level
        # set at run time counts within a tick), not per event: a dropped line still costs
        # a logger call.
        self._log_events = log.isEnabledFor(logging.INFO)
        self._token: trio.lowlevel.TrioToken | None = None
        self._wake = trio.Event()  # the commit task: a round to start, finish or tidy up
        # Set after the next round; made only when someone waits (a snapshot's write).
        self._committed: trio.Event | None = None
        self._stopping = False
        self._failed: BaseException | None = None
        self._background: trio.Nursery  # run's nursery: snapshot writes

    # --- callers -------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """Whether `submit` takes requests: not stopping and no write has failed."""
        return self._failed is None and not self._stopping

    async def submit(self, request: Any, api_version: int, listener: str | None = None) -> Any:
        """The response to `request`, once the rule for releasing it allows."""
        if self._failed is not None or self._stopping:
            self._check_running()
        if (self._in_flight or self._deferred or self._queue) and self._draining_task \
                and self._usually_writes(request):
            # Under load: queue behind the others; the commit task handles the whole queue in
            # one pass (`_drain`), which costs less per request than one handling per task.
            entry = [0, 0, _current_task(), request, api_version, listener]
            self._queue.append(entry)
            if not self._draining:
                self._draining = True
                self._queued_at = _perf_counter()
                self._wake.set()
        else:
            storage = self.storage
            result, end, txn_end = self._handle(request, api_version, listener,
                                                self.clock_ms(), storage.metadata_end_offset(),
                                                storage.txn_end_offset())
            if self._synced is not None:  # the round in flight is durable: release its answers
                self._finish_round()
            if (result.records or result.txn_records) and not self._in_flight \
                    and not self._deferred:
                self._kick()
            if self._answered(result, end, txn_end):
                return result.response
            # Park until a round covers (end, txn_end); inline, not a coroutine per answer.
            if not self._in_flight and not self._deferred:
                self._kick()  # its records, or those appended before it, wait for a round
            entry = [end, txn_end, _current_task(), result.response]
            self._waiters.append(entry)

        def abort(_: Any) -> trio.lowlevel.Abort:
            entry[2] = None  # cancelled: marked, so nobody handles or releases it
            return trio.lowlevel.Abort.SUCCEEDED

        # Until released (the response is then entry[3]), or the error that stopped it.
        await _wait_task_rescheduled(abort)
        return entry[3]

    async def wait_for_high_watermark(self, past: int) -> None:
        """Return once the metadata high watermark is above `past`, or the quorum stopped:
        what a parked raft Fetch waits for (one Event for all of them, set by every round)."""
        while self.hwm[0] <= past and self._failed is None and not self._stopping:
            if self._committed is None:
                self._committed = trio.Event()
            await self._committed.wait()

    def _handle(self, request: Any, api_version: int, listener: str | None, now: int,
                end: int, txn_end: int) -> tuple[ControllerResult, int, int]:
        """`handle` and `_write` one request at `now`, the logs ending at (`end`, `txn_end`):
        its result and the log ends its answer waits for, which are just past its own records
        (nothing runs in between)."""
        result = self.controller.handle(request, api_version, now_ms=now, next_offset=end,
                                        listener=listener)
        if result.records or result.txn_records or result.events:  # most answers have none
            ends = self._write(result, now)
            if ends is not None:
                return result, ends[0], ends[1]
        return result, end, txn_end

    def _answered(self, result: ControllerResult, end: int, txn_end: int) -> bool:
        """Whether the answer may go now: it depends on nothing uncommitted, or a round has
        already covered everything up to its records."""
        hwm = self.hwm
        return result.respond_before_commit or (hwm[0] >= end and hwm[1] >= txn_end)

    def _drain(self) -> None:
        """On the commit task: handle every queued request in arrival order, exactly as
        `submit` would inline (answered at once, or waiting for the round that covers it)."""
        self._draining = False
        began = _perf_counter()
        self.queue_timings.observe(began - self._queued_at, began)
        queue, waiters = self._queue, self._waiters
        ring = self._ring
        # With a ring and no round in flight, when `_overlap` says so, the first half starts
        # a round that is fsynced while the second half is handled; under steady load the two
        # halves then alternate. Otherwise one round after the whole queue does more per fsync.
        count = len(queue)
        now = self.clock_ms()  # one reading for the pass: it runs as one step, nothing between
        self._log_events = log.isEnabledFor(logging.INFO)
        # The logs' ends, carried from one request to the next: only their records move them.
        storage, handle = self.storage, self._handle
        end, txn_end = storage.metadata_end_offset(), storage.txn_end_offset()
        # The pass's metadata records go to the log together (see Storage.prepare): before a
        # round may take them, and after the last request. Without it, one by one.
        prepare = getattr(storage, "prepare", None)
        prepared = prepare() if prepare is not None else None
        controller_handle, apply = self.controller.handle, self.controller.apply
        split = -1
        if ring is not None and not self._in_flight and self._overlap(count):
            split = count // 2
        while queue:
            if split >= 0:
                if split == 0:
                    if prepared and not self._append_prepared(prepared, now):
                        return
                    if not self._in_flight and self._pending():
                        self._start_round()
                split -= 1
            elif ring is not None and self._ring_left and ring.ready():
                # Its answers go now; the next round starts after this pass, with all of it.
                self._reap_ring(ring, start_next=False)
                if self._failed is not None:  # its fsync failed: `_fail` answered the queue
                    return
            entry = queue.popleft()
            task = entry[2]
            if task is None:  # cancelled before it was handled: it never happened
                continue
            try:
                if prepared is None:
                    result, end, txn_end = handle(entry[3], entry[4], entry[5], now, end,
                                                  txn_end)
                else:  # `_handle`, its records kept in `prepared`: written out, the hot path
                    result = controller_handle(entry[3], entry[4], now_ms=now, next_offset=end,
                                               listener=entry[5])
                    records = result.records
                    if result.txn_records:
                        end, txn_end = self._write_prepared_txn(result, now, prepared)
                    elif records or result.events:
                        if self._log_events:
                            _log_lines(result.events)
                        if records:
                            apply(result, offset=prepared.add(records), txn_offset=txn_end)
                            end = prepared.end
            except Exception as exc:  # the caller's error, as inline
                _reschedule(task, outcome.Error(exc))
                end = prepared.end if prepared is not None else storage.metadata_end_offset()
                txn_end = storage.txn_end_offset()
                continue
            entry[3] = result.response
            if self._answered(result, end, txn_end):
                _reschedule(task, _RELEASED)
            else:
                entry[0], entry[1] = end, txn_end
                waiters.append(entry)
        if prepared and not self._append_prepared(prepared, now):
            return
        if self._in_flight:  # the next round's records go to disk now, not when it starts
            self._write_ahead()
        self.pass_timings.observe(_perf_counter() - began, began)

    def stop(self) -> None:
        """Refuse new requests; `run` commits what is pending and returns."""
        self._stopping = True
        self._wake.set()

    def _check_running(self) -> None:
        if self._failed is not None:
            raise NodeStopped("the controller stopped after a failed write") from self._failed
        if self._stopping:
            raise NodeStopped("the controller is shutting down")

    def _write(self, result: ControllerResult, now_ms: int) -> tuple[int, int] | None:
        """Log the result's events; append and apply its records. The (metadata, txn) log
        ends just past them, or None when it has none."""
        if self._log_events:
            _log_lines(result.events)
        if not result.records and not result.txn_records:
            return None
        offset, txn_offset = self.storage.append(result, now_ms)
        self.controller.apply(result, offset=offset, txn_offset=txn_offset)
        return offset + len(result.records), txn_offset + len(result.txn_records)

    def _write_prepared_txn(self, result: ControllerResult, now_ms: int,
                            prepared: Any) -> tuple[int, int]:
        """`_write`, in a drain pass, of a result with transaction log records: those are
        appended at once; its metadata records are encoded first and kept in `prepared` only
        once they are, so the operation fails whole. The log ends past them."""
        if self._log_events:
            _log_lines(result.events)
        encoded = prepared.encode(result.records)
        txn_offset = self.storage.append_txn(result.txn_records, now_ms)
        offset = prepared.keep(*encoded)
        self.controller.apply(result, offset=offset, txn_offset=txn_offset)
        return prepared.end, txn_offset + len(result.txn_records)

    def _append_prepared(self, prepared: Any, now_ms: int) -> bool:
        """Append what a drain pass prepared. Its operations are applied already, so a failure
        stops the node (memory is then ahead of the log): False."""
        try:
            prepared.append(now_ms)
        except Exception as exc:
            self._fail(exc)
            return False
        return True

    def _write_ahead(self) -> None:
        """Write the pending records while a round is in flight. They are applied already,
        so a failure stops the node, as a failed round start does."""
        write_ahead = getattr(self.storage, "write_ahead", None)
        if write_ahead is not None:
            try:
                write_ahead()
            except Exception as exc:
                self._fail(exc)

    # --- commit rounds (all on the loop but a round's fsync) ----------------------------------
    def _pending(self) -> bool:
        hwm = self.hwm
        return (self.storage.metadata_end_offset() > hwm[0]
                or self.storage.txn_end_offset() > hwm[1])

    def _kick(self) -> None:
        """Records wait and no round is in flight: the commit task starts one once the tasks
        runnable now have run (they may add to it, so a burst of writers shares one fsync)."""
        self._deferred = True
        self._wake.set()

    def _start_round(self, *, inline_if_idle: bool = False) -> None:
        """Write what is pending and fsync it off the loop (the ring, else a worker thread; the
        loop keeps going), or, with `inline_if_idle`, on the loop when answers wait for it,
        nothing else is runnable and recent fsyncs were quick: the loop would only wait for
        the hand-offs."""
        if self._token is None:
            self._token = trio.lowlevel.current_trio_token()
        self._in_flight = True
        self._deferred = False
        try:
            begin = getattr(self.storage, "begin_flush", None)
            if begin is None:
                self._round = None
                fsync = self.storage.flush
            else:
                self._round = begin()
                fsync = self._round.fsync
        except BaseException as exc:
            self._in_flight = False
            self._fail(exc)
            return
        # Not while writers are split in two (`_overlap`): then others are as good as sure to
        # be runnable, and the statistics cost more than the rest of the round's start.
        if inline_if_idle and self._round is not None and self._waiters \
                and self._fsync_s < self.inline_fsync_s and not self._overlapping:
            stats = trio.lowlevel.current_statistics()
            if not stats.tasks_runnable and not stats.run_sync_soon_queue_size:
                self._deliver_inline(outcome.capture(self._timed, fsync))
                return
        if self._ring is not None and self._round is not None:
            files = self._round.files()
            if len(files) <= self._ring.capacity:  # else segments rolled often: a thread
                self._submit_to_ring(self._ring, files)
                return
        trio.lowlevel.start_thread_soon(partial(self._timed, fsync), self._deliver)

    def _submit_to_ring(self, ring: FsyncRing, files: list[int]) -> None:
        self._ring_round += 1
        self._ring_left, self._ring_error = len(files), None
        self._ring_began = time.perf_counter()
        try:
            ring.submit(files, self._ring_round)
        except (OSError, ValueError) as exc:
            self._ring_left = 0
            self._deliver_inline(outcome.Error(exc))
            return
        if not files:
            self._deliver_inline(outcome.Value(None))

    def _reap_ring(self, ring: FsyncRing, start_next: bool = True) -> None:
        """Take the ring's completions; the round ends with its last file's fsync."""
        for user_data, res in ring.reap():
            if user_data != self._ring_round or self._ring_left <= 0:
                continue  # not an fsync of the round in flight (none other is ever submitted)
            if res < 0 and self._ring_error is None:
                self._ring_error = OSError(-res, os.strerror(-res))
            self._ring_left -= 1
            if self._ring_left == 0:
                self._fsync_s = time.perf_counter() - self._ring_began
                error, self._ring_error = self._ring_error, None
                self._deliver_inline(outcome.Value(None) if error is None
                                     else outcome.Error(error), start_next)

    async def _watch_ring(self, ring: FsyncRing) -> None:
        """Wakes the loop for a completion nobody polled for (`_drain` polls as it goes; the
        ring is readable only while a completion waits, so one it reaped wakes nothing)."""
        fd = ring.fileno()
        while True:
            await trio.lowlevel.wait_readable(fd)
            if ring.ready():
                self._reap_ring(ring)

    def _timed(self, fsync: Callable[[], Any]) -> Any:
        began = time.perf_counter()
        value = fsync()
        self._fsync_s = time.perf_counter() - began
        return value

    def _deliver_inline(self, synced: outcome.Outcome[Any], start_next: bool = True) -> None:
        self._synced = synced
        self._finish_round(start_next)

    def _deliver(self, synced: outcome.Outcome[Any]) -> None:
        """In the worker thread: publish the outcome first (the next `submit` may finish the
        round from it), then wake the loop in case nothing runs there."""
        self._synced = synced
        assert self._token is not None
        self._token.run_sync_soon(self._on_synced)

    def _on_synced(self) -> None:
        if self._synced is not None:
            self._finish_round()

    def _finish_round(self, start_next: bool = True) -> None:
        """On the loop: move `hwm`, release what the round covered, start the next one (or
        leave that to the commit task: `_drain` has more to add to it)."""
        synced, self._synced = self._synced, None
        flush, self._round = self._round, None
        self._in_flight = False
        try:
            assert synced is not None
            value = synced.unwrap()
            hwm = value if flush is None else self.storage.complete_flush(flush)
            self.fsyncs += 1
            self.fsync_timings.observe(self._fsync_s, _perf_counter())
            self.hwm = (hwm[0], hwm[1])
            self.controller.on_committed(hwm[0], hwm[1])
        except BaseException as exc:
            if flush is not None:
                flush.release()
            self._fail(exc)
            return
        # The next round first: its fsync then runs while this one's answers are released
        # (a 64-writer loop idled for a tenth of the time on a disk otherwise).
        if start_next and self._pending():
            in_play = len(self._waiters) + len(self._queue)  # this round's answers included
            if self._ring is None or self._overlap(in_play):
                self._start_round()
                if self._failed is not None:  # `_fail` answered everyone
                    return
            else:  # one round with the answers released below, once they have come back
                self._kick()
        released = self._release()
        if released:
            cpu, wall = time.thread_time(), time.perf_counter()
            busy = cpu - self._cpu_mark
            self._cpu_per_answer_s += 0.25 * (busy / released - self._cpu_per_answer_s)
            self._idle_per_round_s += 0.25 * (wall - self._wall_mark - busy
                                              - self._idle_per_round_s)
            self._cpu_mark, self._wall_mark = cpu, wall
        done, self._committed = self._committed, None
        if done is not None:
            done.set()
        self._rounds += 1
        self._wake.set()

    def _overlap(self, requests: int) -> bool:
        """Whether to fsync one half of `requests` (the writers now in play) while the other
        half is handled. In one round for all, the loop may wait out each fsync with nothing
        to do; in two halves it never waits while a half costs it as long as an fsync lasts,
        but has twice the rounds to pay for, and each writer waits for every other round.
        So: two halves once the loop is seen idle for a quarter of each fsync and the writers
        cost it (all its CPU time per answer, rounds included) more than one and a half
        fsyncs; one round again below one fsync (a margin, so the two ways do not alternate).
        A loop kept busy by other work (answers that write nothing) is never idle: its
        writers stay in one round."""
        cost, fsync = requests * self._cpu_per_answer_s, self._fsync_s
        if cost < fsync:
            self._overlapping = False
        elif cost > 1.5 * fsync and self._idle_per_round_s > 0.25 * fsync:
            self._overlapping = True
        return self._overlapping

    def _release(self) -> int:
        """Answer the waiters the high watermarks now cover; how many left the queue."""
        hwm, txn_hwm = self.hwm
        waiters = self._waiters
        count = len(waiters)
        while waiters:
            waiter = waiters[0]
            if waiter[0] > hwm or waiter[1] > txn_hwm:
                break
            waiters.popleft()
            if waiter[2] is not None:
                _reschedule(waiter[2], _RELEASED)
        return count - len(waiters)

    def _fail(self, exc: BaseException) -> None:
        """A write or fsync failed: stop, and fail every answer not yet durable."""
        if self._failed is None:
            self._failed = exc
        self._release()  # what a round covered is durable: answered, not failed
        waiters, self._waiters = self._waiters, deque()
        queue, self._queue = self._queue, deque()
        for waiter in (*waiters, *queue):
            if waiter[2] is not None:
                stopped = NodeStopped("the write of this request failed")
                stopped.__cause__ = self._failed
                _reschedule(waiter[2], outcome.Error(stopped))
        if self._committed is not None:
            self._committed.set()
        self._wake.set()

    # --- the commit task -----------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._token = trio.lowlevel.current_trio_token()
        # The loop's thread, which may not be __init__'s.
        self._cpu_mark, self._wall_mark = time.thread_time(), time.perf_counter()
        task_status.started()
        self._tick_due = True  # at once: an empty log is bootstrapped by the first tick
        if self.use_fsync_ring and hasattr(self.storage, "begin_flush"):
            self._ring = FsyncRing.open()
        self._draining_task = True
        try:
            async with trio.open_nursery() as self._background:  # snapshot writes
                async with trio.open_nursery() as timers:
                    timers.start_soon(self._ticker)
                    if self._ring is not None:
                        timers.start_soon(self._watch_ring, self._ring)
                    await self._commit_loop()
                    timers.cancel_scope.cancel()
        except BaseException as exc:
            self._fail(exc)
            raise
        finally:
            self._draining_task = False
            if self._committed is not None:
                self._committed.set()
            ring, self._ring = self._ring, None
            if ring is not None:
                ring.close()

    async def _commit_loop(self) -> None:
        while True:
            if self._wake.is_set():  # what set it is seen below; a later set wakes the wait
                self._wake = trio.Event()
            if self._failed is not None:
                raise self._failed
            if self._rounds:
                self._rounds = 0
                self._after_commit()
                self._tick()  # timers the commit made due (e.g. id prefetch)
            if self._tick_due:
                self._tick_due = False
                self._tick()
            if self._synced is not None:
                self._finish_round()
            if self._queue and self._failed is None:
                self._drain()
            if not self._in_flight and self._pending() and self._failed is None:
                self._start_round(inline_if_idle=True)
            if self._stopping and not self._in_flight and not self._pending() \
                    and not self._queue:
                if self._failed is not None:
                    raise self._failed
                return
            if self._rounds or self._tick_due or self._failed is not None:
                continue
            await self._wake.wait()  # no cancel scope per round: the ticker wakes it

    async def _ticker(self) -> None:
        """Timers every TICK_INTERVAL_S, counted from the end of the last tick's wait."""
        while True:
            await trio.sleep(TICK_INTERVAL_S)
            self._tick_due = True
            self._wake.set()

    def _tick(self) -> None:
        if self._failed is not None:
            return
        self._log_events = log.isEnabledFor(logging.INFO)
        now = self.clock_ms()
        self._write(self.controller.tick(now_ms=now,
                                         next_offset=self.storage.metadata_end_offset()), now)

    def _after_commit(self) -> None:
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
                if self._committed is None:
                    self._committed = trio.Event()
                await self._committed.wait()
            await trio.to_thread.run_sync(job.write)
        except BaseException:
            job.abandon()
            raise
        job.finish()
