"""The voter set of a KIP-853 quorum (kraft.version 1): where it is kept and how it is written.

With kraft.version 1 the voters are not configured but recorded: `kafka-storage format
--standalone` (or `--initial-controllers`) writes them, with a KRaftVersionRecord, into the
raft bootstrap snapshot `00000000000000000000-0000000000.checkpoint` of __cluster_metadata-0.
That snapshot is never replicated, so the first leader writes the same two control records
into the log, in the batch of its first LeaderChange; every later snapshot carries them after
its header. Brokers configured with `controller.quorum.bootstrap.servers` find the leader's
CONTROLLER endpoint only there. kraftpy runs a quorum of one voter: the set must be this node.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kraftpy.protocol.control_records import ControlType, control_key, encode_control_value
from kraftpy.protocol.messages.k_raft_version_record import KRaftVersionRecord
from kraftpy.protocol.messages.voters_record import (
    Endpoint,
    KRaftVersionFeature,
    Voter,
    VotersRecord,
)
from kraftpy.protocol.uuid import kafka_uuid_str, parse_kafka_uuid

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
    """`--initial-controllers id@host:port:directoryId,...` as Kafka's DynamicVoters parses it."""
    out = []
    for item in text.split(","):
        node, at, rest = item.strip().partition("@")
        host_port, colon, directory = rest.rpartition(":")
        host, colon2, port = host_port.rpartition(":")
        try:
            node_id, port_no = int(node), int(port)
            directory_id = parse_kafka_uuid(directory)
        except ValueError:
            node_id = -1
        if not (at and colon and colon2) or node_id < 0:
            raise VoterSetError(f"Unable to parse controller {item.strip()!r}: expected "
                                "id@host:port:directoryId")
        out.append((node_id, host.strip("[]"), port_no, directory_id))
    return out


def check_single_voter(voters: VotersRecord, node_id: int, directory_id: uuid.UUID) -> None:
    """kraftpy leads alone: the recorded voter set must be exactly this node and directory."""
    ids = [(v.voter_id, v.voter_directory_id) for v in voters.voters]
    if ids != [(node_id, directory_id)]:
        named = ", ".join(f"{i}:{kafka_uuid_str(d)}" for i, d in ids)
        raise VoterSetError(
            f"the voter set is [{named}], but kraftpy runs a quorum of one voter: this node "
            f"({node_id}:{kafka_uuid_str(directory_id)})")
