"""The voter set (KIP-853): who votes, how to reach them, and how it changes.

kraft.version 0 takes the set from `controller.quorum.voters` (static: ids and endpoints,
no directory ids); kraft.version 1 from the last VotersRecord in the snapshot and log, which
AddRaftVoter and RemoveRaftVoter change one voter at a time. A voter with no directory id
matches a replica of that id with any directory (Kafka's VoterNode.isVoter).

On disk with kraft.version 1 (as Kafka writes it): `kafka-storage format --standalone` (or
`--initial-controllers`) puts the set, with a KRaftVersionRecord, into the raft bootstrap
snapshot `00000000000000000000-0000000000.checkpoint` of __cluster_metadata-0. That snapshot is
never replicated, so the first leader writes the same two control records into the log, in the
batch of its first LeaderChange; every later snapshot carries them after its header. Brokers
configured with `controller.quorum.bootstrap.servers` find the leader's CONTROLLER endpoint only
there. A node configured with those bootstrap servers runs as a voter of the recorded set (or
an observer when the set does not name it); one without them runs alone, and then the
recorded set must be this node (`check_single_voter`).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kraftpy.protocol.control_records import ControlType, control_key, encode_control_value
from kraftpy.protocol.messages.k_raft_version_record import KRaftVersionRecord
from kraftpy.protocol.messages.voters_record import (
    Endpoint,
    KRaftVersionFeature,
    Voter,
    VotersRecord,
)
from kraftpy.protocol.uuid import ZERO_UUID, kafka_uuid_str, parse_kafka_uuid


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


# --- the set on disk (format, epoch start, snapshots) ------------------------------------------

RAFT_BOOTSTRAP_SNAPSHOT = "00000000000000000000-0000000000.checkpoint"
KRAFT_VERSION_RANGE = (0, 1)  # what this node supports, as its VotersRecord entry says


class VoterSetError(ValueError):
    """A voter set kraftpy cannot run or a bad --initial-controllers value (one line)."""


@dataclass(frozen=True)
class VoterSpec:
    node_id: int
    directory_id: uuid.UUID
    endpoints: tuple[tuple[str, str, int], ...]  # (listener name, host, port)


def voters_record(voters: Sequence[VoterSpec]) -> VotersRecord:
    return VotersRecord(version=0, voters=[Voter(
        voter_id=v.node_id, voter_directory_id=v.directory_id,
        endpoints=[Endpoint(name=n, host=h, port=p) for n, h, p in v.endpoints],
        k_raft_version_feature=KRaftVersionFeature(min_supported_version=KRAFT_VERSION_RANGE[0],
                                                   max_supported_version=KRAFT_VERSION_RANGE[1]))
        for v in voters])


def control_records(kraft_version: int, voters: VotersRecord) -> list[tuple[bytes, bytes]]:
    """(key, value) of the KRaftVersion and Voters control records, in Kafka's order."""
    return [(control_key(ControlType.KRAFT_VERSION),
             encode_control_value(ControlType.KRAFT_VERSION,
                                  KRaftVersionRecord(version=0, k_raft_version=kraft_version))),
            (control_key(ControlType.KRAFT_VOTERS),
             encode_control_value(ControlType.KRAFT_VOTERS, voters))]


def from_control(control: Iterable[tuple[int, bytes | None]]
                 ) -> tuple[int | None, VotersRecord | None]:
    """The last kraft.version and voter set among (control type, value) records."""
    level: int | None = None
    voters: VotersRecord | None = None
    for kind, value in control:
        if kind == ControlType.KRAFT_VERSION and value is not None:
            level = KRaftVersionRecord.decode(value, 0).k_raft_version
        elif kind == ControlType.KRAFT_VOTERS and value is not None:
            voters = VotersRecord.decode(value, 0)
    return level, voters


def parse_initial_controllers(text: str) -> list[tuple[int, str, int, uuid.UUID]]:
    """`--initial-controllers id@host:port:directoryId,...` as Kafka's DynamicVoters.parse
    reads it (its checks and words): empty items skipped, at least one voter, each id once;
    returned in id order, as Kafka keeps them."""
    out: dict[int, tuple[int, str, int, uuid.UUID]] = {}
    for item in text.strip().split(","):
        if item:
            voter = _parse_controller(item)
            if voter[0] in out:
                raise VoterSetError(f"Node id {voter[0]} was specified more than once.")
            out[voter[0]] = voter
    if not out:
        raise VoterSetError("No voters given.")
    return [out[i] for i in sorted(out)]


def _parse_controller(item: str) -> tuple[int, str, int, uuid.UUID]:
    """One `id@host:port:directoryId` (a host with colons in brackets), Kafka's DynamicVoter."""
    item = item.strip()
    node, at, rest = item.partition("@")
    if not at:
        raise VoterSetError("No @ found in dynamic voter string.")
    if not node:
        raise VoterSetError("Invalid @ at beginning of dynamic voter string.")
    node_id = _java_int(node, "Failed to parse node id in dynamic voter string.")
    if node_id < 0:
        raise VoterSetError(f"Invalid negative node id {node_id} in dynamic voter string.")
    if not rest:
        raise VoterSetError("No hostname found after node id.")
    if rest.startswith("["):
        host, bracket, rest = rest[1:].partition("]")
        if not bracket:
            raise VoterSetError("Hostname began with left bracket, but no right bracket was "
                                "found.")
    else:
        host, colon, rest = rest.partition(":")
        if not colon:
            raise VoterSetError("No colon following hostname could be found.")
        rest = ":" + rest
    if not rest.startswith(":"):
        raise VoterSetError("Port section must start with a colon.")
    port_text, colon, directory = rest[1:].partition(":")
    if not colon:
        raise VoterSetError("No colon following port could be found.")
    port = _java_int(port_text, "Failed to parse port in dynamic voter string.")
    if not 0 <= port <= 65535:
        raise VoterSetError(f"Invalid port {port} in dynamic voter string.")
    try:
        directory_id = parse_kafka_uuid(directory)
    except ValueError:
        raise VoterSetError("Failed to parse directory ID in dynamic voter string.") from None
    return node_id, host, port, directory_id


def _java_int(text: str, message: str) -> int:
    """Integer.parseInt: an optional sign and ASCII digits, within 32 bits."""
    if not re.fullmatch(r"[+-]?[0-9]+", text) or not -2**31 <= int(text) < 2**31:
        raise VoterSetError(message)
    return int(text)


def check_single_voter(voters: VotersRecord, node_id: int, directory_id: uuid.UUID) -> None:
    """A node without `controller.quorum.bootstrap.servers` runs as the lone voter, so the
    recorded voter set must be exactly this node and directory: with others in it, it would
    commit alone what needs their votes."""
    ids = [(v.voter_id, v.voter_directory_id) for v in voters.voters]
    if ids != [(node_id, directory_id)]:
        named = ", ".join(f"{i}:{kafka_uuid_str(d)}" for i, d in ids)
        raise VoterSetError(
            f"the voter set is [{named}], but this node ({node_id}:"
            f"{kafka_uuid_str(directory_id)}) has no controller.quorum.bootstrap.servers and "
            "so would run as the lone voter; set controller.quorum.bootstrap.servers to run "
            "with the other voters")
