"""The raft driver on trio: the poll loop, the fsync rounds, the peers, parked raft requests.

Everything a node's replica decides goes through `RaftDriver` (`driver.py`); this is only
when and where: a poll at the core's next deadline (or at once when an event woke it), fsyncs
of the log one round at a time (see below), requests to the other voters through
`Peers`, and the raft requests from peers (Vote, BeginQuorumEpoch, EndQuorumEpoch, Fetch,
FetchSnapshot) parked until the core answers them.

Group commit: each fsync round covers every flush the core asked for by the time it began;
what is appended meanwhile waits for the next round. A round is done on the loop itself
while the disk's last fsync was quick (under a millisecond), even with requests waiting: a
worker thread would let the loop go on meanwhile, but its hand-off and the GIL it must win
back from a busy loop cost more than the fsync (AllocateProducerIds at linger 0 from 16
brokers: 13,600 answers/s inline, 10,300/s through a thread). A slow disk's rounds go to a
worker thread, so the loop never stalls for longer than one quick fsync. Before a round
holds the loop, the tasks ready to run go first: the answers the last round released are
sent, so their clients work while this one fsyncs (another 5%). While a job writes a file
beside the log (a snapshot), rounds go to a worker thread whatever the last one took: the
log's fsync may wait behind that file's data in the disk's journal.

The poll loop itself runs the rounds that stay on the loop, right after the pass that asked
for them: handing each to another task cost a wake-up, a task switch and a scheduler pass
per round, about a tenth of a lone writer's CPU per operation. The flusher task runs the
rounds that go to a worker thread (the loop goes on meanwhile), and the one after each of
them; `in_round` keeps to one round at a time either way.

With many writers, a round on the loop leaves the loop idle for its whole fsync while they all
wait for it: when handling them costs the loop more than an fsync lasts, they are split in two
halves whose rounds alternate, each fsynced by the kernel (io_uring) while the loop handles
the other (`overlapped_rounds.py`; where the kernel refuses io_uring, the rounds stay as above).
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from kraftpy.controller.log import files
from kraftpy.controller.metrics_stats import Timings
from kraftpy.controller.raft import quorum_state
from kraftpy.controller.raft.config import RaftConfig
from kraftpy.controller.raft.core import RaftNode
from kraftpy.controller.raft.driver import RaftDriver, RaftPorts
from kraftpy.controller.raft.log_state import RaftLog
from kraftpy.controller.raft.overlapped_rounds import OverlappedRounds
from kraftpy.controller.raft.peers import Peers
from kraftpy.controller.raft.voters import VoterSet

log = logging.getLogger("kraftpy.raft")

# An fsync is done on the loop itself while the last one took at most this long (the fsync
# alone, not a thread's hand-off), so a slow disk never stalls the loop for longer than one.
INLINE_FSYNC_MAX_S = 0.001


# An idle loop waits in epoll, whose timeout is whole milliseconds rounded up: a timer would
# fire up to a millisecond late (0.8 ms at the median here), which at Kafka's 25 ms append
# linger is 3% fewer commits than Kafka's controller makes (its waits are to the
# microsecond). So a wait ends this much early, and the rest is slept on the loop when nothing
# else is ready to run.
TIMER_PRECISION_S = 0.001


def _timed_fsync(ticket: Any) -> float:
    """The ticket's fsync; how long it took."""
    began = time.perf_counter()
    ticket.fsync()
    return time.perf_counter() - began


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(eq=False)
class _Reply:
    """A raft request waiting for the core's answer."""

    event: trio.Event = field(default_factory=trio.Event)
    response: Any = None


class RaftRunner:
    """One replica of `__cluster_metadata-0` running on trio."""

    def __init__(self, *, node_id: int, cluster_id: str, log_: Any, snapshots: Any,
                 raft_config: RaftConfig, voters: VoterSet,
                 addresses: dict[int, tuple[str, int]], directory_id: Any,
                 endpoint: tuple[str, str, int], clock_ms: Callable[[], int] = wall_clock_ms,
                 kraft_version: int = 0,
                 voter_history: list[tuple[int, VoterSet]] | None = None,
                 bootstrap: dict[int, tuple[str, int]] | None = None,
                 high_watermark: int = 0) -> None:
        self.log = log_
        self.partition_dir = Path(log_.directory)
        self.clock_ms = clock_ms
        self.fsyncs = 0
        self.fsync_timings = Timings()
        self.pass_timings = Timings()  # a poll pass, from its start to its end
        self.queue_timings = Timings()  # from the event that woke the loop to its pass
        self._woken_at: float | None = None
        self.failure: BaseException | None = None
        self.on_failure: Callable[[BaseException], None] = lambda exc: None
        self.stopping = False
        self.done = False  # `run` ended: no raft request is answered any more
        self._replies: set[_Reply] = set()
        self._flushes: deque[int] = deque()
        self._flush_wake = trio.Event()
        self.fsync_s = 0.0  # how long the last fsync took, timed alone (not `flush_now`)
        self.disk_shared = 0  # jobs writing beside the log now (`sharing_the_disk`)
        self.in_round = False  # an fsync round is under way (the loop's, the flusher's, a ring's)
        # io_uring rounds that overlap the loop's work (`overlapped_rounds.py`), opened by `run`
        # where the kernel allows and `use_fsync_ring` is on.
        self.use_fsync_ring = True
        self.overlapped: OverlappedRounds | None = None
        self._wake = trio.Event()
        self._progress: trio.Event | None = None  # pulsed after each step, once asked for
        election_path = self.partition_dir / quorum_state.FILE_NAME
        election = (quorum_state.decode(election_path.read_bytes())
                    if election_path.exists() else None)
        start = log_.log_start_offset
        raft_log = RaftLog(start_offset=start, end_offset=log_.log_end_offset,
                           flushed_offset=log_.log_end_offset,
                           epochs=list(log_.leader_epochs),
                           snapshots=[s for s in snapshots.ids() if s[0] >= start],
                           high_watermark=max(start, high_watermark))
        core = RaftNode(config=raft_config, node_id=node_id, directory_id=directory_id,
                        cluster_id=cluster_id, voters=voters, log=raft_log, election=election,
                        now_ms=clock_ms(), rng=random.Random(), listener=endpoint[0],
                        endpoints=(endpoint,), kraft_version=kraft_version,
                        voter_history=voter_history, bootstrap=bootstrap)
        self.peers: Peers
        if bootstrap is not None:  # KIP-853: peers come and go with the voter set
            from kraftpy.controller.raft.dynamic import DynamicPeers
            self.peers = DynamicPeers(node_id, core.endpoint_of,
                                      request_timeout_ms=raft_config.request_timeout_ms,
                                      on_response=self._on_response,
                                      on_failure=self._on_failure)
        else:
            self.peers = Peers(node_id, {i: hp for i, hp in addresses.items() if i != node_id},
                               request_timeout_ms=raft_config.request_timeout_ms,
                               on_response=self._on_response, on_failure=self._on_failure)
        ports = RaftPorts(log=log_, snapshots=_SocketSnapshots(snapshots), send=self.peers.send,
                          respond=self._respond, flush=self._flush,
                          write_quorum_state=self._write_quorum_state, wake=self.kick)
        # Its listener (the controller host) is set before `run`: the host is built on it.
        self.driver = RaftDriver(core, ports, _NoListener(), clock_ms)

    @property
    def core(self) -> RaftNode:
        return self.driver.core

    # --- what the node and the handlers use ----------------------------------------------------
    async def raft_request(self, request: Any, version: int) -> Any:
        """The core's answer to a raft request from a peer (None if the node stopped)."""
        if self.failure is not None or self.done:
            return None
        reply = _Reply()
        self._replies.add(reply)
        try:
            self.step(lambda: self.driver.handle_request(reply, request, version))
            await reply.event.wait()
        finally:
            self._replies.discard(reply)
        return reply.response

    def step(self, event: Callable[[], Any]) -> Any:
        """Run one driver event; a failure stops the node (memory would be ahead of disk)."""
        if self.failure is not None:
            return None
        try:
            return event()
        except Exception as exc:  # noqa: BLE001 - the node stops with it, logged by `fail`
            self.fail(exc)
            return None
        finally:
            self._wake.set()
            if self._progress is not None:
                self._progress.set()
                self._progress = None

    async def progress(self) -> None:
        """Until the next event has been carried out (the high watermark may have moved)."""
        if self._progress is None:
            self._progress = trio.Event()
        await self._progress.wait()

    def kick(self) -> None:
        if self._woken_at is None:  # the first event since the last pass: wake the loop
            self._woken_at = time.perf_counter()
            self._wake.set()

    def fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
            log.error("the raft quorum stopped: %s: %s", type(exc).__name__, exc)
            self.on_failure(exc)
        for reply in list(self._replies):
            reply.event.set()
        self._wake.set()
        self._flush_wake.set()

    def stop(self) -> None:
        """Resign (a leader sends EndQuorumEpoch) and end `run`."""
        self.stopping = True
        self._wake.set()

    # --- the ports ----------------------------------------------------------------------------
    def _respond(self, token: _Reply, response: Any) -> None:
        token.response = response
        token.event.set()

    def _flush(self, offset: int) -> None:
        self._flushes.append(offset)  # the poll loop's next pass runs or hands out the round

    def _write_quorum_state(self, data: bytes) -> None:
        files.atomic_write(self.partition_dir / quorum_state.FILE_NAME, data)

    def _on_response(self, source: int, correlation_id: int, response: Any) -> None:
        self.step(lambda: self.driver.handle_response(source, correlation_id, response))

    def _on_failure(self, destination: int, correlation_id: int) -> None:
        self.step(lambda: self.driver.request_failed(destination, correlation_id))

    # --- the tasks ----------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        self.step(self.driver.start)
        if self.use_fsync_ring:
            self.overlapped = OverlappedRounds.open(self)
        task_status.started()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self.peers.run)
                nursery.start_soon(self._flusher)
                if self.overlapped is not None:
                    nursery.start_soon(self.overlapped.watch)
                await self._poll_loop()
                nursery.cancel_scope.cancel()
        except BaseException as exc:
            self.fail(exc)
            raise
        finally:
            self.done = True
            if self.overlapped is not None:
                self.overlapped.close()
            self.driver.ports.snapshots.download.abandon()
            for reply in list(self._replies):  # parked raft requests: answered as stopped
                reply.event.set()

    async def _poll_loop(self) -> None:
        slept = False  # the last pass followed a sleep: this one yields, whatever comes next
        while self.failure is None:
            if self.stopping:
                self.step(self.driver.resign)
                await trio.sleep(0.1)  # EndQuorumEpoch on its way to the other voters
                return
            began = time.perf_counter()
            woken, self._woken_at = self._woken_at, None
            if woken is not None:
                self.queue_timings.observe(began - woken, woken)
            self.step(self.driver.poll)
            self.pass_timings.observe(time.perf_counter() - began, began)
            # What this pass did needs no second pass (its timers are in next_deadline):
            # only what comes while waiting wakes the loop early.
            self._wake = trio.Event()
            self._woken_at = None
            if self._flushes and not self.in_round:
                if self.overlapped is not None and self.overlapped.usable():
                    self.overlapped.begin_when_idle()  # the loop goes on while it fsyncs
                elif self.fsync_s <= INLINE_FSYNC_MAX_S and not self.disk_shared:
                    await self._round(on_loop=True)  # then waits: the round's commit woke it
                else:
                    self._flush_wake.set()  # the flusher runs it in a worker thread
            # The core's times are whole milliseconds; measured against the exact time so a
            # timer (the append linger above all) fires when due, not a millisecond later.
            wall = self.clock_ms is wall_clock_ms
            now_ms = time.time() * 1000 if wall else self.clock_ms()
            wait_s = max(0.0, (self.core.next_deadline() - now_ms) / 1000)
            if wall and not slept and 0.0 < wait_s <= TIMER_PRECISION_S and \
                    trio.lowlevel.current_statistics().tasks_runnable == 0:
                time.sleep(wait_s)  # the last part of a wait, on an idle loop
                slept = True
                continue
            slept = False  # never two sleeps in a row: the loop looks at its sockets between
            if wall and wait_s > TIMER_PRECISION_S:
                wait_s -= TIMER_PRECISION_S  # woken at most that much early; the rest above
            with trio.move_on_after(min(wait_s, 1.0)):
                await self._wake.wait()

    async def _round(self, *, on_loop: bool) -> None:
        """One fsync round, covering every flush asked for when it begins. What is ready to
        run goes first, twice at most: answers the last round released reach their clients
        before this fsync holds the loop (their next requests come meanwhile), and requests
        already here join the round (`on_loop`: the poll loop runs it, so it writes what they
        appended first)."""
        self.in_round = True
        try:
            for _ in range(2):
                if trio.lowlevel.current_statistics().tasks_runnable == 0:
                    break
                await trio.lowlevel.checkpoint()
            if self.failure is not None:
                return
            if on_loop and self._woken_at is not None:  # appended while others ran
                self._woken_at = None
                self.step(self.driver.poll)
            if self.overlapped is not None:
                self.overlapped.round_begins()
            began = time.perf_counter()
            offsets, ticket = self._begin_round()
            try:
                if self.fsync_s <= INLINE_FSYNC_MAX_S and not self.disk_shared:
                    self.fsync_s = _timed_fsync(ticket)
                else:
                    self.fsync_s = await trio.to_thread.run_sync(_timed_fsync, ticket)
            except OSError as exc:
                ticket.release()
                self.fail(OSError(exc.errno, f"fsync of the metadata log failed: {exc}"))
                return
            self._end_round(offsets, ticket, began)
            if self.overlapped is not None:
                self.overlapped.synced()
        finally:
            self.in_round = False

    async def _flusher(self) -> None:
        """The rounds the poll loop hands out (a slow or shared disk's, in a worker thread),
        and the one after each of them."""
        while self.failure is None:
            if not self._flushes or self.in_round:
                self._flush_wake = trio.Event()
                await self._flush_wake.wait()
                continue
            await self._round(on_loop=False)

    @contextlib.contextmanager
    def sharing_the_disk(self) -> Iterator[None]:
        """A job (a snapshot written, retention) runs beside the log meanwhile. Its file can
        hold the disk for tens of milliseconds (a large image's snapshot is megabytes), and
        the log's fsync may have to wait for it, which the last quick fsync does not predict:
        so until it ends, every round runs in a worker thread and the loop keeps answering."""
        self.disk_shared += 1
        try:
            yield
        finally:
            self.disk_shared -= 1

    def flush_now(self) -> None:
        """One whole fsync round here and now (tests that order commits themselves)."""
        began = time.perf_counter()
        offsets, ticket = self._begin_round()
        try:
            ticket.fsync()
        except OSError as exc:
            ticket.release()
            self.fail(OSError(exc.errno, f"fsync of the metadata log failed: {exc}"))
            return
        self._end_round(offsets, ticket, began)

    @property
    def flushes_asked(self) -> bool:
        return bool(self._flushes)

    def _begin_round(self) -> tuple[list[int], Any]:
        """The flushes this round answers, and the log's ticket (everything written)."""
        offsets = list(self._flushes)
        self._flushes.clear()
        return offsets, self.log.begin_flush()

    def _end_round(self, offsets: list[int], ticket: Any, began: float) -> None:
        self._complete_round(ticket, began)
        self._tell_flushed(offsets)

    def _complete_round(self, ticket: Any, began: float) -> None:
        """The round's fsync is done: the log's flushed offset moves (the core not told yet)."""
        ticket.release()
        self.log.complete_flush(ticket)
        self.fsyncs += 1
        self.fsync_timings.observe(time.perf_counter() - began, began)

    def _tell_flushed(self, offsets: list[int]) -> None:
        for offset in offsets:
            self.step(lambda o=offset: self.driver.flushed(o))


class _SocketSnapshots:
    """The snapshot port of a node whose raft answers go to sockets: a FetchSnapshot chunk is
    a region of the file, sent from there (`file_region`), not read into memory first."""

    def __init__(self, files: Any) -> None:
        self.files = files

    def read_chunk(self, snapshot_id: tuple[int, int], position: int, max_bytes: int
                   ) -> tuple[int, Any] | None:
        return self.files.region_chunk(snapshot_id, position, max_bytes)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.files, name)


class _NoListener:
    def committed(self, high_watermark: int) -> None:
        pass

    def leadership_changed(self, leading: bool) -> None:
        pass

    def snapshot_installed(self, snapshot: Any, size: int) -> None:
        pass
