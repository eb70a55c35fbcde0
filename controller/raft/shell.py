"""The Raft core (`core.py`) run as a trio shell: the quorum of every node.

`RaftQuorum` is what `RunningNode` and the metrics use (`submit`, `hwm`, `running`,
`controller`, `storage`, `run`, `stop`), for a lone voter, a voter of several or an observer
alike: one path. The metadata log is committed by the core, never by a local decision:

- Every event goes to the core (`RaftNode`), and its actions are carried out in order on the
  loop: `Send` through `peers.Peers`, `Respond` to the handler awaiting it (Vote,
  BeginQuorumEpoch, EndQuorumEpoch, Fetch, FetchSnapshot come in through
  `raft_request`), appends (as leader: `AppendBatch`; as follower: the fetched batches
  as they came), truncations, `quorum-state` (written durably before the next action),
  fsyncs (`Flush`: one worker-thread fsync at a time, in order, reported back with
  `on_flushed`).
- A commit is the core's `Committed(high_watermark)`: a majority of voters has the records on
  disk (a lone voter: its own fsync). Group commit: the flusher's one fsync at a time covers
  every Flush the core has asked for by then, and what is appended meanwhile waits for the
  next. Every node replays the committed records into its `QuorumController` (state changes
  only by replay); the leader has applied its own already, as it appended them.
- Only the active leader handles requests: it becomes active once everything in its log is
  committed (its LeaderChange included) and replayed, so it answers from the whole history.
  Anywhere else `submit` answers NOT_CONTROLLER (NOT_COORDINATOR for InitProducerId, which a
  client answers by finding the coordinator again). An answer waits until the high watermark
  covers everything appended up to its records.
- A leader that loses leadership fails every answer still waiting (NOT_CONTROLLER: the client
  asks again, never sees an uncommitted change as done) and rebuilds its controller from the
  snapshot and the committed log, dropping what it applied ahead of the commit.

- Snapshots: every voter snapshots its committed state by the single-voter policy
  (`MetadataStorage.after_commit(at=...)`: bytes and time since the last one), taken on the
  loop where the controller's state stands at a batch boundary (a follower's high watermark;
  a leader's last written batch, dropped unless committed before a truncation or a lost
  leadership), written in a worker thread once committed and on disk; the segments and older
  snapshots it covers go by the storage's retention rules, and the core learns where the log
  now starts (`on_snapshot`), so the leader answers a fetch below it with the snapshot id and
  serves that snapshot's bytes by FetchSnapshot. A follower sent there downloads it chunk by
  chunk (`snapshot_download.py`: a `.checkpoint.part`, fsynced, checked whole, renamed),
  drops its log (`PartitionLog.reset_to`, Kafka's truncateToLatestSnapshot) and rebuilds its
  controller from it; one stopped between the rename and the drop finishes it at its next
  start, one stopped during the download starts it over.

Transactional state (`__transaction_state`) is kept by a lone voter only
(`keeps_transactions`): its records are appended to the transaction log beside the core's and
committed by the same fsync rounds, and an answer waits for both high watermarks. Several
voters do not replicate it, so they refuse what would write it (COORDINATOR_NOT_AVAILABLE).
"""

from __future__ import annotations

import logging
import random
import struct
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio
from kraftpy.controller import image
from kraftpy.controller.log import files
from kraftpy.controller.log.snapshots import (
    SnapshotId,
    delete_snapshots_before,
    list_snapshots,
    newest_whole_snapshot,
)
from kraftpy.controller.metrics_stats import Timings
from kraftpy.controller.raft import actions as a
from kraftpy.controller.raft import quorum_state
from kraftpy.controller.raft.config import RaftConfig
from kraftpy.controller.raft.core import RaftNode
from kraftpy.controller.raft.log_state import RaftLog
from kraftpy.controller.raft.messages import fill_snapshot_chunk
from kraftpy.controller.raft.peers import Peers, request_once
from kraftpy.controller.raft.registration import needs_registration, registration_request
from kraftpy.controller.raft.roles import Leader
from kraftpy.controller.raft.snapshot_download import SnapshotDownload
from kraftpy.controller.raft.voters import VoterSet
from kraftpy.protocol.messages.describe_cluster_response import DescribeClusterBroker
from kraftpy.protocol.metadata_frame import decode_metadata_record, encode_metadata_record
from kraftpy.protocol.record_batch import iter_record_batches

log = logging.getLogger("kraftpy.raft")

NOT_CONTROLLER = 41
NOT_COORDINATOR = 16
COORDINATOR_NOT_AVAILABLE = 15
INIT_PRODUCER_ID = 22
TICK_INTERVAL_S = 0.1
REGISTRATION_INTERVAL_S = 0.5
REGISTRATION_RETRY_S = 0.1  # while this incarnation is not registered yet
# An fsync is done on the loop itself (when nothing else could run meanwhile) only while the
# last one took at most this long, so a slow disk never stalls the loop for longer than one.
INLINE_FSYNC_MAX_S = 0.001
METADATA_PARTITION = "__cluster_metadata-0"
_BATCH_HEAD = struct.Struct(">qi")


class RaftShellError(RuntimeError):
    """The shell cannot go on (a failed write, or something it does not do yet); with
    `exit_code` 2 a configuration value is wrong (the message names the key)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class NodeStopped(RuntimeError):
    """The quorum stopped before this request could be answered."""


def _log_lines(events: list[Any]) -> None:
    """A result's event lines at INFO: a str, or a (format, *args) tuple."""
    for line in events:
        if type(line) is tuple:
            log.info(*line)
        else:
            log.info("%s", line)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(eq=False)
class _Reply:
    """A Raft request waiting for the core's `Respond`."""

    event: trio.Event = field(default_factory=trio.Event)
    response: Any = None


@dataclass(eq=False)
class _Waiter:
    """An answer waiting for the high watermark to pass `end`."""

    end: int
    txn_end: int
    term: int
    request: Any
    version: int
    response: Any
    event: trio.Event = field(default_factory=trio.Event)


class RaftQuorum:
    """The node's quorum: the Raft core, its log, its peers and its controller."""

    def __init__(self, *, node_id: int, cluster_id: str, storage: Any,
                 make_controller: Callable[[], Any], raft_config: RaftConfig,
                 voters: VoterSet, addresses: dict[int, tuple[str, int]],
                 directory_id: Any, endpoint: tuple[str, str, int],
                 clock_ms: Callable[[], int] = wall_clock_ms,
                 controller_listeners: tuple[tuple[str, str, int, int], ...] = (),
                 kraft_version: int = 0,
                 voter_history: list[tuple[int, VoterSet]] | None = None,
                 bootstrap: dict[int, tuple[str, int]] | None = None,
                 controller: Any = None) -> None:
        self.node_id = node_id
        self.cluster_id = cluster_id
        self.storage = storage
        self.metadata = storage.metadata
        self.partition_dir = Path(self.metadata.directory)
        self.make_controller = make_controller
        self.clock_ms = clock_ms
        self.fsyncs = 0
        self.fsync_timings = Timings()
        self.queue_timings = Timings()
        self.pass_timings = Timings()
        self.supported_features: dict[str, tuple[int, int]] = {}
        # What this process registers with the leader (KIP-919): a new incarnation per start.
        self.incarnation = uuid.uuid4()
        self.controller_listeners = controller_listeners
        # Told of each controller rebuilt after a lost leadership (the security layer's ACLs).
        self.on_new_controller: Callable[[Any], None] | None = None
        self.active = False  # the leader, caught up and answering
        self.term = 0  # counts activations: a waiter of an earlier one is never released
        self._stopping = False
        self._done = False  # `run` has ended: no raft request is answered any more
        self._failed: BaseException | None = None
        self._waiters: deque[_Waiter] = deque()
        self._replies: set[_Reply] = set()
        self._flushes: deque[int | None] = deque()
        self._flush_wake = trio.Event()
        self._fsync_s = 0.0  # how long the last flush round took
        self._wake = trio.Event()
        self._committed = trio.Event()
        self._tick_due = False
        self._migrating = False  # moving the former transaction-log layout (`_migrate`)
        self._migration_started = False
        # Counts what invalidates a snapshot taken ahead of its commit: a truncation, an
        # installed snapshot, a lost leadership (the controller rebuilt).
        self._generation = 0
        self._snapshot_due = True  # look at the snapshot policy on the next pass
        self._snapshotting = False  # a snapshot or retention job is on its way
        self._jobs: trio.Nursery | None = None
        self._download = SnapshotDownload(self.partition_dir)
        meta = self.metadata
        start = meta.log_start_offset
        snapshots = [sid for sid in self._snapshot_ids() if sid[0] >= start]
        if controller is not None:  # a lone voter's, its whole log replayed (open_quorum)
            self.controller, self.replayed = controller, meta.log_end_offset
        else:
            self.controller, self.replayed = self._fresh_controller(start)
        self.hwm = (self.replayed, storage.txn_end_offset())
        election_path = self.partition_dir / quorum_state.FILE_NAME
        election = (quorum_state.decode(election_path.read_bytes())
                    if election_path.exists() else None)
        raft_log = RaftLog(start_offset=start, end_offset=meta.log_end_offset,
                           flushed_offset=meta.log_end_offset,
                           epochs=list(meta.leader_epochs), snapshots=snapshots,
                           high_watermark=self.replayed)
        self.raft = RaftNode(config=raft_config, node_id=node_id, directory_id=directory_id,
                             cluster_id=cluster_id, voters=voters, log=raft_log,
                             election=election, now_ms=clock_ms(),
                             rng=random.Random(), listener=endpoint[0],
                             endpoints=(endpoint,), kraft_version=kraft_version,
                             voter_history=voter_history, bootstrap=bootstrap)
        self.peers: Peers
        if bootstrap is not None:  # KIP-853: peers come and go with the voter set
            from kraftpy.controller.raft.dynamic import DynamicPeers
            self.peers = DynamicPeers(node_id, self.raft.endpoint_of,
                                      request_timeout_ms=raft_config.request_timeout_ms,
                                      on_response=self._on_response,
                                      on_failure=self._on_failure)
        else:
            self.peers = Peers(node_id, {i: hp for i, hp in addresses.items() if i != node_id},
                               request_timeout_ms=raft_config.request_timeout_ms,
                               on_response=self._on_response, on_failure=self._on_failure)
        from kraftpy.controller.raft.dynamic import VoterChanges
        self.voter_changes = VoterChanges(self, raft_config.request_timeout_ms)
        self._do(self.raft._take())

    # --- what RunningNode and the handlers use ---------------------------------------------
    @property
    def running(self) -> bool:
        """Whether `submit` handles requests here: the active leader, not stopping."""
        return (self.active and not self._migrating and self._failed is None
                and not self._stopping)

    @property
    def leader_id(self) -> int | None:
        return self.raft.leader_id

    async def submit(self, request: Any, api_version: int, listener: str | None = None) -> Any:
        if self._failed is not None:
            self._check_running()
        if not self.active or self._stopping or self._migrating:
            return self._not_leader(request, api_version)
        now = self.clock_ms()
        next_offset = self.raft.next_offset
        result = self.controller.handle(request, api_version, now_ms=now,
                                        next_offset=next_offset, listener=listener)
        if result.txn_records and not self.keeps_transactions:
            log.warning("%s would write transaction state, which a quorum of several voters "
                        "does not replicate: refused", type(request).__name__)
            return _error_response(request, api_version, COORDINATOR_NOT_AVAILABLE)
        end = self._write(result, now, next_offset)
        txn_end = self.storage.txn_end_offset()
        if result.respond_before_commit or (self.hwm[0] >= end and self.hwm[1] >= txn_end):
            return result.response
        waiter = _Waiter(end, txn_end, self.term, request, api_version, result.response)
        self._waiters.append(waiter)
        await waiter.event.wait()
        if waiter.response is None:
            raise NodeStopped("the quorum stopped before this request was committed")
        return waiter.response

    def describe_quorum(self, request: Any, version: int) -> Any:
        """DescribeQuorum as the Raft core answers it (the leader's replica states;
        NOT_LEADER_OR_FOLLOWER elsewhere), whether or not this node is active yet."""
        return self.raft.describe_quorum(request, version, self.clock_ms())

    def describe_cluster(self, request: Any, version: int, listener: str) -> Any:
        """DescribeCluster on a CONTROLLER listener, answered by any voter as Kafka's
        controllers answer it (ControllerApis.handleDescribeCluster): the controllers with an
        endpoint on that listener (here the voter set's) and the Raft leader, -1 if none."""
        response = image.describe_cluster(self.controller, request, version, listener)
        if response.error_code == 0 and response.endpoint_type == image.CONTROLLER_ENDPOINT:
            leader = self.raft.leader_id
            response.controller_id = -1 if leader is None else leader
            found = [(i, node.endpoint(listener))
                     for i, node in sorted(self.raft.voters.voters.items())]
            response.brokers = [DescribeClusterBroker(broker_id=i, host=e[0], port=e[1],
                                                      rack=None)
                                for i, e in found if e is not None]
        return response

    async def wait_for_high_watermark(self, past: int) -> None:
        while self.hwm[0] <= past and self._failed is None and not self._stopping:
            await self._committed.wait()

    async def raft_request(self, request: Any, version: int) -> Any:
        """The core's answer to a Raft request from a peer (None if the quorum stopped)."""
        if self._failed is not None or self._done:
            return None
        reply = _Reply()
        self._replies.add(reply)
        try:
            self._guard(lambda: self._do(self.raft.handle_request(
                reply, request, version, self.clock_ms())))
            await reply.event.wait()
        finally:
            self._replies.discard(reply)
        return reply.response

    async def finish_writes(self, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until everything appended, what still lingers in the
        core included, is committed: a lone voter stopping cleanly leaves no write of its own
        (a bootstrap, a timer's records) behind."""
        with trio.move_on_after(timeout_s):
            while self._failed is None and (self.hwm[0] < self.raft.next_offset
                                            or self.hwm[1] < self.storage.txn_end_offset()):
                await self._committed.wait()

    def stop(self) -> None:
        """Leave the quorum: a leader resigns (EndQuorumEpoch), the answers still waiting for
        a commit fail with NOT_CONTROLLER (the client asks the next leader), and every raft
        request still parked is answered once `run` ends. Called before the server drains,
        so that nothing waits for a commit the drained connections could no longer bring."""
        self._stopping = True
        self.active = False
        self._fail_waiters(NOT_CONTROLLER)
        self._wake.set()

    def _check_running(self) -> None:
        if self._failed is not None:
            raise NodeStopped("the controller stopped after a failure") from self._failed
        if self._stopping:
            raise NodeStopped("the controller is shutting down")

    @property
    def lone_voter(self) -> bool:
        """This node is the only voter: its own disk is the majority."""
        return self.raft.voters.ids == {self.node_id}

    @property
    def keeps_transactions(self) -> bool:
        """Whether this node writes the transaction log (`__transaction_state`): only as the
        lone voter. Several voters do not replicate it."""
        return self.lone_voter and self.storage.txn is not None

    def _not_leader(self, request: Any, version: int) -> Any:
        code = NOT_COORDINATOR if request.API_KEY == INIT_PRODUCER_ID else NOT_CONTROLLER
        return _error_response(request, version, code)

    # --- the leader's writes ------------------------------------------------------------------
    def _write(self, result: Any, now: int, next_offset: int) -> int:
        """Append and apply a result's records; the log end its answer waits for."""
        if result.events:
            _log_lines(result.events)
        # Encoded before anything is written: a record that cannot be fails its operation
        # alone, with none of its transaction records left in that log.
        values = [encode_metadata_record(r, v) for r, v in result.records]
        txn_offset = self.storage.txn_end_offset()
        if result.txn_records:  # a lone voter's (keeps_transactions): committed by its fsync
            txn_offset = self.storage.append_txn(result.txn_records, now)
            self._flushes.append(None)
            self._flush_wake.set()
        if not values:
            if result.txn_records:
                self.controller.apply(result, offset=next_offset, txn_offset=txn_offset)
            return next_offset
        base = self.raft.append(values, now)
        self.controller.apply(result, offset=base, txn_offset=txn_offset)
        end = base + len(values)
        self.replayed = max(self.replayed, end)
        self._kick()
        return end

    def _tick(self) -> None:
        if not self.active or self._failed is not None or self._stopping:
            return
        now = self.clock_ms()
        next_offset = self.raft.next_offset
        result = self.controller.tick(now_ms=now, next_offset=next_offset)
        if result.txn_records and not self.keeps_transactions:
            log.warning("a timer would write transaction state, which a quorum of several "
                        "voters does not replicate: skipped")
            return
        self._write(result, now, next_offset)

    # --- the core's actions -------------------------------------------------------------------
    def _do(self, actions: list[a.Action]) -> None:
        for action in actions:
            kind = type(action)
            if kind is a.Send:
                self.peers.send(action.destination, action.correlation_id, action.request)
            elif kind is a.Respond:
                self._respond(action)
            elif kind is a.AppendBatch:
                self._snapshot_due = True
                keys = [k for k, _ in action.records]
                base = self.metadata.append(
                    [v for _, v in action.records], keys=keys if any(keys) else None,
                    control=action.control, leader_epoch=action.epoch,
                    timestamp=action.timestamp)
                if base != action.base_offset:
                    raise RaftShellError(f"batch appended at {base}, the core expected "
                                         f"{action.base_offset}")
            elif kind is a.AppendFetched:
                self._append_fetched(action)
            elif kind is a.Truncate:
                if action.offset < self.replayed and action.offset < self.hwm[0]:
                    raise RaftShellError(f"truncation to {action.offset} below the committed "
                                         f"{self.hwm[0]}")
                log.info("truncating the metadata log to offset %d (a diverging suffix)",
                         action.offset)
                self._generation += 1
                self.metadata.truncate_to(action.offset)
            elif kind is a.Flush:
                self._flushes.append(action.offset)
                self._flush_wake.set()
            elif kind is a.WriteQuorumState:
                files.atomic_write(self.partition_dir / quorum_state.FILE_NAME, action.data)
            elif kind is a.Committed:
                self._snapshot_due = True
                self._on_committed(action.high_watermark)
            elif kind is a.LeaderChanged:
                log.info("leader of epoch %d: %s", action.epoch,
                         "none known" if action.leader_id is None else action.leader_id)
            elif kind is a.Note:
                getattr(log, action.level, log.info)("%s", action.text)
            elif kind is a.WriteSnapshotChunk:
                if action.position == 0:
                    log.info("downloading snapshot %s from the leader",
                             SnapshotId(*action.snapshot_id).file_name)
                self._download.write(action.snapshot_id, action.position, action.data)
            elif kind is a.InstallSnapshot:
                self._install(action.snapshot_id)
        self._check_role()

    def _respond(self, action: a.Respond) -> None:
        response = action.response
        if action.read_from is not None:
            self.metadata.write_ahead()
            data = self.metadata.read_raw(action.read_from, self.metadata.log_end_offset,
                                          action.max_bytes)
            response.responses[0].partitions[0].records = data or b""
        elif action.snapshot is not None:
            (end, epoch), position, max_bytes = action.snapshot
            path = self.partition_dir / f"{end:020d}-{epoch:010d}.checkpoint"
            found = None
            try:
                with open(path, "rb") as f:
                    size = f.seek(0, 2)
                    f.seek(max(position, 0))
                    found = (size, f.read(max_bytes))
            except OSError:
                found = None
            fill_snapshot_chunk(response, found)
        reply = action.token
        reply.response = response
        reply.event.set()

    def _append_fetched(self, action: a.AppendFetched) -> None:
        data = action.records
        for batch in iter_record_batches(data):
            self.metadata.append_batch(bytes(data[batch.start:batch.end]))
        if self.metadata.log_end_offset != action.end_offset:
            raise RaftShellError(f"fetched batches end at {self.metadata.log_end_offset}, "
                                 f"the core expected {action.end_offset}")

    def _on_committed(self, hwm: int) -> None:
        if hwm > self.replayed:
            self._replay(self.controller, self.replayed, hwm)
            self.replayed = hwm
        self.hwm = (hwm, self.hwm[1])
        self.controller.features.kraft_version = self.raft.kraft_version
        self._release()

    def _release(self) -> None:
        """Tell the controller the high watermarks; release the answers they cover."""
        hwm, txn_hwm = self.hwm
        self.controller.on_committed(hwm, txn_hwm)
        waiters = self._waiters
        while waiters and waiters[0].end <= hwm and waiters[0].txn_end <= txn_hwm:
            waiter = waiters.popleft()
            waiter.event.set()
        self._committed.set()
        self._committed = trio.Event()

    def _check_role(self) -> None:
        """Activate a caught-up leader; deactivate one that is no longer leading."""
        leading = (isinstance(self.raft.state, Leader) and self._failed is None
                   and not self._stopping)
        if self.active and not leading:
            self.active = False
            log.info("no longer the active controller (epoch %d): failing %d answers in "
                     "flight, rebuilding the controller from the committed log",
                     self.raft.epoch, len(self._waiters))
            self._fail_waiters(NOT_CONTROLLER)
            self._generation += 1
            self.controller, self.replayed = self._fresh_controller(
                *self.hwm, with_txn=self.keeps_transactions)
            if self.on_new_controller is not None:
                self.on_new_controller(self.controller)
        elif not self.active and leading:
            end = self.raft.log.end_offset
            if self.raft.high_watermark >= end and self.hwm[0] >= end:
                self.replayed = max(self.replayed, end)
                self.term += 1
                self.controller.activate(leader_epoch=self.raft.epoch, now_ms=self.clock_ms())
                self.active = True
                self._tick_due = True
                # kraftpy's former transaction-log layout moves before anything is answered.
                self._migrating = (self.keeps_transactions
                                   and self.controller.transactions.migration_due())
                log.info("active controller in epoch %d from offset %d", self.raft.epoch, end)

    def _fail_waiters(self, code: int | None) -> None:
        waiters, self._waiters = self._waiters, deque()
        for waiter in waiters:
            waiter.response = (None if code is None
                               else _error_response(waiter.request, waiter.version, code))
            waiter.event.set()

    # --- replay -------------------------------------------------------------------------------
    def _fresh_controller(self, hwm: int, txn_hwm: int | None = None, *,
                          with_txn: bool = False) -> tuple[Any, int]:
        """A controller with the newest snapshot and the log below `hwm` replayed: what a
        node's state is when it holds only committed records. `with_txn`: a lone voter that
        lost leadership, whose transaction log holds only what it wrote, all of it on its way
        to disk (nobody else can truncate it), is replayed too."""
        controller = self.make_controller()
        controller.features.kraft_version = self.storage.kraft_version
        start = self.metadata.log_start_offset
        snapshot = self._newest_snapshot()
        if snapshot is not None and snapshot.snapshot_id is not None:
            last = snapshot.snapshot_id.end_offset - 1
            for value in snapshot.values:
                record, version = decode_metadata_record(value)
                controller.replay(record, version, last)
            start = max(start, snapshot.snapshot_id.end_offset)
        if hwm > start:
            self._replay(controller, start, hwm)
        end = max(start, hwm)
        if with_txn:
            self.storage.replay_txn_into(controller, recovered=False)
        controller.on_committed(end, self.storage.txn_end_offset() if txn_hwm is None
                                else txn_hwm)
        return controller, end

    def _replay(self, controller: Any, start: int, end: int) -> None:
        for batch in self.metadata.read(start):
            if batch.base_offset >= end:
                break
            if batch.is_control:
                continue
            offset = batch.base_offset
            for value in batch.values():
                if start <= offset < end:
                    record, version = decode_metadata_record(value)  # type: ignore[arg-type]
                    controller.replay(record, version, offset)
                offset += 1

    def _snapshot_ids(self) -> list[tuple[int, int]]:
        out = []
        for path in self.partition_dir.glob("*.checkpoint"):
            name = path.name
            if len(name) == 42 and name[:20].isdigit() and name[21:31].isdigit():
                sid = (int(name[:20]), int(name[21:31]))
                if sid != (0, 0):
                    out.append(sid)
        return sorted(out)

    def _newest_snapshot(self) -> Any:
        """The newest whole snapshot in the directory (the storage's, if it is that one)."""
        ids = [sid for sid, _ in list_snapshots(self.partition_dir) if sid.end_offset > 0]
        known = self.storage.snapshot
        if known is not None and ids and known.snapshot_id == ids[-1]:
            return known
        if not ids:
            return known
        newest, _damaged = newest_whole_snapshot(self.partition_dir)
        if newest is not None:
            self.storage.snapshot = newest
        return newest

    # --- snapshots ----------------------------------------------------------------------------
    def _maybe_snapshot(self) -> None:
        """Ask the snapshot policy, when the controller's state stands at a batch boundary
        that is committed (a follower, or a leader with nothing in flight) or that is the
        log's end (a leader whose last batch is written: the job then waits for its commit,
        and is dropped if a truncation or a lost leadership comes first)."""
        self._snapshot_due = False
        if self._snapshotting or self._jobs is None or self._failed is not None \
                or self._stopping:
            return
        at = self.replayed
        if at > self.hwm[0] and at != self.metadata.log_end_offset:
            return  # the core still holds records the controller applied: not a boundary
        if self.raft.kraft_version >= 1:  # KIP-853: the snapshot records the set at `at`
            from kraftpy.controller.raft.dynamic import snapshot_voters

            snapshot_voters(self.storage, self.raft, at)
        job = self.storage.after_commit(self.controller, self.clock_ms(), at=at)
        if job is None or not callable(getattr(job, "write", None)):
            return
        self._snapshotting = True
        self._jobs.start_soon(self._write_snapshot, job, self._generation)

    async def _write_snapshot(self, job: Any, generation: int) -> None:
        """A snapshot taken on the loop, written in a worker thread once its end offset is
        committed and on this node's disk; retention's deletions likewise (at once)."""
        end = job.end_offset
        try:
            while self.hwm[0] < end or self.metadata.high_watermark < end:
                if self._generation != generation or self._failed is not None \
                        or self._stopping:
                    job.abandon()
                    return
                with trio.move_on_after(0.05):
                    await self._committed.wait()
            if self._generation != generation:
                job.abandon()
                return
            await trio.to_thread.run_sync(job.write)
        except OSError as exc:
            job.abandon()
            self._fail(RaftShellError(f"writing a snapshot of the metadata log failed: {exc}"))
            return
        except BaseException:
            job.abandon()
            raise
        finally:
            self._snapshotting = False
        job.finish()
        self._guard(lambda: self._snapshot_written(job))

    def _snapshot_written(self, job: Any) -> None:
        """Tell the core of the new snapshot and of where the log now starts (nothing of
        it when an installed snapshot replaced the log meanwhile: it starts past both)."""
        now = self.clock_ms()
        sid = getattr(job, "snapshot_id", None)
        if sid is not None and sid.end_offset > self.raft.log.start_offset:
            self._do(self.raft.on_snapshot((sid.end_offset, sid.epoch), delete_before=False,
                                           now_ms=now))
        cut = self.storage.trimmed_to
        if cut is not None and cut.end_offset > self.raft.log.start_offset:
            self._do(self.raft.on_snapshot((cut.end_offset, cut.epoch), delete_before=True,
                                           now_ms=now))

    def _install(self, snapshot_id: tuple[int, int]) -> None:
        """The downloaded snapshot is whole: freeze it, drop the log and the older snapshots
        (Kafka's truncateToLatestSnapshot), rebuild the controller from it."""
        self._generation += 1
        snapshot, size = self._download.install(snapshot_id)
        sid = SnapshotId(*snapshot_id)
        self.metadata.reset_to(sid.end_offset)
        delete_snapshots_before(self.partition_dir, sid, keep=0)
        self.storage.installed(snapshot, size, self.clock_ms())
        self.controller, self.replayed = self._fresh_controller(sid.end_offset)
        self.hwm = (self.replayed, self.storage.txn_end_offset())
        if self.on_new_controller is not None:
            self.on_new_controller(self.controller)
        log.info("installed snapshot %s (%d bytes, %d records) from the leader; the log now "
                 "starts at offset %d", sid.file_name, size, len(snapshot.values),
                 sid.end_offset)

    # --- the tasks ----------------------------------------------------------------------------
    def _kick(self) -> None:
        self._wake.set()

    def _on_response(self, source: int, correlation_id: int, response: Any) -> None:
        self._guard(lambda: self._do(self.raft.handle_response(
            source, correlation_id, response, self.clock_ms())))

    def _on_failure(self, destination: int, correlation_id: int) -> None:
        self._guard(lambda: self._do(self.raft.request_failed(
            destination, correlation_id, self.clock_ms())))

    def _guard(self, step: Callable[[], None]) -> None:
        if self._failed is not None:
            return
        try:
            step()
        except Exception as exc:  # noqa: BLE001 - the node stops with it, logged by run
            self._fail(exc)
        self._kick()

    def _fail(self, exc: BaseException) -> None:
        if self._failed is None:
            self._failed = exc
            log.error("the raft quorum stopped: %s: %s", type(exc).__name__, exc)
        self.active = False
        self._fail_waiters(None)
        for reply in list(self._replies):
            reply.event.set()
        self._committed.set()
        self._wake.set()
        self._flush_wake.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        task_status.started()
        try:
            async with trio.open_nursery() as nursery:
                self._jobs = nursery
                nursery.start_soon(self.peers.run)
                nursery.start_soon(self._flusher)
                nursery.start_soon(self._ticker)
                if self.controller_listeners:
                    nursery.start_soon(self._register)
                await self._poll_loop()
                nursery.cancel_scope.cancel()
        except BaseException as exc:
            self._fail(exc)
            raise
        finally:
            self._done = True
            self._jobs = None
            self._download.abandon()
            for reply in list(self._replies):  # parked raft requests: answered as stopped
                reply.event.set()
        if self._failed is not None:
            raise RaftShellError(str(self._failed)) from self._failed

    async def _poll_loop(self) -> None:
        resigned = False
        while self._failed is None:
            now = self.clock_ms()
            if self._stopping and not resigned:
                resigned = True
                self._guard(lambda t=now: self._do(self.raft.resign(t)))
                await trio.sleep(0.1)  # EndQuorumEpoch on its way to the other voters
                return
            elif self._stopping:
                return
            self._guard(lambda t=now: self._do(self.raft.poll(t)))
            if self._migrating and not self._migration_started and self._jobs is not None:
                self._migration_started = True
                self._jobs.start_soon(self._migrate, self.term)
            if self._tick_due and not self._migrating:
                self._tick_due = False
                self._guard(self._tick)
            if self._snapshot_due:
                self._guard(self._maybe_snapshot)
            # Every `_guard` above set `_wake`, but what this pass did needs no second pass
            # (its timers are in next_deadline): only what comes while waiting wakes the loop
            # early. Left set, the loop would spin, each voter always runnable.
            self._wake = trio.Event()
            # The core's times are whole milliseconds of the clock; measured against the
            # exact time a timer (the append linger above all) fires when it is due, not up to
            # a millisecond later.
            now_ms = time.time() * 1000 if self.clock_ms is wall_clock_ms else self.clock_ms()
            wait_s = max(0.0, (self.raft.next_deadline() - now_ms) / 1000)
            with trio.move_on_after(min(wait_s, 1.0)):
                await self._wake.wait()

    async def _migrate(self, term: int) -> None:
        """Move the transactional ids of kraftpy's former one-partition layout to where
        Kafka looks for them, as the active lone voter and before it answers anything: each
        step (`TransactionControlManager.migration_step`: copy each misplaced id into its own
        partition, create the topic, tombstone the misplaced records) committed before the
        next is asked for, so a crash anywhere leaves every id readable and the next start
        goes on from there. A directory in Kafka's layout takes no step."""
        try:
            while self.term == term and self.active and self._failed is None \
                    and not self._stopping:
                step = self.controller.transactions.migration_step()
                if step is None:
                    return
                end = self._write(step, self.clock_ms(), self.raft.next_offset)
                txn_end = self.storage.txn_end_offset()
                while (self.hwm[0] < end or self.hwm[1] < txn_end) and self.term == term \
                        and self._failed is None and not self._stopping:
                    await self._committed.wait()
        finally:
            if self.term == term:
                self._migrating = False
                self._migration_started = False
                self._kick()

    async def _ticker(self) -> None:
        while True:
            await trio.sleep(TICK_INTERVAL_S)
            self._tick_due = True
            self._wake.set()

    async def _register(self) -> None:
        """Register this incarnation with the leader until the log holds it (registration.py);
        tried every 0.1 s until a leader takes it, then every half second until the log holds
        it, the leader found anew each time."""
        answered = False  # the leader took this incarnation's registration
        while not self._stopping:
            # Soon after a start or a new leader, as Kafka's ControllerRegistrationManager
            # registers once it knows the leader; at the interval once the leader took it
            # (until its record reaches this node's log).
            pending = not answered and needs_registration(self.controller, self.node_id,
                                                          self.incarnation)
            await trio.sleep(REGISTRATION_RETRY_S if pending else REGISTRATION_INTERVAL_S)
            if not needs_registration(self.controller, self.node_id, self.incarnation):
                continue
            leader = self.raft.leader_id
            request = registration_request(self.node_id, self.incarnation,
                                           self.controller_listeners, self.supported_features)
            if leader == self.node_id and self.running:
                try:
                    answer = await self.submit(request, 0)
                except NodeStopped:
                    return
            elif leader is not None and leader in self.peers.addresses:
                answer = await request_once(self.peers.addresses[leader], request, 0,
                                            self.peers.client_id, REGISTRATION_INTERVAL_S * 4)
            else:
                continue
            if answer is not None and answer.error_code == 0:
                answered = True
                log.info("registered controller incarnation %s with the leader (%d)",
                         self.incarnation, leader)

    async def _flusher(self) -> None:
        """One fsync at a time; each covers every Flush the core has asked for by then."""
        while True:
            if not self._flushes:
                self._flush_wake = trio.Event()
                await self._flush_wake.wait()
                if self._failed is not None:
                    return
                continue
            # One fsync covers every Flush asked for by now (group commit): the round writes
            # everything appended, and the core hears of each Flush in order.
            offsets = list(self._flushes)
            self._flushes.clear()
            began = time.perf_counter()
            try:
                flush = self.storage.begin_flush()
                if self._fsync_s <= INLINE_FSYNC_MAX_S and \
                        trio.lowlevel.current_statistics().tasks_runnable == 0:
                    # Nothing else could run meanwhile: a hand-off to a worker thread would
                    # only add its two GIL switches to the wait.
                    flush.fsync()
                else:
                    await trio.to_thread.run_sync(flush.fsync)
                _, txn_hwm = self.storage.complete_flush(flush)
            except OSError as exc:
                self._fail(RaftShellError(f"fsync of the metadata log failed: {exc}"))
                return
            self._fsync_s = time.perf_counter() - began
            self.fsyncs += 1
            self.fsync_timings.observe(self._fsync_s, began)
            if txn_hwm > self.hwm[1]:  # the transaction log: durable here is committed
                self.hwm = (self.hwm[0], txn_hwm)
                self._guard(self._release)
            for offset in offsets:
                if offset is not None:  # None: the transaction log's own round
                    self._guard(lambda o=offset: self._do(self.raft.on_flushed(
                        o, self.clock_ms())))


def _error_response(request: Any, version: int, code: int) -> Any:
    from kraftpy.controller.api.errors import error_response

    return error_response(request.API_KEY, request, version, code)


def configured_voters(config: Any) -> dict[int, tuple[str, int]] | None:
    """The static voters of `controller.quorum.voters`; None when it is not set."""
    from kraftpy.controller.raft.config import RaftConfigError, parse_voters

    text = config.properties.get("controller.quorum.voters", "").strip()
    if not text:
        return None
    try:
        voters = parse_voters(text)
    except RaftConfigError as exc:
        raise RaftShellError(str(exc), 2) from None
    if config.node_id not in voters:
        raise RaftShellError(f"node.id {config.node_id} is not one of controller.quorum.voters "
                             f"({', '.join(map(str, sorted(voters)))}); kraftpy does not run "
                             "as an observer of a static quorum", 2)
    return voters


def lone_voter(config: Any) -> dict[int, tuple[str, int]]:
    """Neither `controller.quorum.voters` nor `.bootstrap.servers`: this node is the lone
    voter, at its first controller listener's advertised address."""
    advertised = config.advertised(config.controller_listener_names[0])
    return {config.node_id: (advertised.host, advertised.port)}


def open_quorum(config: Any, voters: dict[int, tuple[str, int]],
                bootstrap: dict[int, tuple[str, int]] | None = None) -> RaftQuorum:
    """Format if new, open and recover the data dir, build the shell. With `bootstrap`
    (`controller.quorum.bootstrap.servers`) the quorum is KIP-853's dynamic one: voters and
    kraft.version from the log (`dynamic.recorded_voters`); else the static `voters`.

    A lone voter's disk is the majority, so all of it is committed: its snapshot and both
    logs are replayed now (`recovery.recover_controller`, which refuses what this node cannot
    run before anything is written); kraftpy's former transaction-log layout is moved once it
    is the active controller (`_migrate`).
    A voter of several replays nothing past its newest snapshot here: the log's records are
    replayed as the quorum commits them."""

    from kraftpy.controller import recovery
    from kraftpy.controller.feature_control import SUPPORTED_FEATURES
    from kraftpy.controller.quorum_controller import QuorumController
    from kraftpy.controller.raft.config import RaftConfigError

    started = time.monotonic()
    try:
        raft_config = RaftConfig.from_properties(config.properties)
    except RaftConfigError as exc:
        raise RaftShellError(str(exc), 2) from None
    log_dir = Path(config.metadata_log_dir)
    static_lone = bootstrap is None and set(voters) == {config.node_id}
    storage = recovery.open_storage(config, downloads=not static_lone)
    try:
        directory_id = recovery._directory_id(storage)
        settings = recovery.node_settings(config, storage)
        listener = config.controller_listener_names[0]
        advertised = config.advertised(listener)
        voter_set, history = VoterSet.static(voters, listener), None
        if bootstrap is not None or (static_lone and storage.kraft_version):
            from kraftpy.controller.raft.dynamic import recorded_voters

            voter_set, history = recorded_voters(storage)
        elif storage.kraft_version:
            raise RaftShellError("a quorum of several static voters runs at kraft.version 0 "
                                 "(controller.quorum.voters); this data dir has kraft.version "
                                 f"{storage.kraft_version}", 2)
        controller = None
        if voter_set.ids == {config.node_id} or static_lone:
            controller, stats = recovery.recover_controller(config, storage, settings)
            recovery.log_recovered(config, stats, storage, started)
        quorum = RaftQuorum(
            node_id=config.node_id, cluster_id=storage.cluster_id, storage=storage,
            make_controller=lambda: QuorumController(settings), raft_config=raft_config,
            voters=voter_set, addresses=voters,
            directory_id=directory_id, endpoint=(listener, advertised.host, advertised.port),
            controller_listeners=tuple(
                (ep.name, ep.host, ep.port, ep.security_protocol)
                for ep in settings.controller_endpoints()),
            kraft_version=storage.kraft_version, voter_history=history, bootstrap=bootstrap,
            controller=controller)
        quorum.supported_features = dict(SUPPORTED_FEATURES)
    except BaseException:
        storage.close()
        raise
    log.info("opened %s as %s %d of %s: log %d-%d, epoch %d", log_dir,
             "voter" if quorum.raft.is_voter else "observer", config.node_id,
             sorted(quorum.raft.voters.ids), storage.metadata.log_start_offset,
             storage.metadata.log_end_offset, quorum.raft.epoch)
    return quorum
