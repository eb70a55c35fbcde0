"""Control records: the key/value pairs of control batches (attribute bit 5).

The key is `int16 version (0), int16 type`. Transaction markers (ABORT, COMMIT) carry an
EndTxnMarker value (`int16 version 0, int32 coordinatorEpoch`). KRaft's own control records
carry a flexible "data" message serialised raw at version 0 (no metadata frame): the
generated LeaderChangeMessage, SnapshotHeaderRecord, SnapshotFooterRecord, KRaftVersionRecord
and VotersRecord. Kafka reads LeaderChangeMessage at version 0 whatever it was written with,
and so do we.
"""

from __future__ import annotations

import enum
import struct
from typing import Any

from kraftpy.protocol.errors import DecodeError

_KEY = struct.Struct(">hh")
_END_TXN = struct.Struct(">hi")


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


def control_key(control_type: ControlType | int) -> bytes:
    return _KEY.pack(0, int(control_type))


def parse_control_key(key: bytes | None) -> int:
    """The control type of a key; -1 (Kafka's UNKNOWN) for a type this build does not know."""
    if key is None or len(key) < 4:
        raise DecodeError(
            f"control record key of {0 if key is None else len(key)} bytes, needs 4", offset=0
        )
    version, control_type = _KEY.unpack_from(key)
    if version < 0:
        raise DecodeError(f"control record key version {version}", offset=0, field="version")
    return control_type if control_type in ControlType._value2member_map_ else -1


def end_txn_marker(coordinator_epoch: int) -> bytes:
    return _END_TXN.pack(0, coordinator_epoch)


def parse_end_txn_marker(value: bytes | None) -> int:
    """The coordinator epoch of an ABORT/COMMIT marker value."""
    if value is None or len(value) < 6:
        raise DecodeError("end transaction marker shorter than 6 bytes", offset=0)
    version, epoch = _END_TXN.unpack_from(value)
    if version != 0:
        raise DecodeError(f"end transaction marker version {version}", offset=0, field="version")
    return epoch


def _classes() -> dict[int, type]:
    from kraftpy.protocol.messages.k_raft_version_record import KRaftVersionRecord
    from kraftpy.protocol.messages.leader_change_message import LeaderChangeMessage
    from kraftpy.protocol.messages.snapshot_footer_record import SnapshotFooterRecord
    from kraftpy.protocol.messages.snapshot_header_record import SnapshotHeaderRecord
    from kraftpy.protocol.messages.voters_record import VotersRecord

    return {
        ControlType.LEADER_CHANGE: LeaderChangeMessage,
        ControlType.SNAPSHOT_HEADER: SnapshotHeaderRecord,
        ControlType.SNAPSHOT_FOOTER: SnapshotFooterRecord,
        ControlType.KRAFT_VERSION: KRaftVersionRecord,
        ControlType.KRAFT_VOTERS: VotersRecord,
    }


def encode_control_value(control_type: ControlType | int, message: Any) -> bytes:
    """A KRaft control value: the message at version 0, no frame."""
    cls = _classes().get(int(control_type))
    if cls is None or not isinstance(message, cls):
        raise TypeError(f"{type(message).__name__} is not the value of control type {control_type}")
    return message.encode(0)


def decode_control_record(key: bytes | None, value: bytes | None) -> tuple[int, Any]:
    """(control type, decoded value): a message, a coordinator epoch, or None if unknown."""
    control_type = parse_control_key(key)
    if control_type in (ControlType.ABORT, ControlType.COMMIT):
        return control_type, parse_end_txn_marker(value)
    cls = _classes().get(control_type)
    if cls is None:
        return control_type, None
    if value is None:
        raise DecodeError(
            f"{ControlType(control_type).name} control record with a null value", offset=0
        )
    return control_type, cls.decode(value, 0)


def snapshot_header(last_contained_log_timestamp: int) -> tuple[bytes, bytes]:
    """(key, value) of a SnapshotHeader control record."""
    from kraftpy.protocol.messages.snapshot_header_record import SnapshotHeaderRecord

    record = SnapshotHeaderRecord(
        version=0, last_contained_log_timestamp=last_contained_log_timestamp
    )
    return control_key(ControlType.SNAPSHOT_HEADER), record.encode(0)


def snapshot_footer() -> tuple[bytes, bytes]:
    """(key, value) of a SnapshotFooter control record."""
    from kraftpy.protocol.messages.snapshot_footer_record import SnapshotFooterRecord

    return control_key(ControlType.SNAPSHOT_FOOTER), SnapshotFooterRecord(version=0).encode(0)


def leader_change(
    leader_id: int, voters: list[int], granting: list[int] | None = None
) -> tuple[bytes, bytes]:
    """(key, value) of the LeaderChange record a new leader writes first in its epoch."""
    from kraftpy.protocol.messages.leader_change_message import LeaderChangeMessage, Voter

    message = LeaderChangeMessage(
        version=0,
        leader_id=leader_id,
        voters=[Voter(voter_id=v) for v in voters],
        granting_voters=[Voter(voter_id=v) for v in (voters if granting is None else granting)],
    )
    return control_key(ControlType.LEADER_CHANGE), message.encode(0)
