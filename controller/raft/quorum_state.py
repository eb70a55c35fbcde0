"""The `quorum-state` file: Kafka's QuorumStateData JSON, data_version 0 and 1.

What Raft must remember across a restart: the epoch, the leader it knew and whom it voted for
in that epoch (FileQuorumStateStore). One line of JSON, the fields in the schema's order and
then "data_version", as Jackson writes them: version 0 (kraft.version 0) keeps the retired
clusterId, appliedOffset and currentVoters fields; version 1 (kraft.version 1) has the voted
candidate's directory id instead. The core hands the bytes out in a `WriteQuorumState` action;
the shell writes them to `quorum-state.tmp`, fsyncs and renames, before its next action.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass, field

from kraftpy.protocol.uuid import ZERO_UUID, kafka_uuid_str, parse_kafka_uuid

FILE_NAME = "quorum-state"
NOT_VOTED = -1
UNKNOWN_LEADER = -1


class QuorumStateError(ValueError):
    """A quorum-state file Kafka would not read; the message says what is wrong."""


@dataclass(frozen=True)
class ElectionState:
    """Kafka's ElectionState: epoch, leader (or None) and the vote cast in that epoch."""

    epoch: int
    leader_id: int | None = None
    voted_id: int | None = None
    voted_directory_id: uuid.UUID | None = None
    voters: frozenset[int] = field(default_factory=frozenset)  # only written by version 0

    def is_leader(self, node_id: int) -> bool:
        return self.leader_id == node_id

    def voted_for(self, node_id: int, directory_id: uuid.UUID | None) -> bool:
        """Kafka's isVotedCandidate: a vote without a directory id matches any directory."""
        if self.voted_id is None or self.voted_id != node_id:
            return False
        return self.voted_directory_id is None or self.voted_directory_id == directory_id

    def encode(self, version: int) -> bytes:
        """The file's one line (no newline), as FileQuorumStateStore writes it."""
        leader = UNKNOWN_LEADER if self.leader_id is None else self.leader_id
        voted = NOT_VOTED if self.voted_id is None else self.voted_id
        if version == 0:
            data: dict[str, object] = {
                "clusterId": "", "leaderId": leader, "leaderEpoch": self.epoch,
                "votedId": voted, "appliedOffset": 0,
                "currentVoters": [{"voterId": v} for v in sorted(self.voters)],
            }
        elif version == 1:
            data = {
                "leaderId": leader, "leaderEpoch": self.epoch, "votedId": voted,
                "votedDirectoryId": kafka_uuid_str(self.voted_directory_id or ZERO_UUID),
            }
        else:
            raise QuorumStateError(f"quorum-state data_version {version} is not 0 or 1")
        data["data_version"] = version
        return json.dumps(data, separators=(",", ":")).encode()


_FIELDS = {
    0: ("clusterId", "leaderId", "leaderEpoch", "votedId", "appliedOffset", "currentVoters"),
    1: ("leaderId", "leaderEpoch", "votedId", "votedDirectoryId"),
}


def decode(data: bytes) -> ElectionState:
    """The election state of a quorum-state file's bytes; `QuorumStateError` if Kafka would
    refuse them (its first line must be a JSON object with a data_version of 0 or 1 and every
    field of that version)."""
    try:
        line = data.decode("utf-8").split("\n", 1)[0]
        node = json.loads(line)
    except (UnicodeDecodeError, ValueError) as exc:
        raise QuorumStateError(f"quorum-state is not one line of JSON: {exc}") from None
    if not isinstance(node, dict):
        raise QuorumStateError(f"quorum-state is not a JSON object: {line[:80]!r}")
    version = node.get("data_version")
    if type(version) is not int:
        raise QuorumStateError("quorum-state has no integer data_version field")
    if version not in _FIELDS:
        raise QuorumStateError(
            f"quorum-state data_version ({version}) is not within the min (0) and max (1) "
            "supported version")
    for name in _FIELDS[version]:
        if name not in node:
            raise QuorumStateError(
                f"quorum-state: field '{name}' is mandatory in version {version}")
    ints = {name: node[name] for name in ("leaderId", "leaderEpoch", "votedId")}
    for name, value in ints.items():
        if type(value) is not int or not -2**31 <= value < 2**31:
            raise QuorumStateError(f"quorum-state: {name} {value!r} is not an int32")
    voters: frozenset[int] = frozenset()
    directory: uuid.UUID | None = None
    if version == 0:
        current = node["currentVoters"]
        if current is not None:
            if not isinstance(current, list) or not all(
                    isinstance(v, dict) and type(v.get("voterId")) is int for v in current):
                raise QuorumStateError(f"quorum-state: currentVoters {current!r} is not a "
                                       "list of {\"voterId\": int}")
            voters = frozenset(v["voterId"] for v in current)
    else:
        try:
            directory = parse_kafka_uuid(node["votedDirectoryId"])
        except ValueError:
            raise QuorumStateError(
                f"quorum-state: votedDirectoryId {node['votedDirectoryId']!r} is not a "
                "Kafka uuid") from None
        if directory == ZERO_UUID:
            directory = None
    voted = ints["votedId"]
    return ElectionState(
        epoch=ints["leaderEpoch"],
        leader_id=None if ints["leaderId"] == UNKNOWN_LEADER else ints["leaderId"],
        voted_id=None if voted == NOT_VOTED else voted,
        voted_directory_id=directory if voted != NOT_VOTED else None,
        voters=voters)
