"""Kafka's Raft roles (org.apache.kafka.raft.*State), as plain state the core moves between.

Unattached (no known leader, maybe a vote cast), Prospective (KIP-996: asking for pre-votes,
nothing persisted), Candidate (epoch bumped, voted for itself), Leader, Follower, Resigned (a
leader stepping down, or one restarted in its old epoch). An observer is a node outside the
voter set; it is Unattached or a Follower and never stands for election.

Each role answers `election()` (what quorum-state persists) and `can_grant_vote(...)` with
Kafka's rules; deadlines are absolute milliseconds of the time the core was given.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from kraftpy.controller.raft.quorum_state import ElectionState
from kraftpy.controller.raft.voters import ReplicaKey, VoterSet


class Role(enum.Enum):
    UNATTACHED = "Unattached"
    PROSPECTIVE = "Prospective"
    CANDIDATE = "Candidate"
    LEADER = "Leader"
    FOLLOWER = "Follower"
    RESIGNED = "Resigned"
    OBSERVER = "Observer"


class EpochElection:
    """Votes (or pre-votes) counted for one nominee: granted, rejected, not yet heard."""

    def __init__(self, voters: VoterSet, local_id: int) -> None:
        self.keys = {i: n.key for i, n in voters.voters.items()}
        self.granted: set[int] = set()
        self.rejected: set[int] = set()
        if local_id in self.keys:
            self.granted.add(local_id)

    def record(self, voter_id: int, granted: bool) -> None:
        if voter_id not in self.keys or voter_id in self.granted or voter_id in self.rejected:
            return  # a non-voter's answer, or a duplicate: the first answer counts
        (self.granted if granted else self.rejected).add(voter_id)

    @property
    def majority(self) -> int:
        return len(self.keys) // 2 + 1

    def is_vote_granted(self) -> bool:
        return len(self.granted) >= self.majority

    def is_vote_rejected(self) -> bool:
        unrecorded = len(self.keys) - len(self.granted) - len(self.rejected)
        return len(self.granted) + unrecorded < self.majority

    def unrecorded(self) -> list[ReplicaKey]:
        return [k for i, k in self.keys.items()
                if i not in self.granted and i not in self.rejected]


def _unattached_or_prospective_grant(leader_id: int | None, voted: ReplicaKey | None,
                                     candidate: ReplicaKey, up_to_date: bool,
                                     pre_vote: bool) -> bool:
    if pre_vote:
        return up_to_date
    if voted is not None:
        return voted.id == candidate.id and (voted.directory_id is None
                                             or voted.directory_id == candidate.directory_id)
    if leader_id is not None:
        return False
    return up_to_date


@dataclass
class Unattached:
    epoch: int
    leader_id: int | None
    voted: ReplicaKey | None
    election_deadline: float
    voters: frozenset[int] = frozenset()
    role = Role.UNATTACHED

    def election(self) -> ElectionState:
        return _election(self.epoch, self.leader_id, self.voted, self.voters)

    def can_grant_vote(self, candidate: ReplicaKey, up_to_date: bool, pre_vote: bool) -> bool:
        return _unattached_or_prospective_grant(self.leader_id, self.voted, candidate,
                                                up_to_date, pre_vote)


@dataclass
class Prospective:
    epoch: int
    leader_id: int | None
    voted: ReplicaKey | None
    votes: EpochElection
    election_deadline: float
    voters: frozenset[int] = frozenset()
    role = Role.PROSPECTIVE

    def election(self) -> ElectionState:
        return _election(self.epoch, self.leader_id, self.voted, self.voters)

    def can_grant_vote(self, candidate: ReplicaKey, up_to_date: bool, pre_vote: bool) -> bool:
        return _unattached_or_prospective_grant(self.leader_id, self.voted, candidate,
                                                up_to_date, pre_vote)


@dataclass
class Candidate:
    epoch: int
    local: ReplicaKey
    votes: EpochElection
    election_deadline: float
    voters: frozenset[int] = frozenset()
    role = Role.CANDIDATE
    leader_id = None

    def election(self) -> ElectionState:
        return _election(self.epoch, None, self.local, self.voters)

    def can_grant_vote(self, candidate: ReplicaKey, up_to_date: bool, pre_vote: bool) -> bool:
        return pre_vote and up_to_date


@dataclass
class ReplicaProgress:
    """A replica as the leader sees it (DescribeQuorum's ReplicaState)."""

    key: ReplicaKey
    end_offset: int | None = None
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    # The leader's flushed end at this replica's previous fetch (lastFetchLeaderLogEndOffset):
    # reaching it now means the replica was caught up as of that fetch.
    last_fetch_leader_end: int = -1
    acknowledged: bool = False


@dataclass
class Leader:
    epoch: int
    local: ReplicaKey
    epoch_start_offset: int
    granting: frozenset[int]
    check_quorum_deadline: float
    begin_epoch_deadline: float = 0
    voters: frozenset[int] = frozenset()
    high_watermark: int | None = None
    replicas: dict[int, ReplicaProgress] = field(default_factory=dict)
    observers: dict[ReplicaKey, ReplicaProgress] = field(default_factory=dict)
    fetched_voters: set[int] = field(default_factory=set)
    resign_requested: bool = False
    role = Role.LEADER

    @property
    def leader_id(self) -> int:
        return self.local.id

    def election(self) -> ElectionState:
        return _election(self.epoch, self.local.id, None, self.voters)

    def can_grant_vote(self, candidate: ReplicaKey, up_to_date: bool, pre_vote: bool) -> bool:
        return False


@dataclass
class Follower:
    epoch: int
    leader_id: int
    voted: ReplicaKey | None
    fetch_deadline: float
    voters: frozenset[int] = frozenset()
    has_fetched: bool = False
    # (snapshot id, bytes received) while a snapshot is downloaded instead of records
    fetching_snapshot: tuple[tuple[int, int], int] | None = None
    role = Role.FOLLOWER

    def election(self) -> ElectionState:
        return _election(self.epoch, self.leader_id, self.voted, self.voters)

    def can_grant_vote(self, candidate: ReplicaKey, up_to_date: bool, pre_vote: bool) -> bool:
        # KIP-996: a follower that has heard from its leader rejects pre-votes too
        return pre_vote and up_to_date and not self.has_fetched


@dataclass
class Resigned:
    epoch: int
    local: ReplicaKey
    election_deadline: float
    unacked: set[int]
    preferred_successors: list[ReplicaKey]
    voters: frozenset[int] = frozenset()
    role = Role.RESIGNED

    @property
    def leader_id(self) -> int:
        return self.local.id

    def election(self) -> ElectionState:
        return _election(self.epoch, self.local.id, None, self.voters)

    def can_grant_vote(self, candidate: ReplicaKey, up_to_date: bool, pre_vote: bool) -> bool:
        return pre_vote and up_to_date


State = Unattached | Prospective | Candidate | Leader | Follower | Resigned


def _election(epoch: int, leader_id: int | None, voted: ReplicaKey | None,
              voters: frozenset[int]) -> ElectionState:
    return ElectionState(
        epoch=epoch, leader_id=leader_id,
        voted_id=None if voted is None else voted.id,
        voted_directory_id=None if voted is None else voted.directory_id,
        voters=voters)
