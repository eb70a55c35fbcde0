"""Fsync rounds that overlap the loop's work: the kernel fsyncs one half of the writers'
records while the loop handles the other half.

A round done on the loop (`RaftRunner._round`) leaves the loop idle for the whole fsync; with
many writers in play that is much of a round's time, since they all wait for the same fsync and
come back together. When handling the writers costs the loop more than an fsync lasts, they are
split in two: once half of them have appended, their round is written and its fsync handed to an
io_uring (`log/fsync_ring.py`), and the other half is handled while the kernel's own workers
fsync. When that round ends, the other half's round begins first and then the ended round's
answers are released, so the disk is busy while the loop works: under steady load the two
halves alternate (64 writers, AllocateProducerIds at linger 0 on a disk with 0.2 ms fsyncs: 32
operations per fsync and 1.2x the operations per second of one round for all). Not a worker
thread: it needs the GIL to begin its fsync and again to report it, and a busy loop holds the
GIL, so each hand-off costs about what it saves.

The rules are the runner's: a round covers every flush the core asked for when it began, one
round is under way at a time, and the core hears of a round (so answers go) only once its fsync
has completed. Where the kernel refuses io_uring, or while a job writes beside the log
(`RaftRunner.sharing_the_disk`), or where fsyncs are too quick to hide work behind, rounds are
the runner's own.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

import trio
from kraftpy.controller.log.fsync_ring import FsyncRing

if TYPE_CHECKING:
    from kraftpy.controller.raft.runner import RaftRunner

# Hysteresis of the split: two halves once the writers in play cost the loop more than this
# many fsyncs, one round for all again below one fsync (so the two ways do not alternate).
SPLIT_ABOVE_FSYNCS = 1.5
JOIN_BELOW_FSYNCS = 1.0
# Splitting adds a round per fsync, and a round costs the loop ~80 us of its own (64 writers
# on a tmpfs: 7.8 us per operation in rounds of 64, 9.0 in rounds of 32): where an fsync is
# shorter than this (a tmpfs, a fast NVMe), there is less to hide than the split costs.
SPLIT_MIN_FSYNC_S = 0.0001
# Nor with fewer writers than this in play: a split round's own cost (the io_uring submission,
# the watcher's wake-up, a second drain and round end) is spread over half of them, and below
# this it gains little or loses (AllocateProducerIds at linger 0 on a 0.2 ms-fsync disk, the
# cooperative ring: 32 in-process writers 3% faster split, 48 19% faster, 64 23% faster; 16
# brokers over sockets were 13% slower with the ring before it was cooperative).
SPLIT_MIN_WRITERS = 48


class OverlappedRounds:
    """The io_uring rounds of one runner, and when to split the writers in two."""

    def __init__(self, runner: RaftRunner, ring: FsyncRing) -> None:
        self.runner = runner
        self.ring = ring
        self.split = False  # the writers are in two halves whose rounds alternate
        self.rounds = 0  # rounds this ring has fsynced
        # (flushes, ticket, began, writers whose records it covers)
        self._round: tuple[list[int], Any, float, int] | None = None
        self._tag = 0  # the user_data of the round's fsyncs
        self._left = 0  # its fsyncs not completed yet
        self._error: OSError | None = None
        self._appended = 0  # writers appended since the last round began (split or not)
        self._runner_writers = 0  # those a round of the runner's own covers
        self._left_at = -1  # writers appended when the poll loop left a flush to them
        self._split_at = 1 << 30  # how many of them make half
        self._cpu_mark = time.thread_time()
        self._work_s = 0.0
        self._cpu_per_writer = 0.0  # the loop's CPU time per writer answered, smoothed
        self._fsync_s = 0.0  # a round's fsync (a ring round's: until its end is seen), smoothed
        self._writers = (0, 0)  # writers the last two rounds answered

    @classmethod
    def open(cls, runner: RaftRunner) -> OverlappedRounds | None:
        ring = FsyncRing.open()
        return None if ring is None else cls(runner, ring)

    @property
    def in_flight(self) -> bool:
        return self._round is not None

    @property
    def covers(self) -> int:
        """The log end the round under way makes durable (-1: none)."""
        return -1 if self._round is None else self._round[1].end_offset

    def usable(self) -> bool:
        """Whether the next round should be this one's: split, no job shares the disk, and
        no fsync failed (after one, nothing may be fsynced and taken as durable again)."""
        return self.split and not self.runner.disk_shared and self.runner.failure is None

    def appended(self) -> None:
        """A writer's records wait in the core (called outside any step; counted for the
        split's measure): split, once half the writers in play have appended and no round is
        under way, theirs begins now."""
        self._appended += 1
        if not self.split:
            return
        runner = self.runner
        if self._appended >= self._split_at and not runner.in_round and self.usable():
            runner.step(runner.driver.poll)  # the core drains what lingers and asks a flush
            if runner.flushes_asked and not runner.in_round:
                self.begin()

    def begin(self) -> None:
        """Write what is pending and hand its fsync to the kernel; the loop goes on."""
        runner = self.runner
        try:
            flushes, ticket = runner._begin_round()
        except OSError as exc:  # as a failed write: memory is ahead of the disk
            runner.fail(exc)
            return
        runner.in_round = True
        self._tag += 1
        self._round = (flushes, ticket, time.perf_counter(), self._appended)
        self._appended, self._left_at = 0, -1
        fds = list(ticket.fds)
        self._left, self._error = len(fds), None
        if not fds:
            self._finish()
            return
        try:
            if len(fds) > self.ring.capacity:  # segments rolled many times: fsync them here
                ticket.fsync()
                self._left = 0
            else:
                self.ring.submit(fds, self._tag)
                return
        except OSError as exc:
            self._error = OSError(exc.errno, f"fsync of the metadata log failed: {exc}")
        self._finish()

    def reap(self) -> None:
        """Take the ring's completions; the round ends with its last file's fsync."""
        for tag, result in self.ring.reap():
            if tag != self._tag or self._left <= 0:
                continue  # nothing else is ever submitted; a stale tag is ignored
            if result < 0 and self._error is None:
                self._error = OSError(-result, "fsync of the metadata log failed: "
                                      + os.strerror(-result))
            self._left -= 1
        if self._round is not None and self._left == 0:
            self._finish()

    def _finish(self) -> None:
        runner = self.runner
        assert self._round is not None
        (flushes, ticket, began, writers), self._round = self._round, None
        runner.in_round = False
        if self._error is not None:
            ticket.release()
            runner.fail(self._error)
            return
        # From the round's start to its end being seen: the fsync and the loop's wait to see
        # it. Not the runner's `fsync_s` (its inline-or-thread choice is about the fsync).
        took = time.perf_counter() - began
        work_s = time.thread_time() - self._cpu_mark  # no fsync on this thread
        self.rounds += 1
        runner._complete_round(ticket, began)
        self.measure(writers, work_s, took)
        if self._appended >= self._split_at * 3 // 4 and self.usable():
            # The other half appended meanwhile: its round begins before this one's answers
            # are released, so its fsync runs while they are (and while their writers' next
            # requests are handled). Fewer (the halves drifted apart): the writers answered
            # now join them first, up to half (`appended`).
            runner.step(runner.driver.poll)
            if runner.flushes_asked and not runner.in_round:
                self.begin()
        runner._tell_flushed(flushes)

    def begin_when_idle(self) -> None:
        """The poll loop has a flush and no round is under way: begin one when no writer
        could join it now, or when none has since the loop last left it for them (a
        follower's flushes, a timer's records); else the writers runnable now bring it up to
        half first (`appended`), which they reach in a bounded number of appends."""
        if self._appended >= self._split_at or self._appended == self._left_at or \
                trio.lowlevel.current_statistics().tasks_runnable == 0:
            self.begin()
        else:
            self._left_at = self._appended

    def measure(self, writers: int, work_s: float, fsync_s: float) -> None:
        """After each round: `work_s`, the loop's CPU time since the last one (not the
        fsync's), for the `writers` this round answers (requests that wait for a commit; a
        follower's rounds have none, nor a timer's records), and whether the writers in play
        cost the loop more than an fsync lasts."""
        self._cpu_mark = time.thread_time()
        if writers <= 0:
            return
        # Smoothed, both: one slow fsync (the disk's journal, a neighbour's burst) or one
        # busy pass does not flip the rounds from one way to the other.
        first = not self._cpu_per_writer
        self._cpu_per_writer += (work_s / writers - self._cpu_per_writer) * (
            1.0 if first else 0.25)
        self._fsync_s += (fsync_s - self._fsync_s) * (1.0 if first else 0.25)
        fsync_s = self._fsync_s
        self._writers = (self._writers[1], writers)
        writers += self._writers[0] if self.split else 0
        cost = writers * self._cpu_per_writer
        if not self.split:
            self.split = cost > SPLIT_ABOVE_FSYNCS * fsync_s and \
                fsync_s >= SPLIT_MIN_FSYNC_S and writers >= SPLIT_MIN_WRITERS
        elif cost < JOIN_BELOW_FSYNCS * fsync_s or writers < SPLIT_MIN_WRITERS // 2:
            self.split = False
        self._split_at = max(1, writers // 2) if self.split else 1 << 30

    def round_begins(self) -> None:
        """A round of the runner's own begins: the loop's work since the last one ended, and
        the writers it answers."""
        self._work_s = time.thread_time() - self._cpu_mark
        self._runner_writers, self._appended = self._appended, 0

    def synced(self) -> None:
        """A round of the runner's own ended (its fsync is not work: it would not be the
        loop's in a ring)."""
        self.measure(self._runner_writers, self._work_s, self.runner.fsync_s)

    async def watch(self) -> None:
        """Wakes the loop for a completion: the ring's descriptor is readable exactly while
        one waits to be reaped."""
        fd = self.ring.fileno()
        while True:
            await trio.lowlevel.wait_readable(fd)
            if self.ring.ready():
                self.reap()

    def close(self) -> None:
        """The node stops: a round still under way is abandoned (its answers never go)."""
        self.ring.close()
        if self._round is not None:
            self._round[1].release()
            self._round = None
            self.runner.in_round = False
