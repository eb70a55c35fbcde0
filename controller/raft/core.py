"""RaftNode: KafkaRaftClient's decisions for __cluster_metadata-0, with no I/O (KIP-595/996/853).

Events in (`handle_request`, `handle_response`, `request_failed`, `poll`, `append`,
`on_flushed`, `on_snapshot`, `resign`, `add_voter`, `remove_voter`), actions out (`actions.py`):
messages, log appends and truncations, fsyncs, quorum-state writes, commits. Time comes in with
every call; randomness from the `random.Random` it is given, so a seeded run is reproducible.

Roles and transitions are Kafka's (`roles.py`): a voter whose election or fetch timer runs out
becomes Prospective and asks for pre-votes (Vote with PreVote=true, nothing persisted); with a
majority it becomes Candidate (epoch + 1, vote for itself persisted), and with a majority of
votes Leader, which writes a LeaderChange control batch at its epoch start. A follower fetches
from the leader, truncates on a DivergingEpoch, downloads a snapshot when the leader answers
with a SnapshotId. The leader's high watermark is the largest offset a majority of voters has
on disk (its own counted only once flushed), and it moves only past its own epoch start, so a
new leader never exposes another epoch's records before one of its own is committed.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass
from typing import Any

from kraftpy.controller.raft import describe
from kraftpy.controller.raft import messages as m
from kraftpy.controller.raft.actions import (
    Action,
    AppendBatch,
    AppendFetched,
    Committed,
    Flush,
    InstallSnapshot,
    LeaderChanged,
    Note,
    Respond,
    Send,
    Truncate,
    WriteQuorumState,
    WriteSnapshotChunk,
)
from kraftpy.controller.raft.config import MAX_BATCH_BYTES, MAX_FETCH_BYTES, RaftConfig
from kraftpy.controller.raft.log_state import BOOTSTRAP_SNAPSHOT, RaftLog
from kraftpy.controller.raft.quorum_state import ElectionState
from kraftpy.controller.raft.roles import (
    Candidate,
    EpochElection,
    Follower,
    Leader,
    Prospective,
    ReplicaProgress,
    Resigned,
    Role,
    State,
    Unattached,
)
from kraftpy.controller.raft.voters import ReplicaKey, VoterNode, VoterSet
from kraftpy.protocol.control_records import ControlType, control_key, decode_control_record
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.messages.begin_quorum_epoch_request import BeginQuorumEpochRequest
from kraftpy.protocol.messages.begin_quorum_epoch_response import BeginQuorumEpochResponse
from kraftpy.protocol.messages.end_quorum_epoch_request import EndQuorumEpochRequest
from kraftpy.protocol.messages.end_quorum_epoch_response import EndQuorumEpochResponse
from kraftpy.protocol.messages.fetch_request import FetchRequest
from kraftpy.protocol.messages.fetch_response import FetchResponse
from kraftpy.protocol.messages.fetch_snapshot_request import FetchSnapshotRequest
from kraftpy.protocol.messages.fetch_snapshot_response import FetchSnapshotResponse
from kraftpy.protocol.messages.k_raft_version_record import KRaftVersionRecord
from kraftpy.protocol.messages.leader_change_message import LeaderChangeMessage
from kraftpy.protocol.messages.leader_change_message import Voter as LeaderChangeVoter
from kraftpy.protocol.messages.vote_request import VoteRequest
from kraftpy.protocol.messages.vote_response import VoteResponse
from kraftpy.protocol.record_batch import iter_record_batches
from kraftpy.protocol.uuid import kafka_uuid_str

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
BROKER_NOT_AVAILABLE = 8
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
REQUEST_TIMED_OUT = 7
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
SNAPSHOT_NOT_FOUND = 98
POSITION_OUT_OF_RANGE = 99
OFFSET_OUT_OF_RANGE = 1
INCONSISTENT_VOTER_SET = 94
INCONSISTENT_CLUSTER_ID = 104
INVALID_VOTER_KEY = 125
DUPLICATE_VOTER = 126
VOTER_NOT_FOUND = 127
NEVER = float("inf")
CAUGHT_UP_FETCH_MS = 3_600_000  # Kafka's isReplicaCaughtUp: fetched within the last hour


def _directory_text(key: ReplicaKey) -> str:
    return "-" if key.directory_id is None else kafka_uuid_str(key.directory_id)


class NotLeaderError(Exception):
    """`append` on a node that is not the leader (or is resigning)."""


@dataclass
class _Peer:
    in_flight: int | None = None  # correlation id
    sent_ms: float = 0
    backoff_until: float = 0


@dataclass
class _ParkedFetch:
    token: Any
    part: Any
    version: int
    replica: ReplicaKey
    deadline: float


class RaftNode:
    """One replica of __cluster_metadata-0 (a voter or an observer)."""

    def __init__(self, *, config: RaftConfig, node_id: int, directory_id: Any,
                 cluster_id: str, voters: VoterSet, log: RaftLog,
                 election: ElectionState | None, now_ms: float, rng: random.Random,
                 kraft_version: int = 0, listener: str = "CONTROLLER",
                 endpoints: tuple[tuple[str, str, int], ...] = (),
                 voter_history: list[tuple[int, VoterSet]] | None = None,
                 bootstrap: dict[int, tuple[str, int]] | None = None) -> None:
        """Start as Kafka's QuorumState.initialize does from the log and quorum-state read at
        startup: a leader restarts Resigned in its epoch, a candidate as Candidate, a node
        that knows the leader as Follower (a candidate that lost and followed the winner
        too, its vote kept: Kafka 4.1 restarts it as Candidate, whose VoteRequest, its last
        epoch not below the candidate epoch, every voter refuses until its election times
        out), any other as Unattached; a lone voter stands for election at once.
        `voter_history` is (offset, set) of each VotersRecord in the log; `bootstrap` is
        `controller.quorum.bootstrap.servers` (ids -2, -3, ... as Kafka numbers them), which
        a node that knows no leader fetches from instead of the voters."""
        self.config = config
        self.node_id = node_id
        self.local = ReplicaKey(node_id, directory_id)
        self.cluster_id = cluster_id
        self.log = log
        self.rng = rng
        self.kraft_version = kraft_version
        self.listener = listener
        self.endpoints = endpoints
        self.bootstrap = dict(bootstrap or {})
        self._voters: list[tuple[int, VoterSet]] = [(-1, voters)] + list(voter_history or [])
        # At kraft.version 0 a voter's UpdateRaftVoter is kept in memory, as Kafka's leader
        # keeps its "volatile voters": what a later kraft.version upgrade would start from.
        self.volatile_voters: dict[int, VoterNode] = {}
        self._peers: dict[int, _Peer] = {}
        self._correlation = rng.randrange(1 << 30)
        self._out: list[Action] = []
        self._parked: list[_ParkedFetch] = []
        self._pending: list[tuple[bytes | None, bytes]] = []
        self._pending_control = False
        self._pending_bytes = 0
        self._linger_deadline = NEVER
        self._flushes: deque[tuple[int, int]] = deque()  # (offset, generation), in order
        self._generation = 0
        self._leader_endpoints: dict[int, tuple[str, int]] = {}
        self.anomalies: list[str] = []  # peers contradicting Raft's invariants (never expected)
        # Directories a quorum recovery declared lost (`quorum_recovery.py`): their Vote,
        # Fetch and FetchSnapshot requests are refused (INCONSISTENT_VOTER_SET), never acted on.
        self.declared_lost: frozenset[ReplicaKey] = frozenset()
        self._lost_noted: set[tuple[ReplicaKey, str]] = set()
        self.now = now_ms
        self._version = 0  # of the request being answered: NodeEndpoints only where it has them
        stored = election or ElectionState(epoch=0, voters=self.voters.ids)
        last_epoch = log.last_fetched_epoch
        if stored.epoch < last_epoch:
            self._note("warning", f"quorum-state epoch {stored.epoch} is below the log's "
                       f"last epoch {last_epoch}")
            state: State = Unattached(last_epoch, None, None, self._election_deadline())
        elif stored.is_leader(node_id):
            state = Resigned(stored.epoch, self.local, self._election_deadline(),
                             set(self.voters.ids - {node_id}), [])
        elif stored.voted_id is not None and stored.voted_for(node_id, directory_id) \
                and stored.leader_id is None:  # a candidate that lost knows the winner
            state = Candidate(stored.epoch, self.local, EpochElection(self.voters, node_id),
                              self._election_deadline())
        elif stored.leader_id is not None and self._endpoint(stored.leader_id) is not None:
            state = Follower(stored.epoch, stored.leader_id, self._voted(stored),
                             now_ms + config.fetch_timeout_ms)
        else:
            state = Unattached(stored.epoch, stored.leader_id, self._voted(stored),
                               self._election_deadline())
        self.state: State = self._durable(state)
        self._leader_changed()
        if self.voters.is_only_voter(self.local) and isinstance(
                state, (Unattached, Follower, Resigned)):
            self._to_prospective()
        elif isinstance(state, Candidate) and state.votes.is_vote_granted():
            self._to_leader()

    # ===== questions =========================================================================
    @property
    def voters(self) -> VoterSet:
        return self._voters[-1][1]

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def leader_id(self) -> int | None:
        return self.state.leader_id

    @property
    def role(self) -> Role:
        if not self.is_voter and isinstance(self.state, (Unattached, Follower)):
            return Role.OBSERVER
        return self.state.role

    @property
    def is_voter(self) -> bool:
        return self.voters.is_voter(self.local)

    @property
    def high_watermark(self) -> int:
        return self.log.high_watermark

    @property
    def last_voters_offset(self) -> int:
        """The offset of the newest VotersRecord (-1: the set did not come from the log)."""
        return self._voters[-1][0]

    def voters_at(self, offset: int) -> VoterSet:
        """The voter set in force for a snapshot ending at `offset` (its last VotersRecord
        below it), as Kafka's voterSetAtOffset."""
        found = self._voters[0][1]
        for at, voters in self._voters:
            if at < offset:
                found = voters
        return found

    def endpoint_of(self, node_id: int) -> tuple[str, int] | None:
        """Where to reach a node on the raft listener: a voter, a leader that told us, or a
        bootstrap server."""
        return self._endpoint(node_id)

    @property
    def next_offset(self) -> int:
        """The offset `append` gives its next record (the log end plus what lingers)."""
        return self.log.end_offset + len(self._pending)

    def next_deadline(self) -> float:
        """When `poll` must run next (absolute ms) if no event comes first; the shell also
        calls `poll` after every event it hands in, which sends what became due."""
        s = self.state
        times = [self._linger_deadline]
        times.extend(p.deadline for p in self._parked)
        for peer in self._peers.values():
            if peer.in_flight is not None:
                times.append(peer.sent_ms + self.config.request_timeout_ms)
            elif peer.backoff_until > self.now:
                times.append(peer.backoff_until)
        if isinstance(s, Leader):
            times.append(s.begin_epoch_deadline)
            if len(self.voters.voters) > 1:  # a lone voter has no quorum to check
                times.append(s.check_quorum_deadline)
        elif isinstance(s, Follower):
            times.append(s.fetch_deadline)
        else:
            times.append(s.election_deadline)
        return min(times)

    # ===== events ============================================================================
    def poll(self, now_ms: float) -> list[Action]:
        """Timers: elections, fetch timeouts, lingering appends, request timeouts, parked
        fetches; then whatever this role sends."""
        self.now = now_ms
        timeout = self.config.request_timeout_ms
        for peer in self._peers.values():
            if peer.in_flight is not None and now_ms >= peer.sent_ms + timeout:
                peer.in_flight = None
                peer.backoff_until = now_ms + self.config.retry_backoff_ms
        expired = [p for p in self._parked if now_ms >= p.deadline]
        self._parked = [p for p in self._parked if p not in expired]
        for fetch in expired:
            self._complete_fetch(fetch)
        for _ in range(8):  # a transition's new role acts at once (Kafka polls again at 0)
            s = self.state
            self._poll_state(s, now_ms)
            if self.state is s:
                break
        return self._take()

    def _poll_state(self, s: State, now_ms: float) -> None:
        if isinstance(s, Leader):
            self._poll_leader(s)
        elif isinstance(s, (Candidate, Prospective)):
            if now_ms >= s.election_deadline:
                if isinstance(s, Candidate):
                    self._to_prospective()
                else:
                    self._after_prospective_loss(s)
            else:
                self._send_votes(s)
        elif isinstance(s, Follower):
            if self.is_voter and now_ms >= s.fetch_deadline:
                self._to_prospective()
            elif not self.is_voter and now_ms >= s.fetch_deadline:
                self._fetch_bootstrap()
            else:
                self._send_fetch(s)
        elif isinstance(s, Unattached):
            if self.is_voter and now_ms >= s.election_deadline:
                self._to_prospective()
            else:
                self._fetch_bootstrap()
        elif isinstance(s, Resigned):
            for voter in sorted(s.unacked):
                if voter in self.voters.voters:
                    self._send(voter, lambda v=voter: m.end_quorum_epoch_request(
                        self.cluster_id, s.epoch, self.node_id, s.preferred_successors,
                        self.endpoints))
            if now_ms >= s.election_deadline:
                self._to_unattached(s.epoch + 1, None)

    def handle_request(self, token: Any, request: Any, version: int, now_ms: float
                       ) -> list[Action]:
        """A Raft request from a peer; its answer comes as a `Respond` with `token` (now, or
        later for a Fetch that waits for new records)."""
        self.now = now_ms
        self._version = version
        if request.cluster_id is not None and request.cluster_id != self.cluster_id:
            self._respond_top_error(token, request, INCONSISTENT_CLUSTER_ID)
        elif self.declared_lost and (lost := self._lost_sender(request, version)) is not None:
            self._refuse_lost(token, request, lost)
        elif isinstance(request, VoteRequest):
            self._on_vote_request(token, request)
        elif isinstance(request, BeginQuorumEpochRequest):
            self._on_begin_quorum_epoch(token, request)
        elif isinstance(request, EndQuorumEpochRequest):
            self._on_end_quorum_epoch(token, request)
        elif isinstance(request, FetchRequest):
            self._on_fetch(token, request, version)
        elif isinstance(request, FetchSnapshotRequest):
            self._on_fetch_snapshot(token, request)
        else:
            raise TypeError(f"not a Raft request: {type(request).__name__}")
        return self._take()

    def handle_response(self, source: int, correlation_id: int, response: Any, now_ms: float
                        ) -> list[Action]:
        """The answer to a `Send`; one that no longer matches the request in flight to that
        node (answered late, after a state change or a timeout) is dropped."""
        self.now = now_ms
        peer = self._peers.get(source)
        if peer is None or peer.in_flight != correlation_id:
            return self._take()
        peer.in_flight = None
        if isinstance(response, VoteResponse):
            ok = self._on_vote_response(source, response)
        elif isinstance(response, BeginQuorumEpochResponse):
            ok = self._on_begin_quorum_epoch_response(source, response)
        elif isinstance(response, EndQuorumEpochResponse):
            ok = self._on_end_quorum_epoch_response(source, response)
        elif isinstance(response, FetchResponse):
            ok = self._on_fetch_response(response)
        elif isinstance(response, FetchSnapshotResponse):
            ok = self._on_fetch_snapshot_response(response)
        else:
            raise TypeError(f"not a Raft response: {type(response).__name__}")
        if not ok:
            peer.backoff_until = now_ms + self.config.retry_backoff_ms
        return self._take()

    def request_failed(self, destination: int, correlation_id: int, now_ms: float
                       ) -> list[Action]:
        """A request got no answer (connection lost, refused): retry after a backoff."""
        self.now = now_ms
        peer = self._peers.get(destination)
        if peer is not None and peer.in_flight == correlation_id:
            peer.in_flight = None
            peer.backoff_until = now_ms + self.config.retry_backoff_ms
        return self._take()

    def on_flushed(self, offset: int, now_ms: float) -> list[Action]:
        """The oldest outstanding `Flush` completed."""
        self.now = now_ms
        if not self._flushes:
            raise ValueError(f"on_flushed({offset}) without a Flush outstanding")
        expected, generation = self._flushes.popleft()
        if expected != offset:
            raise ValueError(f"on_flushed({offset}) but the oldest Flush is to {expected}")
        if generation == self._generation:
            self.log.flushed_offset = max(self.log.flushed_offset,
                                          min(offset, self.log.end_offset))
        s = self.state
        if isinstance(s, Leader):
            self._update_leader_end()
        elif isinstance(s, Follower):
            self._send_fetch(s)
        return self._take()

    def on_snapshot(self, snapshot_id: tuple[int, int], *, delete_before: bool,
                    now_ms: float) -> list[Action]:
        """The state machine wrote a snapshot (its end offset at most the high watermark)."""
        self.now = now_ms
        if snapshot_id[0] > self.log.high_watermark:
            raise ValueError(f"snapshot {snapshot_id} is past the high watermark "
                             f"{self.log.high_watermark}")
        self.log.snapshot_taken(snapshot_id, delete_before=delete_before)
        return self._take()

    def append(self, records: list[bytes], now_ms: float) -> int:
        """Accept records as leader (all in one batch, never split); they are written after
        controller.quorum.append.linger.ms. Returns the offset of the first; the caller sees
        them committed when a `Committed` action passes the last one. The actions are taken
        by the next call (usually `poll` at `next_deadline()`)."""
        self.now = now_ms
        s = self.state
        if not isinstance(s, Leader) or s.resign_requested:
            raise NotLeaderError(f"node {self.node_id} is not the leader (epoch {s.epoch})")
        count = len(records)
        if not count:
            raise ValueError("append needs at least one record")
        size = sum(map(len, records)) + 16 * count
        if size > MAX_BATCH_BYTES:
            raise ValueError(f"{count} records of {size} bytes exceed one batch")
        pending = self._pending
        if pending and (self._pending_control or self._pending_bytes + size > MAX_BATCH_BYTES):
            self._drain(s)
            pending = self._pending
        base = self.log.end_offset + len(pending)
        if not pending:
            self._linger_deadline = now_ms + self.config.append_linger_ms
        if count == 1:
            pending.append((None, records[0]))
        else:
            pending.extend([(None, r) for r in records])
        self._pending_bytes += size
        return base

    def resign(self, now_ms: float) -> list[Action]:
        """Graceful shutdown of a leader: EndQuorumEpoch to the voters, best successor first."""
        self.now = now_ms
        s = self.state
        if isinstance(s, Leader):
            self._to_resigned(s)
        return self._take()

    # ----- KIP-853: the leader's decisions on voter changes ------------------------------------
    def voter_change_error(self, new_voter_id: int | None = None) -> int:
        """Kafka's checks before any voter change, in its order: a leader (else
        NOT_LEADER_OR_FOLLOWER) with a high watermark, i.e. its epoch start committed (else
        REQUEST_TIMED_OUT), kraft.version 1 (else UNSUPPORTED_VERSION), no VotersRecord above
        the high watermark (one change at a time: else REQUEST_TIMED_OUT); for an addition,
        an id not yet a voter (else DUPLICATE_VOTER)."""
        s = self.state
        if not isinstance(s, Leader) or s.resign_requested:
            return NOT_LEADER_OR_FOLLOWER
        if s.high_watermark is None:
            return REQUEST_TIMED_OUT
        if self.kraft_version < 1:
            return UNSUPPORTED_VERSION
        if self._voters[-1][0] >= self.log.high_watermark:
            return REQUEST_TIMED_OUT
        if new_voter_id is not None and new_voter_id in self.voters.voters:
            return DUPLICATE_VOTER
        return NONE

    def add_voter(self, node: VoterNode, now_ms: float) -> tuple[int, list[Action]]:
        """AddRaftVoter at the leader once the new voter's ApiVersions answered (its
        kraft.version range in `node.kraft_versions`): an error code, or NONE with the
        VotersRecord appended (the change is done once it is committed). The new voter must
        support the finalized kraft.version (else INVALID_REQUEST) and be an observer that
        has caught up with the high watermark and fetched within the last hour (Kafka's
        isReplicaCaughtUp; else REQUEST_TIMED_OUT)."""
        self.now = now_ms
        error = self.voter_change_error(node.key.id)
        if error == NONE:
            low, high = node.kraft_versions
            progress = self._leader_state().observers.get(node.key)
            if not low <= self.kraft_version <= high:
                error = INVALID_REQUEST
            elif progress is None or progress.last_caught_up_ms < 0 or (
                    progress.last_fetch_ms <= now_ms - CAUGHT_UP_FETCH_MS):
                error = REQUEST_TIMED_OUT  # Kafka waits for the observer to catch up first
            else:
                self._append_voters(self.voters.add(node))  # type: ignore[arg-type]
        return error, self._take()

    def remove_voter(self, key: ReplicaKey, now_ms: float) -> tuple[int, list[Action]]:
        """RemoveRaftVoter at the leader: the voter of exactly this id and directory (else
        VOTER_NOT_FOUND; never the last one). A leader that removed itself resigns once the
        change is committed."""
        self.now = now_ms
        error = self.voter_change_error()
        if error == NONE:
            new = self.voters.remove(key)
            if new is None:
                error = VOTER_NOT_FOUND
            else:
                self._append_voters(new)
        return error, self._take()

    def describe_quorum(self, request: Any, version: int, now_ms: float) -> Any:
        """DescribeQuorum's answer from this node's Raft state (`describe.py`): the leader's
        view of every voter and observer, NOT_LEADER_OR_FOLLOWER on any other node."""
        self.now = now_ms
        if not describe.names_metadata_partition(request):
            return describe.unknown_partitions(request)
        s = self.state
        if not isinstance(s, Leader):
            return describe.not_leader()
        return describe.leader_answer(s, self.voters, self.log.end_offset, version,
                                      int(now_ms))

    def update_voter(self, node: VoterNode, now_ms: float) -> tuple[int, list[Action]]:
        """UpdateRaftVoter at the leader (a voter's new endpoints or kraft.version range):
        the range must hold the finalized kraft.version and the endpoints this quorum's
        listener (else INVALID_REQUEST), the voter must be one of exactly this id and
        directory (else VOTER_NOT_FOUND). Answered at once, as Kafka does: the VotersRecord
        is appended, not waited for. At kraft.version 0 (static voters) nothing is written:
        the update is kept in memory (`volatile_voters`) and a static voter, which has no
        directory id, matches by its id alone."""
        self.now = now_ms
        if self.kraft_version < 1:
            return self._update_static_voter(node), self._take()
        error = self.voter_change_error()
        if error == NONE:
            low, high = node.kraft_versions
            old = self.voters.voters.get(node.key.id)
            if not low <= self.kraft_version <= high or node.endpoint(self.listener) is None:
                error = INVALID_REQUEST
            elif old is None or old.key != node.key:
                error = VOTER_NOT_FOUND
            else:
                self._append_voters(self.voters.with_voter(node))  # type: ignore[arg-type]
        return error, self._take()

    def _update_static_voter(self, node: VoterNode) -> int:
        s = self.state
        if not isinstance(s, Leader) or s.resign_requested:
            return NOT_LEADER_OR_FOLLOWER
        if s.high_watermark is None:
            return REQUEST_TIMED_OUT
        low, high = node.kraft_versions
        old = self.voters.voters.get(node.key.id)
        if not low <= self.kraft_version <= high or node.endpoint(self.listener) is None:
            return INVALID_REQUEST
        if old is None or old.key.directory_id not in (None, node.key.directory_id):
            return VOTER_NOT_FOUND
        self.volatile_voters[node.key.id] = node
        return NONE

    def _append_voters(self, voters: VoterSet) -> None:
        s = self._leader_state()
        self._drain(s)
        offset = self.next_offset
        self._pending = [(control_key(ControlType.KRAFT_VOTERS),
                          voters.to_record().encode(0))]
        self._pending_control = True
        self._linger_deadline = self.now
        self._voters.append((offset, voters))
        self._sync_replicas(s)

    # ===== requests ==========================================================================
    def _respond_top_error(self, token: Any, request: Any, error: int) -> None:
        builders = {
            VoteRequest: lambda: m.vote_response(0, 0, -1, False, None, error),
            BeginQuorumEpochRequest: lambda: m.begin_quorum_epoch_response(0, 0, -1, None,
                                                                           error),
            EndQuorumEpochRequest: lambda: m.end_quorum_epoch_response(0, 0, -1, None, error),
            FetchRequest: lambda: m.fetch_response(error=0, epoch=0, leader_id=-1,
                                                   high_watermark=-1, log_start_offset=-1,
                                                   leader=None, top_error=error),
            FetchSnapshotRequest: lambda: m.fetch_snapshot_response(
                error=0, epoch=0, leader_id=-1, leader=None, top_error=error),
        }
        build = builders.get(type(request))
        if build is None:
            raise TypeError(f"not a Raft request: {type(request).__name__}")
        self._out.append(Respond(token, build()))

    def _lost_sender(self, request: Any, version: int) -> ReplicaKey | None:
        """The sender's key when a recovery declared its directory lost (only the requests
        that name the sender's directory: Vote, Fetch, FetchSnapshot)."""
        if isinstance(request, VoteRequest):
            part = m.partition(request)
            key = None if part is None else ReplicaKey(
                part.replica_id, m.directory(part.replica_directory_id))
        elif isinstance(request, FetchRequest):
            part = m.partition(request, fetch=True)
            key = None if part is None else ReplicaKey(
                m.fetch_replica_id(request, version),
                m.directory(getattr(part, "replica_directory_id", m.ZERO_UUID)))
        elif isinstance(request, FetchSnapshotRequest):
            parts = [p for t in request.topics for p in t.partitions]
            key = None if len(parts) != 1 else ReplicaKey(
                request.replica_id, m.directory(parts[0].replica_directory_id))
        else:
            return None
        return key if key in self.declared_lost else None

    def _refuse_lost(self, token: Any, request: Any, key: ReplicaKey) -> None:
        """INCONSISTENT_VOTER_SET at the top level (the sender is no voter this node accepts),
        nothing else; the first of each kind from each directory is logged."""
        kind = type(request).__name__.removesuffix("Request")
        if (key, kind) not in self._lost_noted:
            self._lost_noted.add((key, kind))
            self._note("warning", f"refusing {kind} from replica {key.id} (directory "
                       f"{_directory_text(key)}): a quorum recovery declared that directory "
                       "lost; that controller may come back only on a newly formatted "
                       "directory (further refusals are not logged)")
        self._respond_top_error(token, request, INCONSISTENT_VOTER_SET)

    def _leader_node(self, since: int = 1) -> tuple[int, str, int] | None:
        """The leader's endpoint for an answer's NodeEndpoints (in versions >= `since`)."""
        leader = self.state.leader_id
        if self._version < since:
            return None
        if leader is None:
            return None
        endpoint = self._endpoint(leader)
        return None if endpoint is None else (leader, endpoint[0], endpoint[1])

    def _on_vote_request(self, token: Any, request: VoteRequest) -> None:
        part = m.partition(request)
        if part is None:
            return self._respond_top_error(token, request, INVALID_REQUEST)
        pre_vote = part.pre_vote
        illegal = (part.last_offset_epoch > part.replica_epoch if pre_vote
                   else part.last_offset_epoch >= part.replica_epoch)
        error = NONE
        if part.last_offset < 0 or part.last_offset_epoch < 0 or illegal:
            error = INVALID_REQUEST
        else:
            error = self._voter_only_error(part.replica_id, part.replica_epoch)
        if error == NONE:
            if part.replica_epoch > self.epoch:
                self._to_unattached(part.replica_epoch, None)
            if not self._valid_voter_key(request.voter_id, part.voter_directory_id):
                error = INVALID_VOTER_KEY
        granted = False
        if error == NONE:
            candidate = ReplicaKey(part.replica_id, m.directory(part.replica_directory_id))
            up_to_date = ((part.last_offset_epoch, part.last_offset)
                          >= (self.log.last_fetched_epoch, self.log.end_offset))
            granted = self.state.can_grant_vote(candidate, up_to_date, pre_vote)
            s = self.state
            if granted and not pre_vote and isinstance(s, (Unattached, Prospective)) \
                    and s.voted is None:
                s.voted = candidate
                s.election_deadline = self._election_deadline()
                self._durable(s)
        self._out.append(Respond(token, m.vote_response(
            error, self.epoch, self._leader_or_sentinel(), granted, self._leader_node())))

    def _on_begin_quorum_epoch(self, token: Any, request: BeginQuorumEpochRequest) -> None:
        part = m.partition(request)
        if part is None:
            return self._respond_top_error(token, request, INVALID_REQUEST)
        error = self._voter_only_error(part.leader_id, part.leader_epoch)
        if error == NONE:
            self._learn_endpoints(part.leader_id, request.leader_endpoints)
            self._maybe_transition(part.leader_id, part.leader_epoch)
            if not self._valid_voter_key(request.voter_id, part.voter_directory_id):
                error = INVALID_VOTER_KEY
        self._out.append(Respond(token, m.begin_quorum_epoch_response(
            error, self.epoch, self._leader_or_sentinel(), self._leader_node())))

    def _on_end_quorum_epoch(self, token: Any, request: EndQuorumEpochRequest) -> None:
        part = m.partition(request)
        if part is None:
            return self._respond_top_error(token, request, INVALID_REQUEST)
        error = self._voter_only_error(part.leader_id, part.leader_epoch)
        if error == NONE:
            self._learn_endpoints(part.leader_id, request.leader_endpoints)
            self._maybe_transition(part.leader_id, part.leader_epoch)
            s = self.state
            if isinstance(s, Follower) and s.leader_id == part.leader_id:
                if part.preferred_candidates:
                    keys = [ReplicaKey(c.candidate_id, m.directory(c.candidate_directory_id))
                            for c in part.preferred_candidates]
                else:
                    keys = [ReplicaKey(i) for i in part.preferred_successors]
                s.fetch_deadline = self.now + self._end_epoch_backoff(keys)
        self._out.append(Respond(token, m.end_quorum_epoch_response(
            error, self.epoch, self._leader_or_sentinel(), self._leader_node())))

    def _end_epoch_backoff(self, candidates: list[ReplicaKey]) -> int:
        """How long a follower waits before standing: by its place among the successors the
        resigning leader named (Kafka's strict exponential backoff)."""
        position = 0
        for key in candidates:
            if key.id == self.node_id and key.directory_id in (None, self.local.directory_id):
                break
            position += 1
        total = len(candidates)
        max_ms = self.config.election_backoff_max_ms
        if position == 0:
            return 0
        if position >= total:
            return max_ms
        base = max_ms >> (total - 1)
        return min(max_ms, base << (position - 1))

    def _on_fetch(self, token: Any, request: FetchRequest, version: int) -> None:
        part = m.partition(request, fetch=True)
        if part is None:
            return self._respond_top_error(token, request, INVALID_REQUEST)
        if (request.max_wait_ms < 0 or part.fetch_offset < 0 or part.last_fetched_epoch < 0
                or part.last_fetched_epoch > part.current_leader_epoch):
            self._out.append(Respond(token, self._empty_fetch(INVALID_REQUEST)))
            return
        replica = ReplicaKey(m.fetch_replica_id(request, version),
                             m.directory(getattr(part, "replica_directory_id", m.ZERO_UUID)))
        parked = _ParkedFetch(token, part, version, replica, self.now + request.max_wait_ms)
        response, read_from = self._try_fetch(parked)
        answered = response.responses[0].partitions[0] if response.responses else None
        if (answered is None or answered.error_code != NONE or request.max_wait_ms == 0
                or answered.diverging_epoch.epoch >= 0 or answered.snapshot_id.epoch >= 0
                or (read_from is not None and read_from < self.log.end_offset)
                or (version >= 18 and part.high_watermark < answered.high_watermark)):
            self._out.append(Respond(token, response, read_from, MAX_FETCH_BYTES))
        else:
            self._parked.append(parked)

    def _empty_fetch(self, error: int) -> FetchResponse:
        """An error answer: Kafka's buildEmptyFetchResponse gives no high watermark (-1)."""
        return m.fetch_response(
            error=error, epoch=self.epoch, leader_id=self._leader_or_sentinel(),
            high_watermark=-1, log_start_offset=self.log.start_offset,
            leader=self._leader_node(17))

    def _try_fetch(self, fetch: _ParkedFetch) -> tuple[FetchResponse, int | None]:
        part = fetch.part
        error = self._leader_only_error(part.current_leader_epoch)
        if error != NONE:
            return self._empty_fetch(error), None
        s = self._leader_state()
        latest = self.log.snapshots[-1] if self.log.snapshots else None
        if part.fetch_offset == 0 and latest is not None and latest != BOOTSTRAP_SNAPSHOT:
            kind, where = "snapshot", latest
        else:
            kind, where = self.log.validate(part.fetch_offset, part.last_fetched_epoch)
        read_from = None
        if kind == "valid":
            read_from = part.fetch_offset
            self._replica_fetched(s, fetch.replica, part.fetch_offset)
        response = m.fetch_response(
            error=NONE, epoch=self.epoch, leader_id=self.node_id,
            high_watermark=-1 if s.high_watermark is None else s.high_watermark,
            log_start_offset=self.log.start_offset, leader=self._leader_node(17),
            diverging=where if kind == "diverging" else None,
            snapshot=where if kind == "snapshot" else None)
        return response, read_from

    def _complete_fetch(self, fetch: _ParkedFetch) -> None:
        self._version = fetch.version
        response, read_from = self._try_fetch(fetch)
        self._out.append(Respond(fetch.token, response, read_from, MAX_FETCH_BYTES))

    def _on_fetch_snapshot(self, token: Any, request: FetchSnapshotRequest) -> None:
        topics = request.topics
        if len(topics) != 1 or len(topics[0].partitions) != 1:
            return self._respond_top_error(token, request, INVALID_REQUEST)
        part = topics[0].partitions[0]
        if topics[0].name != m.TOPIC or part.partition != m.PARTITION:
            # Named back as asked, with no CurrentLeader (only NodeEndpoints), as Kafka does.
            response = m.fetch_snapshot_response(
                error=UNKNOWN_TOPIC_OR_PARTITION, epoch=0, leader_id=0,
                leader=self._leader_node())
            response.topics[0].name = topics[0].name
            response.topics[0].partitions[0].index = part.partition
            self._out.append(Respond(token, response))
            return
        error = self._leader_only_error(part.current_leader_epoch)
        sid = (part.snapshot_id.end_offset, part.snapshot_id.epoch)
        if error == NONE:
            s = self._leader_state()
            replica = ReplicaKey(request.replica_id, m.directory(part.replica_directory_id))
            self._check_quorum_fetched(s, replica)
            if sid == BOOTSTRAP_SNAPSHOT or sid not in self.log.snapshots:
                error = SNAPSHOT_NOT_FOUND
        if error != NONE:
            self._out.append(Respond(token, m.fetch_snapshot_response(
                error=error, epoch=self.epoch, leader_id=self._leader_or_sentinel(),
                leader=self._leader_node())))
            return
        response = m.fetch_snapshot_response(
            error=NONE, epoch=self.epoch, leader_id=self.node_id, leader=self._leader_node(),
            snapshot_id=sid, position=part.position)
        self._out.append(Respond(token, response, snapshot=(
            sid, part.position, min(request.max_bytes, MAX_FETCH_BYTES))))

    # ===== responses =========================================================================
    def _common(self, error: int, leader_id: int, epoch: int) -> bool | None:
        """Kafka's maybeHandleCommonResponse: True/False when the response is done with."""
        leader = None if leader_id < 0 else leader_id
        if epoch < self.epoch or error == UNKNOWN_LEADER_EPOCH:
            return True
        if epoch > self.epoch or error in (FENCED_LEADER_EPOCH, NOT_LEADER_OR_FOLLOWER):
            self._maybe_transition(leader, epoch)
            return True
        if leader is not None and self.state.leader_id is None:
            self._maybe_transition(leader, epoch)
            return None if error == NONE else True
        if error == BROKER_NOT_AVAILABLE:
            return False
        if error == INVALID_VOTER_KEY:
            return True
        if error == INVALID_REQUEST:
            self._note("error", "a peer answered INVALID_REQUEST to this node's request")
            return False
        return None

    def _on_vote_response(self, source: int, response: VoteResponse) -> bool:
        s = self.state
        if response.error_code == UNSUPPORTED_VERSION and isinstance(s, Prospective):
            self._to_candidate()  # a voter without pre-vote: stand at once, as Kafka does
            return True
        if response.error_code != NONE:
            return False
        part = m.partition(response)
        if part is None:
            return False
        self._learn_node_endpoints(response.node_endpoints)
        handled = self._common(part.error_code, part.leader_id, part.leader_epoch)
        if handled is not None:
            return handled
        if part.error_code != NONE:
            return False
        s = self.state
        if isinstance(s, (Prospective, Candidate)):
            s.votes.record(source, part.vote_granted)
            if s.votes.is_vote_granted():
                if isinstance(s, Prospective):
                    self._to_candidate()
                else:
                    self._to_leader()
            elif s.votes.is_vote_rejected() and isinstance(s, Prospective):
                self._after_prospective_loss(s)
        return True

    def _on_begin_quorum_epoch_response(self, source: int,
                                        response: BeginQuorumEpochResponse) -> bool:
        if response.error_code != NONE:
            return False
        part = m.partition(response)
        if part is None:
            return False
        self._learn_node_endpoints(response.node_endpoints)
        handled = self._common(part.error_code, part.leader_id, part.leader_epoch)
        if handled is not None:
            return handled
        s = self.state
        if part.error_code == NONE and isinstance(s, Leader):
            progress = s.replicas.get(source)
            if progress is not None:
                progress.acknowledged = True
        return part.error_code == NONE

    def _on_end_quorum_epoch_response(self, source: int,
                                      response: EndQuorumEpochResponse) -> bool:
        if response.error_code != NONE:
            return False
        part = m.partition(response)
        if part is None:
            return False
        handled = self._common(part.error_code, part.leader_id, part.leader_epoch)
        if handled is not None:
            return handled
        s = self.state
        if part.error_code == NONE and isinstance(s, Resigned):
            s.unacked.discard(source)
        return part.error_code == NONE

    def _on_fetch_response(self, response: FetchResponse) -> bool:
        if response.error_code != NONE:
            return False
        part = m.partition(response, fetch=True)
        if part is None:
            return False
        self._learn_node_endpoints(response.node_endpoints)
        handled = self._common(part.error_code, part.current_leader.leader_id,
                               part.current_leader.leader_epoch)
        if handled is not None:
            return handled
        s = self.state
        if not isinstance(s, Follower) or part.error_code != NONE:
            return part.error_code == NONE
        if part.diverging_epoch.epoch >= 0:
            cut = self.log.truncation_offset(part.diverging_epoch.epoch,
                                             part.diverging_epoch.end_offset)
            if cut < self.log.high_watermark:
                return self._anomaly(f"leader {s.leader_id} asked to truncate to {cut}, below "
                                     f"the high watermark {self.log.high_watermark}")
            self._truncate(cut)
        elif part.snapshot_id.epoch >= 0 or part.snapshot_id.end_offset >= 0:
            sid = (part.snapshot_id.end_offset, part.snapshot_id.epoch)
            if min(sid) < 0:
                self._note("error", f"leader sent the snapshot id {sid}")
                return False
            if self.log.start_offset == self.log.end_offset == sid[0] \
                    and sid in self.log.snapshots:
                pass  # installed already (a fetch sent before the install was answered late)
            elif sid in self.log.snapshots and self.log.end_offset <= sid[0]:
                self._install(sid)
            else:
                s.fetching_snapshot = (sid, 0)
        else:
            if part.records and not self._append_fetched(s, part.records):
                return False
            if part.high_watermark >= 0:
                self._follower_high_watermark(min(self.log.end_offset, part.high_watermark))
        s.has_fetched = True
        s.fetch_deadline = self.now + self.config.fetch_timeout_ms
        return True

    def _on_fetch_snapshot_response(self, response: FetchSnapshotResponse) -> bool:
        if response.error_code != NONE:
            return False
        topics = response.topics
        if len(topics) != 1 or len(topics[0].partitions) != 1 or topics[0].name != m.TOPIC:
            return False
        part = topics[0].partitions[0]
        self._learn_node_endpoints(response.node_endpoints)
        handled = self._common(part.error_code, part.current_leader.leader_id,
                               part.current_leader.leader_epoch)
        if handled is not None:
            return handled
        s = self.state
        if not isinstance(s, Follower) or s.fetching_snapshot is None:
            return True
        if part.error_code in (SNAPSHOT_NOT_FOUND, POSITION_OUT_OF_RANGE, OFFSET_OUT_OF_RANGE):
            s.fetching_snapshot = None  # fetch records again; the leader names a snapshot
            return True
        if part.error_code != NONE:
            return False
        sid, position = s.fetching_snapshot
        if (part.snapshot_id.end_offset, part.snapshot_id.epoch) != sid \
                or part.position != position:
            return self._anomaly(f"snapshot chunk {part.snapshot_id} at {part.position}, "
                                 f"expected {sid} at {position}")
        data = bytes(part.unaligned_records or b"")
        self._out.append(WriteSnapshotChunk(sid, position, data))
        position += len(data)
        if position >= part.size:
            s.fetching_snapshot = None
            self._install(sid)
        else:
            s.fetching_snapshot = (sid, position)
        s.fetch_deadline = self.now + self.config.fetch_timeout_ms
        return True

    def _install(self, sid: tuple[int, int]) -> None:
        self._out.append(InstallSnapshot(sid))
        self._generation += 1
        self.log.reset_to_snapshot(sid)
        self._voters = [(-1, self.voters)]
        self._out.append(Committed(self.log.high_watermark))

    # ===== follower log ======================================================================
    def _append_fetched(self, s: Follower, records: bytes) -> bool:
        spans: list[tuple[int, int, int]] = []
        voters: list[tuple[int, VoterSet]] = []
        expected = self.log.end_offset
        last_epoch = self.log.last_fetched_epoch
        try:
            for batch in iter_record_batches(bytes(records)):
                epoch = batch.partition_leader_epoch
                if batch.base_offset != expected or epoch > s.epoch or epoch < last_epoch:
                    self._note("error", f"fetched batch at {batch.base_offset} epoch {epoch} "
                               f"does not follow offset {expected} epoch {last_epoch}")
                    return False
                spans.append((batch.base_offset, batch.last_offset, epoch))
                if batch.is_control:
                    for record in batch.records():
                        kind, value = decode_control_record(record.key, record.value)
                        if kind == ControlType.KRAFT_VOTERS:
                            voters.append((record.offset, VoterSet.from_record(value)))
                        elif kind == ControlType.KRAFT_VERSION:
                            self.kraft_version = max(self.kraft_version, value.k_raft_version)
                expected = batch.last_offset + 1
                last_epoch = epoch
        except DecodeError as exc:
            self._note("error", f"fetched records do not decode: {exc}")
            return False
        if not spans:
            return True
        self._out.append(AppendFetched(records, spans[0][0], expected))
        for base, last, epoch in spans:
            self.log.appended(base, last, epoch)
        self._voters.extend(voters)
        self._flush()
        return True

    def _truncate(self, offset: int) -> None:
        if offset >= self.log.end_offset:
            return
        self._out.append(Truncate(offset))
        self._generation += 1
        self.log.truncate_to(offset)
        self._voters = [v for v in self._voters if v[0] < offset] or self._voters[:1]

    def _follower_high_watermark(self, hwm: int) -> None:
        if hwm > self.log.high_watermark:
            self.log.high_watermark = hwm
            self._out.append(Committed(hwm))
        elif hwm < self.log.high_watermark and isinstance(self.state, Follower):
            self._anomaly(f"leader's high watermark {hwm} is below ours "
                          f"{self.log.high_watermark}")

    def _send_fetch(self, s: Follower) -> None:
        if self.log.flushed_offset < self.log.end_offset and self.is_voter:
            return  # the leader counts the fetch offset as on disk: fsync first
        if s.fetching_snapshot is not None:
            sid, position = s.fetching_snapshot
            self._send(s.leader_id, lambda: m.fetch_snapshot_request(
                self.cluster_id, self.local, s.epoch, sid, position, MAX_FETCH_BYTES))
        else:
            self._send(s.leader_id, self._fetch_request)

    def _fetch_request(self) -> FetchRequest:
        s = self.state
        hwm = self.log.high_watermark if isinstance(s, Follower) else -1
        return m.fetch_request(self.cluster_id, self.local, self.epoch, self.log.end_offset,
                               self.log.last_fetched_epoch, hwm,
                               self.config.fetch_max_wait_ms, MAX_FETCH_BYTES)

    def _fetch_bootstrap(self) -> None:
        """Find the leader by fetching from any bootstrap server, or any voter when none is
        configured (one request at a time)."""
        if any(p.in_flight is not None for p in self._peers.values()):
            return
        targets = sorted(self.bootstrap) if self.bootstrap else sorted(self.voters.ids)
        ready = [v for v in targets if v != self.node_id
                 and self._peer(v).backoff_until <= self.now]
        if ready:
            target = ready[self.rng.randrange(len(ready))]
            self._send(target, self._fetch_request)
            self._peer(target).backoff_until = self.now + self.config.retry_backoff_ms

    # ===== leader ============================================================================
    def _leader_state(self) -> Leader:
        s = self.state
        assert isinstance(s, Leader)
        return s

    def _poll_leader(self, s: Leader) -> None:
        if len(self.voters.voters) > 1 and self.now >= s.check_quorum_deadline:
            self._note("info", "no majority of voters fetched within the check-quorum timeout")
            self._to_resigned(s)
            return
        if s.resign_requested:
            self._to_resigned(s)
            return
        if self._pending and self.now >= self._linger_deadline:
            self._drain(s)
        if self.now >= s.begin_epoch_deadline:
            for voter in sorted(self.voters.ids - {self.node_id}):
                key = self.voters.key(voter)
                self._send(voter, lambda k=key: m.begin_quorum_epoch_request(
                    self.cluster_id, s.epoch, self.node_id, self.endpoints, k))
            s.begin_epoch_deadline = self.now + self.config.begin_quorum_epoch_interval_ms

    def _drain(self, s: Leader) -> None:
        if not self._pending:
            return
        base = self.log.end_offset
        records = tuple(self._pending)
        self._out.append(AppendBatch(base, s.epoch, records, self._pending_control,
                                     int(self.now)))
        self.log.appended(base, base + len(records) - 1, s.epoch)
        self._pending = []
        self._pending_bytes = 0
        self._pending_control = False
        self._linger_deadline = NEVER
        self._flush()
        ready = [p for p in self._parked if p.part.fetch_offset < self.log.end_offset]
        self._parked = [p for p in self._parked if p not in ready]
        for fetch in ready:
            self._complete_fetch(fetch)

    def _flush(self) -> None:
        self._flushes.append((self.log.end_offset, self._generation))
        self._out.append(Flush(self.log.end_offset))

    def _update_leader_end(self) -> None:
        s = self._leader_state()
        self._sync_replicas(s)
        progress = s.replicas.get(self.node_id)
        if progress is not None:
            progress.end_offset = self.log.flushed_offset
        self._maybe_update_high_watermark(s)

    def _sync_replicas(self, s: Leader) -> None:
        """Voter progress follows the latest voter set (KIP-853): new voters start unknown."""
        voters = self.voters
        for vid in list(s.replicas):
            if vid not in voters.voters:
                old = s.replicas.pop(vid)
                s.observers[old.key] = old
        for vid, node in voters.voters.items():
            if vid not in s.replicas:
                moved = s.observers.pop(node.key, None)
                s.replicas[vid] = moved or ReplicaProgress(node.key)
        s.voters = voters.ids

    def _replica_fetched(self, s: Leader, replica: ReplicaKey, offset: int) -> None:
        if replica.id < 0:
            return
        if replica.id == self.node_id:
            self._note("error", "a Fetch named this leader as its replica")
            return
        progress = s.replicas.get(replica.id)
        voter = progress is not None and self.voters.is_voter(replica)
        if not voter:
            progress = s.observers.setdefault(replica, ReplicaProgress(replica))
        assert progress is not None
        # LeaderState.ReplicaState.updateFollowerState: caught up now when at the leader's
        # log end; caught up as of its previous fetch when it reached the end of then. (Kafka's
        # leader flushes as it appends, so its end is what it appended; ours flushes behind.)
        now = int(self.now)
        leader_end = self.log.end_offset
        if offset >= leader_end:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, now)
        elif 0 < progress.last_fetch_leader_end <= offset:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.last_fetch_leader_end = leader_end
        progress.end_offset = offset
        progress.last_fetch_ms = max(progress.last_fetch_ms, now)
        self._check_quorum_fetched(s, replica)
        if voter:
            self._maybe_update_high_watermark(s)

    def _check_quorum_fetched(self, s: Leader, replica: ReplicaKey) -> None:
        if self.voters.is_voter(replica) and replica.id != self.node_id:
            s.fetched_voters.add(replica.id)
        majority = self.voters.majority - (1 if self.node_id in self.voters.voters else 0)
        if len(s.fetched_voters) >= majority:
            s.fetched_voters.clear()
            s.check_quorum_deadline = self.now + self.config.check_quorum_timeout_ms

    def _maybe_update_high_watermark(self, s: Leader) -> None:
        """The largest offset a majority of voters has on disk, once past the epoch start."""
        offsets = sorted((p.end_offset if p.end_offset is not None else -1
                          for vid, p in s.replicas.items() if vid in self.voters.voters),
                         reverse=True)
        if not offsets:
            return
        candidate = offsets[len(offsets) // 2]
        if candidate <= s.epoch_start_offset:
            return
        if s.high_watermark is None or candidate > s.high_watermark:
            s.high_watermark = candidate
            if candidate > self.log.high_watermark:
                self.log.high_watermark = candidate
                self._out.append(Committed(candidate))
            parked, self._parked = self._parked, []
            for fetch in parked:
                self._complete_fetch(fetch)
            if self.node_id not in self.voters.voters and self._voters[-1][0] < candidate:
                s.resign_requested = True  # removed from the voters and that is committed

    # ===== transitions =======================================================================
    def _election_deadline(self) -> float:
        if not self.is_voter:
            return NEVER
        timeout = self.config.election_timeout_ms
        return self.now + (timeout + self.rng.randrange(timeout) if timeout else 0)

    def _voted(self, election: ElectionState) -> ReplicaKey | None:
        if election.voted_id is None:
            return None
        return ReplicaKey(election.voted_id, election.voted_directory_id)

    def _durable(self, state: State) -> State:
        state.voters = self.voters.ids
        version = 1 if self.kraft_version >= 1 else 0
        self._out.append(WriteQuorumState(state.election().encode(version)))
        return state

    def _set_state(self, state: State, *, durable: bool) -> None:
        old = self.state
        if durable:
            self._durable(state)
        else:
            state.voters = self.voters.ids
        self.state = state
        self._peers.clear()
        if isinstance(old, Leader) and not isinstance(state, Leader):
            self._pending, self._pending_bytes, self._pending_control = [], 0, False
            self._linger_deadline = NEVER
            parked, self._parked = self._parked, []
            for fetch in parked:
                self._version = fetch.version
                self._out.append(Respond(fetch.token, self._empty_fetch(
                    NOT_LEADER_OR_FOLLOWER)))
        if (old.epoch, old.leader_id) != (state.epoch, state.leader_id):
            self._leader_changed()

    def _leader_changed(self) -> None:
        self._out.append(LeaderChanged(self.state.leader_id, self.state.epoch))

    def _to_unattached(self, epoch: int, leader_id: int | None) -> None:
        s = self.state
        if isinstance(s, (Candidate, Unattached, Resigned)) or (
                isinstance(s, Prospective) and not s.votes.is_vote_rejected()):
            deadline = s.election_deadline if self.is_voter else NEVER
        else:
            deadline = self._election_deadline()
        voted = getattr(s, "voted", None) if epoch == s.epoch else None
        if isinstance(s, Candidate) and epoch == s.epoch:
            voted = s.local
        self._set_state(Unattached(epoch, leader_id, voted, deadline), durable=True)

    def _to_follower(self, epoch: int, leader_id: int) -> None:
        s = self.state
        voted = None
        if epoch == s.epoch:
            voted = s.local if isinstance(s, Candidate) else getattr(s, "voted", None)
        self._set_state(Follower(epoch, leader_id, voted,
                                 self.now + self.config.fetch_timeout_ms), durable=True)

    def _to_prospective(self) -> None:
        s = self.state
        if not self.is_voter:
            return
        voted = s.local if isinstance(s, Candidate) else getattr(s, "voted", None)
        prospective = Prospective(s.epoch, s.leader_id if not isinstance(s, Resigned) else None,
                                  voted, EpochElection(self.voters, self.node_id),
                                  self._election_deadline())
        self._set_state(prospective, durable=False)
        if prospective.votes.is_vote_granted():
            self._to_candidate()

    def _after_prospective_loss(self, s: Prospective) -> None:
        if s.leader_id is not None and self._endpoint(s.leader_id) is not None:
            self._to_follower(s.epoch, s.leader_id)
        else:
            self._to_unattached(s.epoch, s.leader_id)

    def _to_candidate(self) -> None:
        candidate = Candidate(self.epoch + 1, self.local, EpochElection(self.voters,
                                                                        self.node_id),
                              self._election_deadline())
        self._set_state(candidate, durable=True)
        if candidate.votes.is_vote_granted():
            self._to_leader()

    def _to_leader(self) -> None:
        s = self.state
        assert isinstance(s, Candidate)
        start = self.log.end_offset
        self.volatile_voters = {}  # a leader's own, as Kafka's LeaderState holds them
        leader = Leader(s.epoch, self.local, start, frozenset(s.votes.granted),
                        self.now + self.config.check_quorum_timeout_ms)
        self._set_state(leader, durable=True)
        self._sync_replicas(leader)
        leader.replicas[self.node_id].acknowledged = True
        voter_ids = sorted(self.voters.ids)
        message = LeaderChangeMessage(
            version=0, leader_id=self.node_id,
            voters=[LeaderChangeVoter(voter_id=v) for v in voter_ids],
            granting_voters=[LeaderChangeVoter(voter_id=v) for v in sorted(s.votes.granted)])
        records: list[tuple[bytes | None, bytes]] = [
            (control_key(ControlType.LEADER_CHANGE), message.encode(0))]
        if self.kraft_version >= 1 and self._voters[-1][0] < 0:
            records.append((control_key(ControlType.KRAFT_VERSION),
                            KRaftVersionRecord(version=0, k_raft_version=self.kraft_version
                                               ).encode(0)))
            records.append((control_key(ControlType.KRAFT_VOTERS),
                            self.voters.to_record().encode(0)))
            self._voters.append((start + 2, self.voters))
        self._pending = records
        self._pending_control = True
        self._drain(leader)

    def _to_resigned(self, s: Leader) -> None:
        others = [p for vid, p in s.replicas.items() if vid != self.node_id]
        others.sort(key=lambda p: -1 if p.end_offset is None else p.end_offset, reverse=True)
        self._set_state(Resigned(s.epoch, self.local, self._election_deadline(),
                                 set(self.voters.ids - {self.node_id}),
                                 [p.key for p in others]), durable=False)

    def _maybe_transition(self, leader_id: int | None, epoch: int) -> None:
        s = self.state
        if not self._consistent(leader_id, epoch):
            self._anomaly(f"a peer names leader {leader_id} in epoch {epoch}; this node is "
                          f"{s.role.value} with leader {s.leader_id} in epoch {s.epoch}")
            return
        if epoch > s.epoch:
            if leader_id is not None and self._endpoint(leader_id) is not None:
                self._to_follower(epoch, leader_id)
            else:
                self._to_unattached(epoch, leader_id)
        elif leader_id is not None and s.leader_id is None:
            if self._endpoint(leader_id) is not None:
                self._to_follower(epoch, leader_id)

    def _consistent(self, leader_id: int | None, epoch: int) -> bool:
        s = self.state
        if leader_id is not None and leader_id == self.node_id:
            return isinstance(s, Leader)
        return (epoch != s.epoch or leader_id is None or s.leader_id is None
                or leader_id == s.leader_id)

    # ===== helpers ===========================================================================
    def _voter_only_error(self, remote_id: int, epoch: int) -> int:
        if epoch < self.epoch:
            return FENCED_LEADER_EPOCH
        if remote_id < 0:
            return INVALID_REQUEST
        return NONE

    def _leader_only_error(self, epoch: int) -> int:
        if epoch < self.epoch:
            return FENCED_LEADER_EPOCH
        if epoch > self.epoch:
            return UNKNOWN_LEADER_EPOCH
        if not isinstance(self.state, Leader):
            return NOT_LEADER_OR_FOLLOWER
        if self.state.resign_requested:
            return BROKER_NOT_AVAILABLE
        return NONE

    def _valid_voter_key(self, voter_id: int, directory_id: Any) -> bool:
        if voter_id < 0:
            return True
        directory = m.directory(directory_id)
        return voter_id == self.node_id and directory in (None, self.local.directory_id)

    def _leader_or_sentinel(self) -> int:
        leader = self.state.leader_id
        return -1 if leader is None else leader

    def _endpoint(self, node_id: int) -> tuple[str, int] | None:
        if node_id == self.node_id:
            for name, host, port in self.endpoints:
                if name == self.listener:
                    return host, port
            return ("", 0) if not self.endpoints else None
        node = self.voters.voters.get(node_id)
        if node is not None:
            found = node.endpoint(self.listener)
            if found is not None:
                return found
        return self._leader_endpoints.get(node_id) or self.bootstrap.get(node_id)

    def _learn_endpoints(self, leader_id: int, endpoints: list[Any]) -> None:
        for e in endpoints:
            if e.name == self.listener:
                self._leader_endpoints[leader_id] = (e.host, e.port)

    def _learn_node_endpoints(self, endpoints: list[Any]) -> None:
        for e in endpoints:
            self._leader_endpoints[e.node_id] = (e.host, e.port)

    def _peer(self, node_id: int) -> _Peer:
        peer = self._peers.get(node_id)
        if peer is None:
            peer = self._peers[node_id] = _Peer()
        return peer

    def _send(self, destination: int, build: Any) -> None:
        peer = self._peer(destination)
        if peer.in_flight is not None or peer.backoff_until > self.now:
            return
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        peer.in_flight = self._correlation
        peer.sent_ms = self.now
        self._out.append(Send(destination, self._correlation, build()))

    def _send_votes(self, s: Prospective | Candidate) -> None:
        if s.votes.is_vote_rejected():
            return
        pre_vote = isinstance(s, Prospective)
        for key in s.votes.unrecorded():
            if key.id != self.node_id:
                self._send(key.id, lambda k=key: m.vote_request(
                    self.cluster_id, s.epoch, self.local, k, self.log.last_fetched_epoch,
                    self.log.end_offset, pre_vote))

    def _note(self, level: str, text: str) -> None:
        self._out.append(Note(level, f"[raft {self.node_id}] {text}"))

    def _anomaly(self, text: str) -> bool:
        self.anomalies.append(text)
        self._note("error", text)
        return False

    def _take(self) -> list[Action]:
        out, self._out = self._out, []
        return out
