"""A deterministic simulation of Raft quorums: one seed, one schedule, every time.

Every node is driven through `RaftDriver` (`controller/raft/driver.py`), the one interpreter
of the core's actions that the server's runner also drives; this file only gives it ports
and decides when things happen. Here the ports are simulated: a log of real record batches
per node (what is written, and how much of it is durable), quorum-state bytes, snapshots, and
a network that delays, drops, duplicates and reorders messages, cuts nodes apart and restarts
them from what their disk holds (the log up to the last completed flush, quorum-state, whole
snapshots). `node_sim.py` runs the same simulation over whole nodes (the controller host, the
real log on real files, disk faults). Clients append to whoever leads. Time is simulated:
events sit in one heap ordered by (time, sequence), and every random draw comes from the
schedule's own `random.Random(seed)`.

After every event the safety properties are checked, and the first violation raises
`SafetyViolation` naming seed, time and what broke:
- at most one leader per epoch, and each voter grants one candidate per epoch (across its
  restarts: the vote is on disk before the answer leaves);
- log matching: two logs holding an entry with the same offset and epoch hold the same
  entries up to it (a chained hash per entry, one global map of (offset, epoch) -> hash);
- committed entries are never changed: whatever any node reports below its high watermark is
  the one committed history, each node's high watermark only rises while it runs, and no log
  is truncated below it;
- leader completeness: a leader's log (or snapshot) holds every entry committed in an
  earlier epoch (checked as it is elected and whenever more is committed);
- committed entries are never lost: at every crash a majority of voters still holds each
  committed entry on disk;
- a leader's DescribeQuorum agrees with its log: its own row at its log end, no replica past
  it, the high watermark within it, no replica caught up later than it last fetched;
- the core reports no anomaly and logs no error, and the driver never finds the log and the
  core apart (`RaftDriverError`).
"""

from __future__ import annotations

import heapq
import logging
import pickle
import random
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, NoReturn

from kraftpy.controller.raft import quorum_state
from kraftpy.controller.raft.config import RaftConfig
from kraftpy.controller.raft.core import NotLeaderError, RaftNode
from kraftpy.controller.raft.driver import RaftDriver, RaftDriverError, RaftPorts
from kraftpy.controller.raft.log_state import RaftLog
from kraftpy.controller.raft.roles import Leader
from kraftpy.controller.raft.voters import VoterSet
from kraftpy.protocol.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from kraftpy.protocol.record_batch import build_record_batch, iter_record_batches

CLUSTER = "SimSimSimSimSimSimSimQ"
DESCRIBE_QUORUM = DescribeQuorumRequest(topics=[TopicData(topic_name="__cluster_metadata",
                                                          partitions=[PartitionData()])])
VERSIONS = {"VoteRequest": 2, "BeginQuorumEpochRequest": 1, "EndQuorumEpochRequest": 1,
            "FetchSnapshotRequest": 1}


class SafetyViolation(AssertionError):
    pass


class _ErrorLines(logging.Handler):
    """The raft logger's error lines (the core's error notes, carried out by the driver):
    each is a violation."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.lines) < 100:
            self.lines.append(record.getMessage())


RAFT_ERRORS = _ErrorLines()
logging.getLogger("kraftpy.raft").addHandler(RAFT_ERRORS)


@dataclass
class Batch:
    base: int
    epoch: int
    values: list[bytes]
    raw: bytes
    hashes: list[int]  # chained hash after each record

    @property
    def end(self) -> int:
        return self.base + len(self.values)


@dataclass
class Disk:
    """What survives a crash, and what is written but maybe not yet on it. In `node_sim.py`
    it is the shadow of a real log: the entries it holds and how far it is durable."""

    batches: list[Batch] = field(default_factory=list)
    durable_end: int = 0
    quorum_state: bytes | None = None
    # (end offset, epoch) -> (entries [(offset, epoch, value, hash)], chain hash at the end)
    snapshots: dict[tuple[int, int], bytes] = field(default_factory=dict)
    start: int = 0  # log start offset (the newest snapshot's end once the log below goes)
    start_hash: int = 0
    index: dict[int, tuple[int, bytes, int]] = field(default_factory=dict)  # of `batches`

    @property
    def end(self) -> int:
        return self.batches[-1].end if self.batches else self.start

    def last_hash(self) -> int:
        return self.batches[-1].hashes[-1] if self.batches else self.start_hash

    def entry(self, offset: int) -> tuple[int, bytes, int] | None:
        return self.index.get(offset)

    def keep(self, batches: list[Batch]) -> None:
        """The log becomes `batches` (a cut at either end)."""
        self.batches = batches
        self.index = {b.base + i: (b.epoch, v, h) for b in batches
                      for i, (v, h) in enumerate(zip(b.values, b.hashes, strict=True))}


@dataclass
class SimNode:
    node_id: int
    disk: Disk
    driver: RaftDriver | None = None
    incarnation: int = 0
    poll_at: float | None = None
    flushes: list[tuple[float, int, int]] = field(default_factory=list)  # (done, offset, gen)
    gen: int = 0  # bumped by truncations: a flush begun before one covers nothing after it
    snapshot_parts: dict[tuple[int, int], bytearray] = field(default_factory=dict)
    last_hwm: int = 0

    @property
    def raft(self) -> RaftNode | None:
        """The node's Raft core while it runs."""
        return None if self.driver is None else self.driver.core


@dataclass
class Faults:
    drop: float = 0.05
    duplicate: float = 0.03
    delay: tuple[int, int] = (1, 30)
    long_delay: float = 0.03  # share of messages held 100-1500 ms (reordered)
    crash_every: tuple[int, int] = (800, 4000)  # ms between crashes (0: none)
    down_for: tuple[int, int] = (10, 3000)  # ms a crashed node stays down
    partition_every: tuple[int, int] = (1000, 5000)
    flush_delay: tuple[int, int] = (0, 8)
    snapshot_every: int = 2500  # ms, 0: no snapshots
    wire: bool = False  # encode and decode every message at its version


# ----- the ports over a simulated disk ---------------------------------------------------------
class SimLog:
    """The driver's `ReplicatedLog` over a node's simulated `Disk`, checking what it is asked:
    each batch extends the chained history (log matching), no truncation below the high
    watermark or inside a batch, reads only from a batch's start."""

    def __init__(self, sim: Sim, node: SimNode) -> None:
        self.sim = sim
        self.node = node

    @property
    def log_start_offset(self) -> int:
        return self.node.disk.start

    @property
    def log_end_offset(self) -> int:
        return self.node.disk.end

    def append(self, values: Any, *, leader_epoch: int, timestamp: int, keys: Any = None,
               control: bool = False) -> int:
        base = self.node.disk.end
        raw = build_record_batch(values, base_offset=base, partition_leader_epoch=leader_epoch,
                                 timestamp=timestamp, keys=keys, control=control)
        self.sim._add_batch(self.node, base, leader_epoch, list(values), raw)
        return base

    def append_batch(self, raw: bytes) -> int:
        (batch,) = iter_record_batches(raw)
        self.sim._add_batch(self.node, batch.base_offset, batch.partition_leader_epoch,
                            [r.value for r in batch.records()], raw)
        return batch.base_offset

    def truncate_to(self, offset: int) -> None:
        self.sim._truncate(self.node, offset)

    def reset_to(self, offset: int) -> None:
        """The log starts (empty) at `offset`, the end of the snapshot just installed."""
        node, disk = self.node, self.node.disk
        blob = next(b for sid, b in disk.snapshots.items() if sid[0] == offset)
        disk.keep([])
        disk.start = disk.durable_end = offset
        disk.start_hash = pickle.loads(blob)[1]
        node.gen += 1

    def read_raw(self, start_offset: int, limit_offset: int, max_bytes: int) -> bytes | None:
        node, disk = self.node, self.node.disk
        parts = [b.raw for b in disk.batches if b.base >= start_offset]
        if parts and disk.batches and not any(b.base == start_offset for b in disk.batches):
            self.sim.fail(f"node {node.node_id}: read from {start_offset} inside a batch")
        limit = self.sim.rng.choice((1, 3, 100))
        return b"".join(parts[:limit])


class SimSnapshots:
    """The driver's snapshot files over a node's simulated `Disk`: chunks served at sizes the
    schedule picks, downloads checked chunk by chunk and against the history when installed."""

    def __init__(self, sim: Sim, node: SimNode) -> None:
        self.sim = sim
        self.node = node

    def read_chunk(self, snapshot_id: tuple[int, int], position: int, max_bytes: int
                   ) -> tuple[int, bytes] | None:
        blob = self.node.disk.snapshots.get(snapshot_id)
        chunk = self.sim.rng.choice((64, 512, max_bytes))
        return None if blob is None else (len(blob),
                                          blob[position:position + min(chunk, max_bytes)])

    def write_chunk(self, snapshot_id: tuple[int, int], position: int, data: bytes) -> None:
        node = self.node
        if position == 0:  # a download starts its file anew
            node.snapshot_parts[snapshot_id] = bytearray()
        part = node.snapshot_parts.setdefault(snapshot_id, bytearray())
        if len(part) != position:
            self.sim.fail(f"node {node.node_id}: snapshot chunk at {position}, have {len(part)}")
        part += data

    def install(self, snapshot_id: tuple[int, int]) -> tuple[Any, int]:
        sim, node = self.sim, self.node
        part = node.snapshot_parts.pop(snapshot_id, None)
        blob = bytes(part) if part is not None else node.disk.snapshots.get(snapshot_id)
        if blob is None:
            sim.fail(f"node {node.node_id}: installs snapshot {snapshot_id} it does not have")
        entries, _ = pickle.loads(blob)
        for offset, epoch, _value, h in entries:
            seen = sim.chain.setdefault((offset, epoch), h)
            if seen != h:
                sim.fail(f"node {node.node_id}: downloaded snapshot differs at {offset}")
        disk = node.disk
        disk.snapshots = {k: v for k, v in disk.snapshots.items() if k[0] >= snapshot_id[0]}
        disk.snapshots[snapshot_id] = blob
        return entries, len(blob)


class SimListener:
    """What the driver tells a simulated node: checked against the one committed history."""

    def __init__(self, sim: Sim, node: SimNode) -> None:
        self.sim = sim
        self.node = node

    def committed(self, high_watermark: int) -> None:
        self.sim._committed(self.node, high_watermark)

    def leadership_changed(self, leading: bool) -> None:
        if leading:
            self.sim._became_leader(self.node)

    def snapshot_installed(self, snapshot: Any, size: int) -> None:
        self.sim.stats["snapshots_installed"] += 1


class Sim:
    STATS = ("messages", "dropped", "crashes", "elections", "snapshots_installed",
             "truncations", "events")

    def __init__(self, seed: int, *, voters: int = 3, faults: Faults | None = None,
                 config: RaftConfig | None = None,
                 make_node: Callable[..., RaftNode] = RaftNode) -> None:
        self.seed = seed
        self.rng = random.Random(seed)
        self.faults = faults or Faults()
        self.config = config or RaftConfig()
        self.make_node = make_node
        self.now = 0.0
        self._seq = 0
        self._heap: list[tuple[float, int, str, Any]] = []
        self._handlers: dict[str, Callable[[Any], None]] = {}
        self.voter_set = VoterSet.static({i: (f"node{i}", 9093) for i in range(1, voters + 1)})
        self.nodes = {i: self._new_node(i) for i in range(1, voters + 1)}
        self.partition: dict[int, int] = {}  # node -> group; absent: all connected
        self.leaders: dict[int, int] = {}  # epoch -> leader id
        self.committed: list[tuple[int, bytes, int]] = []  # offset -> (epoch, value, hash)
        # epoch in which an offset was first seen committed -> the largest such offset
        self.committed_in: dict[int, int] = {}
        self.chain: dict[tuple[int, int], int] = {}  # (offset, epoch) -> hash
        self.appended = 0
        self.votes: dict[tuple[int, int], int] = {}  # (voter, epoch) -> candidate
        self._votes_asked: dict[tuple, Any] = {}
        self.stats = dict.fromkeys(self.STATS, 0)
        self.chaos = True
        RAFT_ERRORS.lines.clear()
        for node in self.nodes.values():
            self._start(node)
        self._schedule_faults()
        self._push(50, "client", None)

    def _new_node(self, node_id: int) -> SimNode:
        return SimNode(node_id, Disk())

    def _schedule_faults(self) -> None:
        if self.faults.crash_every[1]:
            self._push(self.rng.randint(*self.faults.crash_every), "crash", None)
        if self.faults.partition_every[1]:
            self._push(self.rng.randint(*self.faults.partition_every), "partition", None)
        if self.faults.snapshot_every:
            self._push(self.faults.snapshot_every, "snapshot", None)

    # ----- running --------------------------------------------------------------------------
    def _push(self, at: float, kind: str, payload: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, kind, payload))

    def run_until(self, end_ms: float) -> None:
        heap, stats, handlers = self._heap, self.stats, self._handlers
        while heap and heap[0][0] <= end_ms:
            at, _, kind, payload = heapq.heappop(heap)
            self.now = at
            stats["events"] += 1
            handler = handlers.get(kind)
            if handler is None:
                handler = handlers[kind] = getattr(self, "_on_" + kind)
            handler(payload)
        self.now = end_ms

    def quiet(self) -> None:
        """End the faults: heal partitions, restart every node, deliver everything."""
        self.chaos = False
        self.partition = {}
        for node in self.nodes.values():
            if node.driver is None:
                self._start(node)

    def leader(self) -> int | None:
        """The node that leads the highest epoch, if it still leads it."""
        best = None
        for node in self.nodes.values():
            r = node.raft
            if r is not None and isinstance(r.state, Leader) and (
                    best is None or r.epoch > best.epoch):
                best = r
        return None if best is None else best.node_id

    def fail(self, what: str) -> NoReturn:
        raise SafetyViolation(f"seed {self.seed} at {self.now:.0f} ms: {what}")

    # ----- nodes ----------------------------------------------------------------------------
    def _ports(self, node: SimNode, log: Any, snapshots: Any) -> RaftPorts:
        node_id = node.node_id

        def send(destination: int, correlation_id: int, request: Any) -> None:
            self._send(node_id, destination,
                       ("req", node_id, node.incarnation, correlation_id, request))

        return RaftPorts(log=log, snapshots=snapshots, send=send,
                         respond=partial(self._respond, node), flush=partial(self._flush, node),
                         write_quorum_state=partial(self._write_quorum_state, node))

    def _start(self, node: SimNode) -> None:
        disk = node.disk
        disk.keep([b for b in disk.batches if b.end <= disk.durable_end])  # unsynced: gone
        disk.durable_end = disk.end
        epochs: list[tuple[int, int]] = []
        for b in disk.batches:
            if not epochs or epochs[-1][0] != b.epoch:
                epochs.append((b.epoch, b.base))
        snapshots = sorted(disk.snapshots)
        log = RaftLog(start_offset=disk.start, end_offset=disk.end, flushed_offset=disk.end,
                      epochs=epochs, snapshots=snapshots, high_watermark=disk.start)
        election = (quorum_state.decode(disk.quorum_state) if disk.quorum_state is not None
                    else None)
        node.incarnation += 1
        node.flushes = []
        node.snapshot_parts = {}
        node.last_hwm = disk.start
        node.poll_at = None
        node.driver = None
        raft = self.make_node(
            config=self.config, node_id=node.node_id,
            directory_id=uuid.UUID(int=node.node_id + 100), cluster_id=CLUSTER,
            voters=self.voter_set, log=log, election=election, now_ms=self.now,
            rng=random.Random(self.rng.random()),
            endpoints=(("CONTROLLER", f"node{node.node_id}", 9093),))
        node.driver = RaftDriver(raft, self._ports(node, SimLog(self, node),
                                                   SimSnapshots(self, node)),
                                 SimListener(self, node), lambda: self.now)
        self._drive(node, node.driver.start)
        self._poll(node)

    def _crash(self, node: SimNode) -> None:
        node.driver = None
        node.incarnation += 1
        node.poll_at = None
        self.stats["crashes"] += 1
        self._check_durable_majority()

    def _drive(self, node: SimNode, event: Callable[..., Any], *args: Any) -> None:
        """One event of a node's driver, then the checks of what it did."""
        driver = node.driver
        try:
            event(*args)
        except RaftDriverError as exc:
            self.fail(f"node {node.node_id}: {exc}")
        except Exception as exc:  # noqa: BLE001 - the node's own failure, or a bug
            if not self._node_failed(node, exc):
                raise
        if RAFT_ERRORS.lines:
            self.fail(f"node {node.node_id}: {RAFT_ERRORS.lines[0]}")
        if driver is None or node.driver is not driver:
            return
        raft = driver.core
        if raft.anomalies:
            self.fail(f"node {node.node_id}: {raft.anomalies[0]}")
        if isinstance(raft.state, Leader):
            self._check_describe_quorum(node)

    def _node_failed(self, node: SimNode, exc: Exception) -> bool:
        """A driver event raised `exc`: whether it is a failure the node stops on (a disk
        fault) rather than a bug. None are expected of the simulated disk."""
        return False

    def _poll(self, node: SimNode) -> None:
        driver = node.driver
        if driver is None:
            return
        self._drive(node, driver.poll)
        if node.driver is not driver:
            return
        at = max(self.now, driver.core.next_deadline())
        if at != float("inf") and (node.poll_at is None or at < node.poll_at
                                   or node.poll_at < self.now):
            node.poll_at = at
            self._push(at, "poll", (node.node_id, node.incarnation, at))

    def _on_poll(self, payload: tuple[int, int, float]) -> None:
        node_id, incarnation, at = payload
        node = self.nodes[node_id]
        if node.incarnation != incarnation or node.poll_at != at:
            return
        node.poll_at = None
        self._poll(node)

    # ----- the ports' side ------------------------------------------------------------------
    def _flush(self, node: SimNode, offset: int) -> None:
        delay = self.rng.randint(*self.faults.flush_delay)
        done = max([self.now + delay] + [f[0] for f in node.flushes])
        node.flushes.append((done, offset, node.gen))
        self._push(done, "flushed", (node.node_id, node.incarnation))

    def _write_quorum_state(self, node: SimNode, data: bytes) -> None:
        quorum_state.decode(data)  # what we wrote reads back
        node.disk.quorum_state = data

    def _check_describe_quorum(self, node: SimNode) -> None:
        """The leader's DescribeQuorum agrees with its log: its own row at its log end, no
        voter past it, the high watermark within it, caught up no later than fetched."""
        raft = node.raft
        assert raft is not None
        part = raft.describe_quorum(DESCRIBE_QUORUM, 2, self.now).topics[0].partitions[0]
        end = raft.log.end_offset
        rows = {r.replica_id: r for r in part.current_voters}
        if part.error_code != 0 or part.leader_id != node.node_id \
                or rows[node.node_id].log_end_offset != end or part.high_watermark > end:
            self.fail(f"node {node.node_id}: DescribeQuorum {part} disagrees with its log "
                      f"end {end}")
        for r in part.current_voters + part.observers:
            if r.log_end_offset > end or r.last_caught_up_timestamp > r.last_fetch_timestamp:
                self.fail(f"node {node.node_id}: DescribeQuorum shows {r} (log end {end})")

    def _became_leader(self, node: SimNode) -> None:
        raft = node.raft
        assert raft is not None
        self.stats["elections"] += 1
        other = self.leaders.setdefault(raft.epoch, node.node_id)
        if other != node.node_id:
            self.fail(f"two leaders in epoch {raft.epoch}: {other} and {node.node_id}")
        self._check_complete(node, "new leader")

    def _add_batch(self, node: SimNode, base: int, epoch: int, values: list[bytes],
                   raw: bytes) -> None:
        disk = node.disk
        if base != disk.end:
            self.fail(f"node {node.node_id}: batch at {base}, log end {disk.end}")
        h = disk.last_hash()
        hashes = []
        for i, value in enumerate(values):
            h = zlib.crc32(value, zlib.crc32(epoch.to_bytes(4, "big"), h))
            hashes.append(h)
            seen = self.chain.setdefault((base + i, epoch), h)
            if seen != h:
                self.fail(f"log matching: node {node.node_id} holds a different history up "
                          f"to offset {base + i} of epoch {epoch}")
        disk.batches.append(Batch(base, epoch, values, raw, hashes))
        for i, (value, h) in enumerate(zip(values, hashes, strict=True)):
            disk.index[base + i] = (epoch, value, h)

    def _truncate(self, node: SimNode, offset: int) -> None:
        disk = node.disk
        self.stats["truncations"] += 1
        if offset < node.last_hwm:
            self.fail(f"node {node.node_id} truncates to {offset} below its high watermark "
                      f"{node.last_hwm}")
        kept = [b for b in disk.batches if b.end <= offset]
        if any(b.base < offset < b.end for b in disk.batches):
            self.fail(f"node {node.node_id}: truncation to {offset} inside a batch")
        disk.keep(kept)
        disk.durable_end = min(disk.durable_end, disk.end)
        node.gen += 1

    def _on_flushed(self, payload: tuple[int, int]) -> None:
        node_id, incarnation = payload
        node = self.nodes[node_id]
        if node.incarnation != incarnation or not node.flushes:
            return
        done, offset, gen = node.flushes.pop(0)
        if gen == node.gen:
            node.disk.durable_end = max(node.disk.durable_end, min(offset, node.disk.end))
        driver = node.driver
        assert driver is not None
        self._drive(node, driver.flushed, offset)
        self._poll(node)

    # ----- what is committed ------------------------------------------------------------------
    def _node_entry(self, node: SimNode, offset: int) -> tuple[int, bytes, int] | None:
        disk = node.disk
        if offset < disk.start:
            for sid, blob in disk.snapshots.items():
                if offset < sid[0]:
                    entries, _ = pickle.loads(blob)
                    for o, e, v, h in entries:
                        if o == offset:
                            return e, v, h
            return None
        return disk.entry(offset)

    def _committed(self, node: SimNode, hwm: int) -> None:
        if hwm < node.last_hwm:
            self.fail(f"node {node.node_id}: high watermark {node.last_hwm} -> {hwm}")
        for offset in range(node.last_hwm, hwm):
            entry = self._node_entry(node, offset)
            if entry is None:
                self.fail(f"node {node.node_id}: committed offset {offset} not in its log")
            if offset < len(self.committed):
                if self.committed[offset] != entry:
                    self.fail(f"node {node.node_id}: committed entry {offset} changed")
            elif offset == len(self.committed):
                self.committed.append(entry)
                epoch = node.raft.epoch if node.raft is not None else 0
                self.committed_in[epoch] = max(self.committed_in.get(epoch, -1), offset)
            else:
                self.fail(f"node {node.node_id}: committed {offset} past a gap")
        node.last_hwm = hwm
        for other in self.nodes.values():
            if other.driver is not None and isinstance(other.driver.core.state, Leader):
                self._check_complete(other, "leader")

    def _check_complete(self, node: SimNode, what: str) -> None:
        disk = node.disk
        epoch = node.raft.epoch if node.raft is not None else 0
        # what was committed in an earlier epoch than this leader's
        last = max((o for e, o in self.committed_in.items() if e < epoch), default=-1)
        if last < 0:
            return
        if last >= disk.start:
            entry = disk.entry(last)
        else:
            entry = self._node_entry(node, last)
        if entry != self.committed[last]:
            self.fail(f"leader completeness: {what} {node.node_id} (epoch {epoch}) lacks "
                      f"offset {last}, committed in an earlier epoch")

    def _check_durable_majority(self) -> None:
        if not self.committed:
            return
        last = len(self.committed) - 1
        holders = 0
        for node in self.nodes.values():
            disk = node.disk
            if last < disk.start:
                entry = self._node_entry(node, last)
            elif last < disk.durable_end:
                entry = disk.entry(last)
            else:
                entry = None
            holders += entry == self.committed[last]
        if holders < self.voter_set.majority:
            self.fail(f"committed offset {last} is on the disk of {holders} voters only")

    # ----- snapshots ----------------------------------------------------------------------------
    def _on_snapshot(self, _: Any) -> None:
        if self.chaos:
            self._push(self.now + self.faults.snapshot_every, "snapshot", None)
        for node in self.nodes.values():
            driver = node.driver
            disk = node.disk
            hwm = driver.core.high_watermark if driver is not None else 0
            if driver is None or hwm <= disk.start or self.rng.random() < 0.3:
                continue
            if not any(b.end == hwm for b in disk.batches) or hwm > disk.durable_end:
                continue
            entries = []
            for offset in range(hwm):
                e = self._node_entry(node, offset)
                assert e is not None
                entries.append((offset, *e))
            epoch = entries[-1][1]
            sid = (hwm, epoch)
            disk.snapshots[sid] = pickle.dumps((entries, entries[-1][3]))
            disk.keep([b for b in disk.batches if b.base >= hwm])
            disk.snapshots = {k: v for k, v in disk.snapshots.items() if k[0] >= hwm}
            disk.start, disk.start_hash = hwm, entries[-1][3]
            self._drive(node, driver.snapshot_taken, sid, sid)

    # ----- network --------------------------------------------------------------------------
    def _connected(self, a_id: int, b_id: int) -> bool:
        return self.partition.get(a_id, 0) == self.partition.get(b_id, 0)

    def _send(self, src: int, dst: int, message: tuple) -> None:
        self.stats["messages"] += 1
        f = self.faults
        if self.faults.wire:
            message = self._wire(message)
        copies = 1
        if self.chaos:
            if self.rng.random() < f.drop:
                self.stats["dropped"] += 1
                copies = 0
            elif self.rng.random() < f.duplicate:
                copies = 2
        for _ in range(copies):
            if self.chaos and self.rng.random() < f.long_delay:
                delay = self.rng.randint(100, 1500)
            else:
                delay = self.rng.randint(*f.delay)
            self._push(self.now + delay, "deliver", (src, dst, message))

    def _wire(self, message: tuple) -> tuple:
        """Through the bytes: the message encoded at its version and decoded again."""
        body = message[-1]
        name = type(body).__name__
        version = VERSIONS.get(name.replace("Response", "Request"), 17)
        return message[:-1] + (type(body).decode(body.encode(version), version),)

    def _on_deliver(self, payload: tuple[int, int, tuple]) -> None:
        src, dst, message = payload
        node = self.nodes[dst]
        if not self._connected(src, dst):
            return  # silence: the sender waits out its request timeout
        driver = node.driver
        if driver is None:
            if message[0] == "req":  # refused: the sender hears of it one trip later
                self._push(self.now + self.rng.randint(*self.faults.delay), "refused",
                           (src, message[2], message[3], dst))
            return
        if message[0] == "req":
            _, source, incarnation, correlation, request = message
            version = VERSIONS.get(type(request).__name__, 17)
            if type(request).__name__ == "VoteRequest":
                self._votes_asked[(dst, source, incarnation, correlation)] = request
            self._drive(node, driver.handle_request, (source, incarnation, correlation),
                        request, version)
        else:
            _, incarnation, correlation, response = message
            if incarnation != node.incarnation:
                return  # an answer to a process that is gone
            self._drive(node, driver.handle_response, src, correlation, response)
        self._poll(node)

    def _on_refused(self, payload: tuple[int, int, int, int]) -> None:
        node_id, incarnation, correlation, dst = payload
        node = self.nodes[node_id]
        driver = node.driver
        if driver is None or node.incarnation != incarnation:
            return
        self._drive(node, driver.request_failed, dst, correlation)
        self._poll(node)

    def _respond(self, node: SimNode, token: Any, response: Any) -> None:
        source, incarnation, correlation = token
        asked = self._votes_asked.pop((node.node_id, *token), None)
        if asked is not None and response.topics:
            part, answer = asked.topics[0].partitions[0], response.topics[0].partitions[0]
            if answer.vote_granted and not part.pre_vote:
                voted = self.votes.setdefault((node.node_id, part.replica_epoch),
                                              part.replica_id)
                if voted != part.replica_id:
                    self.fail(f"node {node.node_id} voted for {voted} and {part.replica_id} "
                              f"in epoch {part.replica_epoch}")
        self._send(node.node_id, source, ("resp", incarnation, correlation, response))

    # ----- faults and clients -----------------------------------------------------------------
    def _on_crash(self, _: Any) -> None:
        if not self.chaos:
            return
        self._push(self.now + self.rng.randint(*self.faults.crash_every), "crash", None)
        node = self.nodes[self.rng.randint(1, len(self.nodes))]
        if node.driver is not None:
            self._crash(node)
            self._push(self.now + self.rng.randint(*self.faults.down_for), "restart",
                       node.node_id)

    def _on_restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.driver is None:
            self._start(node)

    def _on_partition(self, _: Any) -> None:
        if not self.chaos:
            return
        self._push(self.now + self.rng.randint(*self.faults.partition_every), "partition",
                   None)
        if self.partition or self.rng.random() < 0.3:
            self.partition = {}
        else:
            ids = list(self.nodes)
            self.rng.shuffle(ids)
            cut = self.rng.randint(1, len(ids) - 1)
            self.partition = {i: (1 if n < cut else 2) for n, i in enumerate(ids)}

    def _on_client(self, _: Any) -> None:
        self._push(self.now + self.rng.randint(20, 150), "client", None)
        for node in self.nodes.values():
            driver = node.driver
            if driver is None or not isinstance(driver.core.state, Leader):
                continue
            count = self.rng.randint(1, 3)
            values = [b"v%d" % (self.appended + i) for i in range(count)]
            try:
                driver.append(values)
            except NotLeaderError:
                continue
            self.appended += count
            self._poll(node)
