"""Whole nodes in the deterministic simulation: what the server runs, with the disk failing.

`raft_sim.py` simulates the Raft core behind `RaftDriver` over a simulated disk. Here every
node is the server's own assembly (`quorum.open_quorum`: the data dir formatted, opened and
recovered by `recovery`, the raft runner's core and driver, the `ControllerHost` with its
`QuorumController`, committed image and snapshot generator) on real files under a tmpfs
(`/dev/shm`), so the log's own writes, fsyncs, torn-tail recovery, snapshot files and
downloads are the real ones. Only the trio tasks are replaced by the schedule: the driver's
network ports, the fsync rounds (`RaftRunner._begin_round` / `_end_round`, as its `_round`
calls them), the controller's timers (`host.tick` every 100 ms) and the snapshot jobs
(`job.run`, then `host.job_done`, as `Quorum._run_job`). Clients (brokers registering,
heartbeating, taking producer-id blocks, creating and deleting topics, idempotent producers
asking InitProducerId) talk to whoever is the active controller.

The disk (`sim_disk.SimFS`) is the real one seen through the log modules' `os`: each fsync
records how much of a file is durable, and the faults are injected there:
- power loss, between events or at the k-th disk operation of a node (inside a flush round,
  a snapshot write, a download's install, a truncation, a restart's recovery): every file
  keeps what was fsynced plus a random part of what was written after it, the last of that
  part sometimes zeroed (a torn write, possibly mid-batch); a `.part` stays as it was left;
- a failed fsync (EIO): the node stops as the server does (`RaftRunner.fail`), and whatever
  that fsync should have covered is torn as by a power loss; the node comes back from disk;
- a full disk (ENOSPC) on a write, after a short write: the node stops, comes back later;
- a slow disk: flush rounds and snapshot writes take 50-400 ms;
- clean stops (SIGTERM: the leader resigns, the storage closes with its marker).

After every step, on top of the Raft checks of `raft_sim.py` (each node's log is the shadow
they check): every node's controller (while everything it applied is committed) and its
committed image equal a fresh replay of the committed history up to where they stand
(compared by a digest of `snapshot_records()` encoded); every snapshot written or downloaded
replays to that same state; a node restarted from its disk holds everything it had
fsynced, its snapshot files whole and no `.part` left; an answer goes out only once its
records are committed, in the epoch that wrote them; and across the run no producer-id block
or id is acknowledged twice, nor before the record that grants it is committed. A failure names the seed; the same seed replays the same
schedule (`uuid.uuid4`, the raft core's and the topic placement's randomness and the file
names' come from it; time is the schedule's).
"""

from __future__ import annotations

import bisect
import random
import shutil
import time
import traceback
import uuid
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from kraftpy.controller import quorum as node_quorum
from kraftpy.controller.config import build_config
from kraftpy.controller.feature_control import SUPPORTED_FEATURES
from kraftpy.controller.host import Deferred, HostState, NodeStopped
from kraftpy.controller.log.snapshots import (
    PART_SUFFIX,
    SnapshotError,
    SnapshotId,
    list_snapshots,
    read_snapshot,
)
from kraftpy.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraftpy.protocol.messages.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
    Listener,
)
from kraftpy.protocol.messages.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from kraftpy.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraftpy.protocol.messages.delete_topics_request import DeleteTopicsRequest
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.metadata_frame import decode_metadata_record, encode_metadata_record
from kraftpy.protocol.record_batch import iter_record_batches

from support.raft_sim import RAFT_ERRORS, Disk, Faults, SafetyViolation, Sim, SimNode
from support.sim_disk import SIMULATED, DiskFaults, SimCrash, SimFS

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
TICK_MS = 100  # quorum.TICK_INTERVAL_S


# ----- the reference: a fresh replay of the committed history ------------------------------------
def state_digest(controller: Any) -> tuple[int, int]:
    """(records, crc) of a controller's state as `snapshot_records()` encodes it, in a fixed
    order (insertion orders may differ between a replay from a snapshot and from the log)."""
    values = sorted(encode_metadata_record(r, v) for r, v in controller.snapshot_records())
    crc = 0
    for value in values:
        crc = zlib.crc32(value, zlib.crc32(len(value).to_bytes(4, "big"), crc))
    return len(values), crc


class Reference:
    """A controller fed the committed history, record by record, with the state's digest
    at every committed batch end (where nodes' states and snapshots stand)."""

    def __init__(self, sim: NodeSim, make_controller: Callable[[], Any]) -> None:
        self.sim = sim
        self.make_controller = make_controller
        self.controller = make_controller()
        self.offset = 0
        self.digests: dict[int, tuple[int, int]] = {0: state_digest(self.controller)}
        self._changed = False

    def advance(self) -> None:
        sim, controller = self.sim, self.controller
        committed = sim.committed
        while self.offset < len(committed):
            offset = self.offset
            epoch, value, _ = committed[offset]
            if not sim.control.get((offset, epoch), False):
                record, version = decode_metadata_record(value)
                controller.replay(record, version, offset)
                self._changed = True
            self.offset = offset + 1
            if (self.offset, epoch) in sim.batch_ends:
                if self._changed or self.offset not in self.digests:
                    self.digests[self.offset] = state_digest(controller)
                self._changed = False

    def digest_at(self, offset: int) -> tuple[int, int]:
        if offset > len(self.sim.committed):
            self.sim.fail(f"a state at offset {offset}, past the committed history "
                          f"({len(self.sim.committed)})")
        self.advance()
        found = self.digests.get(offset)
        if found is None:  # not a committed batch end (never expected): replay afresh
            self.sim.stats["fresh_replays"] += 1
            found = self.digests[offset] = state_digest(self.replay_to(offset))
        return found

    def replay_to(self, offset: int) -> Any:
        """A fresh controller with the committed history below `offset` replayed."""
        controller = self.make_controller()
        for o, (epoch, value, _) in enumerate(self.sim.committed[:offset]):
            if not self.sim.control.get((o, epoch), False):
                record, version = decode_metadata_record(value)
                controller.replay(record, version, o)
        return controller

    @property
    def next_producer_id(self) -> int:
        self.advance()
        return self.controller.producer_ids.next_producer_id


def describe_difference(have: Any, want: Any) -> str:
    """The records one state has and the other lacks (for a failure's message)."""
    mine = {encode_metadata_record(r, v): r for r, v in have.snapshot_records()}
    theirs = {encode_metadata_record(r, v): r for r, v in want.snapshot_records()}
    extra = [repr(mine[k]) for k in mine if k not in theirs][:3]
    missing = [repr(theirs[k]) for k in theirs if k not in mine][:3]
    return f"it has {extra or 'nothing more'}; it lacks {missing or 'nothing'}"


def succeeded(response: Any) -> bool:
    """Whether an answer carries no error: its own error code, or its topics' and results'."""
    if getattr(response, "error_code", 0):
        return False
    for name in ("topics", "responses", "results"):
        for item in getattr(response, name, None) or ():
            if getattr(item, "error_code", 0):
                return False
    return True


# ----- the ports and the listener around the real rooms ------------------------------------------
class NodeLog:
    """The driver's log port: the node's real `PartitionLog`, its shadow kept for the Raft
    checks (every batch must extend the one history; no truncation below the high watermark
    or inside a batch; reads from a batch's start)."""

    def __init__(self, sim: NodeSim, node: WholeNode, log: Any) -> None:
        self.sim, self.node, self.log = sim, node, log

    @property
    def log_start_offset(self) -> int:
        return self.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def append(self, values: Any, *, leader_epoch: int, timestamp: int, keys: Any = None,
               control: bool = False) -> int:
        base = self.log.append(values, leader_epoch=leader_epoch, timestamp=timestamp,
                               keys=keys, control=control)
        self.sim._add_batch(self.node, base, leader_epoch, list(values), b"", control=control)
        return base

    def append_batch(self, raw: bytes) -> int:
        base = self.log.append_batch(raw)
        (batch,) = iter_record_batches(raw)
        self.sim._add_batch(self.node, base, batch.partition_leader_epoch,
                            [r.value for r in batch.records()], b"", control=batch.is_control)
        return base

    def truncate_to(self, offset: int) -> None:
        self.sim._truncate(self.node, offset)  # checked before the real log is touched
        self.log.truncate_to(offset)

    def reset_to(self, offset: int) -> None:
        self.sim._reset_shadow(self.node, offset)
        self.log.reset_to(offset)

    def read_raw(self, start_offset: int, limit_offset: int, max_bytes: int) -> bytes | None:
        disk = self.node.disk
        if start_offset < disk.end and disk.entry(start_offset) is not None and not any(
                b.base == start_offset for b in disk.batches):
            self.sim.fail(f"node {self.node.node_id}: read from {start_offset} inside a batch")
        limit = self.sim.rng.choice((1, 300, 4096, max_bytes))
        return self.log.read_raw(start_offset, limit_offset, min(limit, max_bytes))


class NodeSnapshots:
    """The driver's snapshot port: the node's real `SnapshotFiles`; chunks served at sizes the
    schedule picks, and a download checked against the committed history once installed."""

    def __init__(self, sim: NodeSim, node: WholeNode, files_: Any) -> None:
        self.sim, self.node, self.files = sim, node, files_

    def read_chunk(self, snapshot_id: tuple[int, int], position: int, max_bytes: int
                   ) -> tuple[int, bytes] | None:
        chunk = self.sim.rng.choice((64, 512, 4096, max_bytes))
        return self.files.read_chunk(snapshot_id, position, min(chunk, max_bytes))

    def write_chunk(self, snapshot_id: tuple[int, int], position: int, data: bytes) -> None:
        self.files.write_chunk(snapshot_id, position, data)

    def install(self, snapshot_id: tuple[int, int]) -> tuple[Any, int]:
        # From here a power loss may leave the snapshot installed and the log to be dropped
        # by the next start: the shadow goes first.
        self.sim._reset_shadow(self.node, snapshot_id[0])
        snapshot, size = self.files.install(snapshot_id)
        self.sim._check_snapshot(self.node, snapshot, "downloaded")
        return snapshot, size


class NodeListener:
    """The driver's listener: the node's `ControllerHost`, with the Raft checks before it
    hears of a commit."""

    def __init__(self, sim: NodeSim, node: WholeNode, host: Any) -> None:
        self.sim, self.node, self.host = sim, node, host

    def committed(self, high_watermark: int) -> None:
        self.sim._committed(self.node, high_watermark)
        self.host.committed(high_watermark)

    def leadership_changed(self, leading: bool) -> None:
        self.host.leadership_changed(leading)
        if leading:
            self.sim._became_leader(self.node)

    def snapshot_installed(self, snapshot: Any, size: int) -> None:
        self.host.snapshot_installed(snapshot, size)
        self.sim.stats["snapshots_installed"] += 1


# ----- nodes, brokers, answers -------------------------------------------------------------------
@dataclass
class WholeNode(SimNode):
    config: Any = None
    quorum: Any = None
    round: tuple[list[int], Any] | None = None  # the flush round in flight
    txn_round: Any = None  # a lone voter's transaction-log round in flight
    migrating: tuple[int, int, int] | None = None  # (activation, end, txn end) of its step
    marker: tuple = ()  # where its states stood when last compared
    fsynced_end: int = 0  # its log's flushed offset when it went down
    answers: list[Pending] = field(default_factory=list)


@dataclass(eq=False)
class Pending:
    """A request answered later (`Deferred`): where its records went and what to do."""

    node: WholeNode
    base: int
    epoch: int
    answer: Any
    on_answer: Callable[[Any], None]


@dataclass
class SimBroker:
    broker_id: int
    incarnation: uuid.UUID
    epoch: int = -1  # -1: not registered
    fenced: bool = True
    busy: bool = False  # its registration or heartbeat is in flight
    beat_at: float = 0.0


@dataclass
class NodeFaults(Faults):
    crash_every: tuple[int, int] = (800, 3000)
    down_for: tuple[int, int] = (10, 1500)
    snapshot_every: int = 0  # the hosts take their own (the policy below)
    flush_delay: tuple[int, int] = (0, 4)
    slow_delay: tuple[int, int] = (50, 400)  # a slow disk's flush round or snapshot write
    crash_in_op: float = 0.4  # share of crashes at a node's N-th disk operation from now
    clean_stop: float = 0.1  # share of crashes that are clean stops (SIGTERM) instead
    crash_in_job: float = 0.1  # share of snapshot writes the power goes in the middle of
    crash_in_round: float = 0.005  # share of flush rounds it goes at the fsync of
    disk_every: tuple[int, int] = (800, 2500)  # ms between disk faults (0: none)
    snapshot_bytes: int = 2000  # metadata.log.max.record.bytes.between.snapshots
    segment_bytes: int = 4096  # metadata.log.segment.bytes: segments roll


class NodeSim(Sim):
    """`Sim` over whole nodes on real files; use as a context manager (it patches the log
    modules' `os` and the production randomness for its life, and removes its files)."""

    STATS = Sim.STATS + ("failures", "mid_op_crashes", "clean_stops", "rounds",
                         "snapshots_written", "acked", "state_checks", "fresh_replays")

    def __init__(self, seed: int, root: Path, *, voters: int = 3,
                 faults: NodeFaults | None = None, linger_ms: int = 25,
                 properties: dict[str, str] | None = None) -> None:
        """`properties`: more of every node's configuration (a retention policy, ...)."""
        self.root = Path(root) / f"seed-{seed}"
        shutil.rmtree(self.root, ignore_errors=True)
        self.root.mkdir(parents=True)
        self.fs = SimFS(self.root, random.Random(seed * 2654435761 % (1 << 32)))
        self.prod_rng = random.Random(seed + 1_000_003)
        self.fs.install(self.prod_rng)
        self.linger_ms = linger_ms
        self.properties = dict(properties or {})
        self.addresses = {i: (f"node{i}", 9093) for i in range(1, voters + 1)}
        self.control: dict[tuple[int, int], bool] = {}  # (offset, epoch) -> in a control batch
        self.batch_ends: set[tuple[int, int]] = set()  # (end offset, epoch of its last record)
        self.reference: Reference | None = None
        self.brokers = {100 + i: SimBroker(100 + i, uuid.UUID(int=i + 1, version=4))
                        for i in range(1, 5)}
        self.granted: list[tuple[int, int, str]] = []  # acknowledged [first, end) and what
        self.transactional: dict[str, tuple[int, int]] = {}  # id -> last (pid, epoch) acked
        self._released: list[Pending] = []
        self.power_lost_in: dict[str, int] = {}  # where the mid-operation power losses hit
        self.topics = 0
        faults = faults or NodeFaults()
        if voters == 1:  # a lone voter: no one to be cut off from
            faults = replace(faults, partition_every=(0, 0))
        try:
            super().__init__(seed, voters=voters, faults=faults)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> NodeSim:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for node in getattr(self, "nodes", {}).values():
            if isinstance(node, WholeNode) and node.quorum is not None:
                self._let_go(node)
        self.fs.uninstall()
        shutil.rmtree(self.root, ignore_errors=True)

    # --- nodes ----------------------------------------------------------------------------------
    def _new_node(self, node_id: int) -> SimNode:
        data = self.root / f"node{node_id}"
        voters = ",".join(f"{i}@{h}:{p}" for i, (h, p) in self.addresses.items())
        config = build_config({
            "process.roles": "broker,controller", "node.id": str(node_id),
            "listeners": "PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093",
            "advertised.listeners": f"PLAINTEXT://node{node_id}:9092,"
                                    f"CONTROLLER://node{node_id}:9093",
            "controller.listener.names": "CONTROLLER", "metadata.log.dir": str(data),
            "cluster.id": CLUSTER, "controller.quorum.voters": voters,
            "controller.quorum.append.linger.ms": str(self.linger_ms),
            # half Kafka's timeouts: more elections and catch-ups in a schedule's seconds
            "controller.quorum.election.timeout.ms": "500",
            "controller.quorum.fetch.timeout.ms": "1000",
            "controller.quorum.request.timeout.ms": "1000",
            "metadata.log.segment.bytes": str(self.faults.segment_bytes),
            "metadata.log.max.record.bytes.between.snapshots":
                str(self.faults.snapshot_bytes),
            **self.properties,
        })
        self.fs.faults[f"node{node_id}"] = DiskFaults()
        return WholeNode(node_id, Disk(), config=config)

    def _schedule_faults(self) -> None:
        super()._schedule_faults()
        if self.faults.disk_every[1]:
            self._push(self.rng.randint(*self.faults.disk_every), "disk_fault", None)

    def _clock_ms(self) -> int:
        return int(self.now)

    def _start(self, node: SimNode) -> None:
        assert isinstance(node, WholeNode)
        node.incarnation += 1
        node.poll_at = None
        node.round = None
        node.txn_round = None
        node.migrating = None
        node.driver = None
        node.marker = ()
        faults = self.fs.faults[f"node{node.node_id}"]
        faults.full = faults.short_written = False
        faults.fsync_fails = 0
        try:
            quorum = node_quorum.open_quorum(node.config, self.addresses,
                                             clock_ms=self._clock_ms)
        except SimCrash:
            self._lost_power(node, "start")
            return
        except Exception as exc:  # noqa: BLE001 - refusing to start from its disk is a failure
            self.fail(f"node {node.node_id} does not start from its disk: "
                      f"{type(exc).__name__}: {exc}")
        node.quorum = quorum
        self._check_snapshot_files(node)
        runner, host, storage = quorum.runner, quorum.host, quorum.storage
        driver = runner.driver
        node_id, incarnation = node.node_id, node.incarnation

        def send(destination: int, correlation_id: int, request: Any) -> None:
            self._send(node_id, destination, ("req", node_id, incarnation, correlation_id,
                                              request))

        driver.ports.log = NodeLog(self, node, storage.metadata)
        driver.ports.snapshots = NodeSnapshots(self, node, storage.snapshots)
        driver.ports.send = send
        driver.ports.respond = partial(self._respond, node)
        driver.listener = NodeListener(self, node, host)
        host.on_activated = lambda: self._push(self.now, "tick", (node_id, incarnation, False))
        host.start_job = partial(self._start_job, node)
        node.driver = driver
        if self.reference is None:
            self.reference = Reference(self, host.make_controller)
        self._load_shadow(node)
        self._drive(node, driver.start)
        self._push(self.now + TICK_MS, "tick", (node_id, incarnation, True))
        self._poll(node)

    def _check_snapshot_files(self, node: WholeNode) -> None:
        """After recovery: every snapshot file reads back whole, and no partial one is left
        (a power loss while writing or downloading one leaves a `.part`, never a broken
        snapshot)."""
        partition = Path(node.config.metadata_log_dir) / "__cluster_metadata-0"
        for sid, path in list_snapshots(partition):
            try:
                read_snapshot(path, sid)
            except SnapshotError as exc:
                self.fail(f"node {node.node_id} restarted with a broken snapshot: {exc}")
        leftovers = sorted(p.name for p in partition.iterdir()
                           if p.name.endswith(PART_SUFFIX))
        if leftovers:
            self.fail(f"node {node.node_id} restarted with partial snapshots left: {leftovers}")

    def _load_shadow(self, node: WholeNode) -> None:
        """The node's shadow from its recovered log; it must hold what it had fsynced."""
        log_ = node.quorum.storage.metadata
        start = log_.log_start_offset
        if start > len(self.committed):
            self.fail(f"node {node.node_id} starts its log at {start}, past the committed "
                      f"history ({len(self.committed)})")
        node.disk = Disk(start=start, start_hash=self.committed[start - 1][2] if start else 0)
        for batch in log_.read(start):
            self._add_batch(node, batch.base_offset, batch.partition_leader_epoch,
                            [r.value for r in batch.records()], b"", control=batch.is_control)
        if node.disk.end < node.fsynced_end:
            self.fail(f"node {node.node_id} came back with its log ending at {node.disk.end}, "
                      f"below the {node.fsynced_end} it had fsynced")
        node.disk.durable_end = node.disk.end
        # A lone voter's disk is the majority: all it recovered is committed at once.
        node.last_hwm = start
        self._committed(node, node.driver.high_watermark)

    def _reset_shadow(self, node: SimNode, offset: int) -> None:
        if offset > len(self.committed):
            self.fail(f"node {node.node_id} installs a snapshot ending at {offset}, past the "
                      f"committed history ({len(self.committed)})")
        disk = node.disk
        disk.keep([])
        disk.start = disk.durable_end = offset
        disk.start_hash = self.committed[offset - 1][2] if offset else 0
        node.gen += 1

    def _add_batch(self, node: SimNode, base: int, epoch: int, values: list[bytes],
                   raw: bytes, *, control: bool = False) -> None:
        super()._add_batch(node, base, epoch, values, raw)
        for i in range(len(values)):
            self.control[(base + i, epoch)] = control
        self.batch_ends.add((base + len(values), epoch))

    def _node_entry(self, node: SimNode, offset: int) -> tuple[int, bytes, int] | None:
        if offset < node.disk.start:  # in its snapshot, checked against the history
            return self.committed[offset] if offset < len(self.committed) else None
        return node.disk.entry(offset)

    # --- driving a node -------------------------------------------------------------------------
    def _drive(self, node: SimNode, event: Callable[..., Any], *args: Any) -> Any:
        """One event through the node's runner (`RaftRunner.step`, which stops the node on
        a failure as the server does); its result."""
        assert isinstance(node, WholeNode)
        quorum = node.quorum
        if quorum is None:
            return None
        try:
            result = quorum.runner.step(partial(event, *args))
        except SimCrash:
            self._lost_power(node, "event")
            return None
        self._after(node)
        return result

    def _after(self, node: WholeNode) -> None:
        """What follows every event of a node: its failure, the Raft checks, its flush round,
        its states against the reference, the answers it released."""
        quorum = node.quorum
        if quorum is None:
            return
        runner = quorum.runner
        if runner.failure is not None:
            self._stopped(node)
            return
        if RAFT_ERRORS.lines:
            self.fail(f"node {node.node_id}: {RAFT_ERRORS.lines[0]}")
        raft = runner.driver.core
        if raft.anomalies:
            self.fail(f"node {node.node_id}: {raft.anomalies[0]}")
        if raft.role.value == "Leader":
            self._check_describe_quorum(node)
        if node.round is None and runner.flushes_asked:
            self._begin_round(node)
            if node.quorum is None:
                return
        txn = quorum.txn
        if txn is not None and node.txn_round is None and txn.durable < txn.end:
            self._begin_txn_round(node)
            if node.quorum is None:
                return
        self._check_states(node)
        self._settle_answers()

    def _stopped(self, node: WholeNode) -> None:
        """The node failed (`RaftRunner.fail`): a simulated disk fault stops it as the server
        stops (the process exits; what its fsync did not cover is at the disk's mercy), and it
        comes back later; anything else is a bug."""
        failure = node.quorum.runner.failure
        if isinstance(failure, SafetyViolation):
            raise failure
        if SIMULATED not in str(failure):
            trace = "".join(traceback.format_exception(failure)[-6:])
            self.fail(f"node {node.node_id} stopped: {type(failure).__name__}: {failure}\n"
                      f"{trace}")
        RAFT_ERRORS.lines.clear()  # the runner's "the raft quorum stopped" line
        self.stats["failures"] += 1
        self._crash(node)
        self._push(self.now + self.rng.randint(*self.faults.down_for), "restart", node.node_id)

    def _lost_power(self, node: WholeNode, where: str) -> None:
        """A power loss in the middle of a disk operation (`SimCrash`) of `where` (its start,
        a driver event, a flush round, a snapshot write, a clean stop): the directory as it
        was at that instant, torn."""
        self.stats["mid_op_crashes"] += 1
        self.power_lost_in[where] = self.power_lost_in.get(where, 0) + 1
        self._crash(node, self.fs.captured.pop(f"node{node.node_id}", None))
        self._push(self.now + self.rng.randint(*self.faults.down_for), "restart", node.node_id)

    def _crash(self, node: SimNode, image: dict[str, bytes | None] | None = None) -> None:
        assert isinstance(node, WholeNode)
        name = f"node{node.node_id}"
        if node.round is not None:
            node.round[1].release()
            node.round = None
        if node.txn_round is not None:
            node.txn_round.release()
            node.txn_round = None
        if node.quorum is not None:
            node.fsynced_end = min(node.quorum.storage.metadata.flushed_offset, node.disk.end)
            if image is None:
                image = self.fs.capture(name, tear=True)
            self._let_go(node)
        if image is not None:
            self.fs.restore(name, image)
        for pending in node.answers:  # the client hears nothing more
            pending.on_answer(None)
        node.answers = []
        node.driver = None
        node.quorum = None
        node.round = None
        node.incarnation += 1
        node.poll_at = None
        disk = node.disk
        disk.durable_end = min(disk.end, node.fsynced_end)
        disk.keep([b for b in disk.batches if b.end <= disk.durable_end])
        self.stats["crashes"] += 1
        self._check_durable_majority()

    def _let_go(self, node: WholeNode) -> None:
        """Close a crashed node's files as the kernel does when its process dies (nothing
        more written matters: its directory is then replaced by the crash image)."""
        faults = self.fs.faults[f"node{node.node_id}"]
        faults.quiet = True
        storage = node.quorum.storage
        try:
            storage.snapshots.download.abandon()
            for seg in storage.metadata.segments:
                seg.close()
            if storage.txn is not None:
                for part in storage.txn.partitions.values():
                    for seg in part.segments:
                        seg.close()
        finally:
            if storage.lock is not None:
                storage.lock.release()
                storage.lock = None
            faults.quiet = False
            faults.crash_in = None

    def _check_durable_majority(self) -> None:
        for node in self.nodes.values():
            if isinstance(node, WholeNode) and node.quorum is not None:
                node.disk.durable_end = min(node.quorum.storage.metadata.flushed_offset,
                                            node.disk.end)
        super()._check_durable_majority()

    # --- the flusher, the timers, the snapshot jobs ---------------------------------------------
    def _latency(self, node: WholeNode, normal: tuple[int, int]) -> int:
        slow = self.fs.faults[f"node{node.node_id}"].slow_until > self.now
        return self.rng.randint(*(self.faults.slow_delay if slow else normal))

    def _begin_round(self, node: WholeNode) -> None:
        """The runner's flusher picks up what the core asked to flush."""
        runner = node.quorum.runner
        try:
            offsets, ticket = runner._begin_round()
        except SimCrash:
            self._lost_power(node, "round")
            return
        except OSError as exc:  # as the flusher task's failure ends `RaftRunner.run`
            runner.fail(exc)
            self._stopped(node)
            return
        node.round = (offsets, ticket)
        self._push(self.now + self._latency(node, self.faults.flush_delay), "round",
                   (node.node_id, node.incarnation))

    def _on_round(self, payload: tuple[int, int]) -> None:
        """The round's fsync is done (or fails), as `RaftRunner` carries it out."""
        node_id, incarnation = payload
        node = self.nodes[node_id]
        assert isinstance(node, WholeNode)
        if node.incarnation != incarnation or node.round is None or node.quorum is None:
            return
        offsets, ticket = node.round
        node.round = None
        runner = node.quorum.runner
        faults = self.fs.faults[f"node{node_id}"]
        if self.chaos and faults.crash_in is None and \
                self.rng.random() < self.faults.crash_in_round:
            faults.crash_in = 1  # the power goes at its fsync
        self.stats["rounds"] += 1
        try:
            try:
                ticket.fsync()
            except OSError as exc:
                ticket.release()
                runner.fail(OSError(exc.errno, f"fsync of the metadata log failed: {exc}"))
            else:
                runner._end_round(offsets, ticket, time.perf_counter())
        except SimCrash:
            self._lost_power(node, "round")
            return
        self._after(node)
        self._poll(node)

    def _begin_txn_round(self, node: WholeNode) -> None:
        """A lone voter's transaction-log task begins a round (`TransactionLog.run`)."""
        quorum = node.quorum
        try:
            node.txn_round = quorum.txn.begin_round()
        except SimCrash:
            self._lost_power(node, "round")
            return
        except OSError as exc:  # as the task's failure ends the node
            quorum.runner.fail(exc)
            self._stopped(node)
            return
        self._push(self.now + self._latency(node, self.faults.flush_delay), "txn_round",
                   (node.node_id, node.incarnation))

    def _on_txn_round(self, payload: tuple[int, int]) -> None:
        node_id, incarnation = payload
        node = self.nodes[node_id]
        assert isinstance(node, WholeNode)
        if node.incarnation != incarnation or node.txn_round is None or node.quorum is None:
            return
        flush, node.txn_round = node.txn_round, None
        quorum = node.quorum
        try:
            try:
                flush.fsync()
            except OSError as exc:
                flush.release()
                quorum.runner.fail(OSError(exc.errno, f"fsync of the transaction log failed: "
                                                      f"{exc}"))
            else:
                quorum.txn.complete_round(flush)
        except SimCrash:
            self._lost_power(node, "round")
            return
        self._after(node)
        self._poll(node)

    def _on_tick(self, payload: tuple[int, int, bool]) -> None:
        """The controller's timers (`Quorum._ticker`): every 100 ms (`periodic`), and once at
        once when it becomes active; an active lone voter first moves the former
        transaction-log layout, a step at a time, each committed before the next."""
        node_id, incarnation, periodic = payload
        node = self.nodes[node_id]
        assert isinstance(node, WholeNode)
        if node.incarnation != incarnation or node.quorum is None:
            return
        if periodic:
            self._push(self.now + TICK_MS, "tick", payload)
        host = node.quorum.host
        if host.state is HostState.MIGRATING:
            waiting = node.migrating
            if waiting is not None and waiting[0] == host.activations and (
                    host.hwm < waiting[1] or host.txn_durable < waiting[2]):
                return
            end = self._drive(node, host.migration_step)
            if node.quorum is None or end is None:
                node.migrating = None
                return
            node.migrating = (host.activations, end, host.txn.end if host.txn else 0)
            self._poll(node)
            return
        self._drive(node, host.tick)
        self._poll(node)

    def _start_job(self, node: WholeNode, job: Any) -> None:
        self._push(self.now + self._latency(node, (0, 20)), "job",
                   (node.node_id, node.incarnation, job))

    def _on_job(self, payload: tuple[int, int, Any]) -> None:
        """A snapshot (or retention) job, as `Quorum._run_job` runs it: written, then told
        to the host on the loop."""
        node_id, incarnation, job = payload
        node = self.nodes[node_id]
        assert isinstance(node, WholeNode)
        if node.incarnation != incarnation or node.quorum is None:
            return  # the process is gone, and the job with it
        runner, host = node.quorum.runner, node.quorum.host
        faults = self.fs.faults[f"node{node_id}"]
        if self.chaos and faults.crash_in is None and self.rng.random() < self.faults.crash_in_job:
            faults.crash_in = self.rng.randint(1, 6)  # the power goes as it writes
        try:
            try:
                job.run()
            except OSError as exc:
                if host.job_failed(job, exc):
                    runner.fail(OSError(exc.errno, f"writing a snapshot of the metadata log "
                                                   f"failed: {exc}"))
        except SimCrash:
            self._lost_power(node, "snapshot")
            return
        if getattr(job, "written", False):
            self.stats["snapshots_written"] += 1
            sid = job.snapshot_id
            path = node.quorum.storage.snapshots.directory / sid.file_name
            self._check_snapshot(node, read_snapshot(path, sid), "written")
        self._drive(node, host.job_done, job)
        self._poll(node)

    # --- faults ---------------------------------------------------------------------------------
    def _on_crash(self, _: Any) -> None:
        if not self.chaos:
            return
        roll = self.rng.random()
        if roll >= self.faults.crash_in_op + self.faults.clean_stop:
            super()._on_crash(None)
            return
        self._push(self.now + self.rng.randint(*self.faults.crash_every), "crash", None)
        node = self.nodes[self.rng.randint(1, len(self.nodes))]
        assert isinstance(node, WholeNode)
        faults = self.fs.faults[f"node{node.node_id}"]
        if node.quorum is None:
            return
        if roll < self.faults.clean_stop:
            self._stop_cleanly(node)
        elif faults.crash_in is None:
            faults.crash_in = self.rng.randint(1, 8)

    def _stop_cleanly(self, node: WholeNode) -> None:
        """What `kraftpy serve` does on SIGTERM: the quorum stops (the leader resigns, the
        answers waiting fail NOT_CONTROLLER), then the storage closes (a last flush, the
        clean-shutdown marker); the node comes back later."""
        quorum = node.quorum
        quorum.stop()
        self._drive(node, node.driver.resign)
        if node.quorum is None:
            return
        if node.round is not None:  # the flusher task is cancelled; close() flushes it all
            node.round[1].release()
            node.round = None
        try:
            quorum.storage.close()
        except SimCrash:
            self._lost_power(node, "stop")
            return
        except OSError as exc:
            if SIMULATED not in str(exc):
                raise
            quorum.runner.fail(exc)
            self._stopped(node)
            return
        self.stats["clean_stops"] += 1
        self._crash(node, self.fs.capture(f"node{node.node_id}", tear=False))
        self._push(self.now + self.rng.randint(*self.faults.down_for), "restart", node.node_id)

    def _on_disk_fault(self, _: Any) -> None:
        if not self.chaos:
            return
        self._push(self.now + self.rng.randint(*self.faults.disk_every), "disk_fault", None)
        node = self.nodes[self.rng.randint(1, len(self.nodes))]
        faults = self.fs.faults[f"node{node.node_id}"]
        kind = self.rng.random()
        if kind < 0.4:
            faults.slow_until = self.now + self.rng.randint(200, 2000)
        elif kind < 0.7:
            faults.fsync_fails = 1
        else:
            faults.full = True
            faults.short_written = False

    def _on_restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.driver is None:
            if self.chaos and self.rng.random() < 0.1:  # the power goes again as it recovers
                self.fs.faults[f"node{node_id}"].crash_in = self.rng.randint(1, 12)
            self._start(node)

    def quiet(self) -> None:
        for faults in self.fs.faults.values():
            faults.full = False
            faults.fsync_fails = 0
            faults.crash_in = None
            faults.slow_until = 0.0
        super().quiet()

    def settle(self, within_ms: float) -> float:
        """After `quiet`: run until the active controller has acknowledged an answer and
        committed records since, and every node has caught up with that high watermark; how
        long that took (ms). AssertionError naming the seed if it does not within `within_ms`."""
        start, acked = self.now, self.stats["acked"]
        target: int | None = None
        while self.now < start + within_ms:
            self.run_until(self.now + 50)
            node = self.active()
            if target is None:
                if node is not None and self.stats["acked"] > acked:
                    target = node.quorum.host.hwm
                continue
            if all(isinstance(n, WholeNode) and n.quorum is not None
                   and n.quorum.host.hwm >= target and n.quorum.host.image.offset >= target
                   for n in self.nodes.values()):
                return self.now - start
        states = {n.node_id: (n.raft.role.value, n.raft.epoch, n.quorum.host.state.value,
                              n.quorum.host.hwm) if isinstance(n, WholeNode) and n.quorum
                  else "down" for n in self.nodes.values()}
        raise AssertionError(f"seed {self.seed}: the quorum did not answer and catch up within "
                             f"{within_ms:.0f} ms of the faults ending (target {target}): "
                             f"{states}")

    # --- checks ---------------------------------------------------------------------------------
    def _check_states(self, node: WholeNode) -> None:
        """The node's committed image, and its controller while everything it applied is
        committed, equal a fresh replay of the committed history to where they stand."""
        host = node.quorum.host
        if host.state in (HostState.STOPPED, HostState.FAILED):
            return
        image = host.image
        marker = (id(host.controller), host.applied, host.hwm, id(image.controller),
                  image.offset, image.held)
        if marker == node.marker:
            return
        node.marker = marker
        self.stats["state_checks"] += 1
        if host.txn is not None:  # every transactional id as acknowledged, or later
            txns = host.controller.transactions.txns
            for tid, (pid, epoch) in self.transactional.items():
                meta = txns.get(tid)
                if meta is None or meta.producer_id != pid or meta.producer_epoch < epoch:
                    self.fail(f"node {node.node_id} holds {tid} as {meta}, but producer id "
                              f"{pid} epoch {epoch} was acknowledged")
        self._compare(node, "committed image", image.controller, image.offset)
        if host.applied <= host.hwm and host.controller is not image.controller:
            self._compare(node, "controller", host.controller, host.applied)

    def _compare(self, node: SimNode, what: str, controller: Any, offset: int) -> None:
        reference = self.reference
        assert reference is not None
        if state_digest(controller) != reference.digest_at(offset):
            self.fail(f"node {node.node_id}: its {what} at offset {offset} is not the replay "
                      f"of the committed log: "
                      f"{describe_difference(controller, reference.replay_to(offset))}")

    def _check_snapshot(self, node: SimNode, snapshot: Any, how: str) -> None:
        """A snapshot replays to the committed state at its end; its epoch is its last
        record's."""
        sid: SnapshotId = snapshot.snapshot_id
        end = sid.end_offset
        if end > len(self.committed) or self.committed[end - 1][0] != sid.epoch:
            self.fail(f"node {node.node_id}: snapshot {sid.file_name} ({how}) is not of the "
                      f"committed history ({len(self.committed)} records)")
        assert self.reference is not None
        controller = self.reference.make_controller()
        for value in snapshot.iter_values():
            record, version = decode_metadata_record(value)
            controller.replay(record, version, end - 1)
        if state_digest(controller) != self.reference.digest_at(end):
            self.fail(f"node {node.node_id}: snapshot {sid.file_name} ({how}) is not the "
                      f"committed state at {end}: "
                      f"{describe_difference(controller, self.reference.replay_to(end))}")

    # --- clients --------------------------------------------------------------------------------
    def active(self) -> WholeNode | None:
        for node in self.nodes.values():
            assert isinstance(node, WholeNode)
            if node.quorum is not None and node.quorum.host.state is HostState.ACTIVE:
                return node
        return None

    def _on_client(self, _: Any) -> None:
        self._push(self.now + self.rng.randint(20, 150), "client", None)
        node = self.active()
        if node is None:
            return
        if self.rng.random() < 0.05:  # a client that still thinks another node leads
            others = [n for n in self.nodes.values()
                      if isinstance(n, WholeNode) and n.quorum is not None
                      and n.quorum.host.state is not HostState.ACTIVE]
            if others:
                self._ask(self.rng.choice(others), self._some_request(), self._refused)
                return
        for broker in self.brokers.values():
            if node.quorum is None:  # it went down as it handled one
                return
            if broker.busy:
                continue
            if broker.epoch < 0:
                self._register(node, broker)
                return
            if self.now >= broker.beat_at:
                self._heartbeat(node, broker)
        if node.quorum is None:
            return
        roll = self.rng.random()
        if roll < 0.35:
            broker = self.rng.choice(list(self.brokers.values()))
            if broker.epoch >= 0:
                self._ask(node, AllocateProducerIdsRequest(broker_id=broker.broker_id,
                                                           broker_epoch=broker.epoch),
                          partial(self._block_granted, broker.broker_id), 0)
        elif roll < 0.65:
            tid = None
            if node.quorum.txn is not None and self.rng.random() < 0.5:
                tid = f"tx{self.rng.randint(0, 3)}"  # a lone voter keeps transactions
            self._ask(node, InitProducerIdRequest(transactional_id=tid,
                                                  transaction_timeout_ms=60000,
                                                  producer_id=-1, producer_epoch=-1),
                      partial(self._id_given, tid), 4)
        else:
            self._ask(node, self._some_request(), lambda response: None)

    def _some_request(self) -> tuple[Any, int]:
        roll = self.rng.random()
        name = f"t{self.rng.randint(0, 7)}"
        if roll < 0.5:
            return CreateTopicsRequest(topics=[CreatableTopic(
                name=name, num_partitions=self.rng.randint(1, 3),
                replication_factor=self.rng.randint(1, 3))], timeout_ms=30000), 7
        if roll < 0.75:
            return DeleteTopicsRequest(topic_names=[name], timeout_ms=30000), 5
        return CreatePartitionsRequest(topics=[CreatePartitionsTopic(
            name=name, count=self.rng.randint(2, 5), assignments=None)], timeout_ms=30000,
            validate_only=False), 3

    def _ask(self, node: WholeNode, request: Any, on_answer: Callable[[Any], None],
             version: int | None = None) -> None:
        """A request to the node's controller host, as `Quorum.submit` hands it over."""
        if version is None:
            request, version = request
        if node.quorum is None:  # it went down meanwhile: no answer
            on_answer(None)
            return
        host, core = node.quorum.host, node.driver.core
        base, epoch = core.next_offset, core.epoch
        try:
            answer = host.handle(request, version)
        except NodeStopped:
            on_answer(None)
            return
        except SimCrash:  # a lone voter's transaction log makes a partition directory
            on_answer(None)
            self._lost_power(node, "event")
            return
        except OSError as exc:  # the request fails (the server answers it with an error)
            if SIMULATED not in str(exc):
                raise
            on_answer(None)
            self._after(node)
            return
        if type(answer) is Deferred:
            pending = Pending(node, base, epoch, answer, on_answer)
            answer.waiter, answer.wake = pending, self._released.append
            node.answers.append(pending)
            if answer.done:
                self._released.append(pending)
        else:
            on_answer(answer)
        self._after(node)
        self._poll(node)

    def _settle_answers(self) -> None:
        """Released answers: one acknowledged must have its records committed, in the epoch
        that handled it."""
        while self._released:
            pending = self._released.pop(0)
            node = pending.node
            if pending not in node.answers:
                continue
            node.answers.remove(pending)
            response = pending.answer.response
            if response is not None and succeeded(response):
                end = pending.answer.end
                if end > len(self.committed):
                    self.fail(f"node {node.node_id} answered {type(response).__name__} "
                              f"before offset {end} was committed ({len(self.committed)})")
                for offset in range(pending.base, end):
                    if self.committed[offset][0] != pending.epoch:
                        self.fail(f"node {node.node_id} answered {type(response).__name__} "
                                  f"of epoch {pending.epoch}, but offset {offset} was "
                                  f"committed in epoch {self.committed[offset][0]}")
                self.stats["acked"] += 1
            pending.on_answer(response)

    def _grant(self, first: int, end: int, what: str) -> None:
        """The durability rule: no id handed out twice, none before its block is committed."""
        assert self.reference is not None
        if end > self.reference.next_producer_id:
            self.fail(f"{what} was acknowledged before the record granting it was committed "
                      f"(the committed next id is {self.reference.next_producer_id})")
        granted = self.granted
        i = bisect.bisect_left(granted, (first,))
        for f, e, w in granted[max(0, i - 1):i + 1]:
            if f < end and first < e:
                self.fail(f"{what} overlaps {w}, acknowledged before")
        granted.insert(i, (first, end, what))

    def _block_granted(self, broker_id: int, response: Any) -> None:
        if response is not None and response.error_code == 0:
            first = response.producer_id_start
            self._grant(first, first + response.producer_id_len,
                        f"block [{first}, {first + response.producer_id_len - 1}] to broker "
                        f"{broker_id}")

    def _id_given(self, tid: str | None, response: Any) -> None:
        if response is None or response.error_code != 0:
            return
        pid, epoch = response.producer_id, response.producer_epoch
        if tid is None:
            self._grant(pid, pid + 1, f"producer id {pid}")
            return
        last = self.transactional.get(tid)  # a transactional id: its epoch only goes up
        if last is not None and last[0] == pid:
            if epoch <= last[1]:
                self.fail(f"{tid} was given producer id {pid} epoch {epoch} after epoch "
                          f"{last[1]} was acknowledged")
        else:
            self._grant(pid, pid + 1, f"producer id {pid} of {tid}")
        self.transactional[tid] = (pid, epoch)

    def _refused(self, response: Any) -> None:
        if response is not None and getattr(response, "error_code", 41) == 0:
            self.fail(f"a node that is not the active controller answered {response}")

    def _register(self, node: WholeNode, broker: SimBroker) -> None:
        broker.busy = True
        request = BrokerRegistrationRequest(
            broker_id=broker.broker_id, cluster_id=CLUSTER, incarnation_id=broker.incarnation,
            listeners=[Listener(name="PLAINTEXT", host=f"broker{broker.broker_id}",
                                port=9092, security_protocol=0)],
            features=[Feature(name=name, min_supported_version=low, max_supported_version=high)
                      for name, (low, high) in sorted(SUPPORTED_FEATURES.items())],
            rack=None, log_dirs=[uuid.UUID(int=broker.broker_id, version=4)])

        def registered(response: Any) -> None:
            broker.busy = False
            if response is not None and response.error_code == 0:
                broker.epoch = response.broker_epoch
                broker.fenced = True
                broker.beat_at = self.now

        self._ask(node, request, registered, 4)

    def _heartbeat(self, node: WholeNode, broker: SimBroker) -> None:
        broker.busy = True
        broker.beat_at = self.now + 500
        request = BrokerHeartbeatRequest(
            broker_id=broker.broker_id, broker_epoch=broker.epoch,
            current_metadata_offset=node.quorum.host.hwm, want_fence=False,
            want_shut_down=False)

        def answered(response: Any) -> None:
            broker.busy = False
            if response is None:
                return
            if response.error_code == 0:
                broker.fenced = response.is_fenced
            elif response.error_code == 77:  # STALE_BROKER_EPOCH: fenced for good; anew
                broker.epoch = -1
                broker.incarnation = uuid.UUID(int=self.rng.getrandbits(128), version=4)

        self._ask(node, request, answered, 1)
