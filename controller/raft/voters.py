"""The voter set (KIP-853): who votes, how to reach them, and how it changes.

kraft.version 0 takes the set from `controller.quorum.voters` (static: ids and endpoints,
no directory ids); kraft.version 1 from the last VotersRecord in the snapshot and log, which
AddRaftVoter and RemoveRaftVoter change one voter at a time. A voter with no directory id
matches a replica of that id with any directory (Kafka's VoterNode.isVoter).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kraftpy.protocol.messages.voters_record import (
    Endpoint,
    KRaftVersionFeature,
    Voter,
    VotersRecord,
)
from kraftpy.protocol.uuid import ZERO_UUID


@dataclass(frozen=True)
class ReplicaKey:
    id: int
    directory_id: uuid.UUID | None = None


@dataclass(frozen=True)
class VoterNode:
    key: ReplicaKey
    # listener name -> (host, port), in the order the voter listed them
    listeners: tuple[tuple[str, str, int], ...] = ()
    kraft_versions: tuple[int, int] = (0, 1)

    def matches(self, replica: ReplicaKey) -> bool:
        if self.key.id != replica.id:
            return False
        return self.key.directory_id is None or self.key.directory_id == replica.directory_id

    def endpoint(self, listener: str | None = None) -> tuple[str, int] | None:
        for name, host, port in self.listeners:
            if listener is None or name == listener:
                return host, port
        return None


@dataclass(frozen=True)
class VoterSet:
    voters: Mapping[int, VoterNode] = field(default_factory=dict)

    @classmethod
    def of(cls, nodes: Iterable[VoterNode]) -> VoterSet:
        return cls({n.key.id: n for n in nodes})

    @classmethod
    def static(cls, voters: Mapping[int, tuple[str, int]], listener: str = "CONTROLLER"
               ) -> VoterSet:
        """`controller.quorum.voters` (id -> host, port): no directory ids."""
        return cls.of(VoterNode(ReplicaKey(i), ((listener, h, p),)) for i, (h, p)
                      in sorted(voters.items()))

    @classmethod
    def from_record(cls, record: VotersRecord) -> VoterSet:
        nodes = []
        for v in record.voters:
            directory = None if v.voter_directory_id == ZERO_UUID else v.voter_directory_id
            feature = v.k_raft_version_feature
            nodes.append(VoterNode(
                ReplicaKey(v.voter_id, directory),
                tuple((e.name, e.host, e.port) for e in v.endpoints),
                (feature.min_supported_version, feature.max_supported_version)))
        return cls.of(nodes)

    def to_record(self) -> VotersRecord:
        return VotersRecord(version=0, voters=[Voter(
            voter_id=n.key.id, voter_directory_id=n.key.directory_id or ZERO_UUID,
            endpoints=[Endpoint(name=name, host=host, port=port)
                       for name, host, port in n.listeners],
            k_raft_version_feature=KRaftVersionFeature(
                min_supported_version=n.kraft_versions[0],
                max_supported_version=n.kraft_versions[1]))
            for n in self.voters.values()])

    # --- questions ------------------------------------------------------------------------
    @property
    def ids(self) -> frozenset[int]:
        return frozenset(self.voters)

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    def is_voter(self, replica: ReplicaKey) -> bool:
        node = self.voters.get(replica.id)
        return node is not None and node.matches(replica)

    def is_only_voter(self, replica: ReplicaKey) -> bool:
        return len(self.voters) == 1 and self.is_voter(replica)

    def key(self, voter_id: int) -> ReplicaKey:
        return self.voters[voter_id].key

    # --- changes (None: the change is not allowed) -----------------------------------------
    def add(self, node: VoterNode) -> VoterSet | None:
        if node.key.id in self.voters:
            return None
        return VoterSet({**self.voters, node.key.id: node})

    def remove(self, replica: ReplicaKey) -> VoterSet | None:
        node = self.voters.get(replica.id)
        if node is None or node.key != replica or len(self.voters) == 1:
            return None
        return VoterSet({i: n for i, n in self.voters.items() if i != replica.id})

    def with_voter(self, node: VoterNode) -> VoterSet | None:
        """The voter of the same id replaced (its endpoints updated), None if absent."""
        old = self.voters.get(node.key.id)
        if old is None or (old.key.directory_id is not None
                           and old.key.directory_id != node.key.directory_id):
            return None
        return VoterSet({**self.voters, node.key.id: node})
