"""Records of `__consumer_offsets`: Kafka 4.1's group coordinator record types.

Framing and decoding are `coordinator_records`'. Classic groups write OffsetCommit (1) and
GroupMetadata (2) records; consumer groups of KIP-848, share groups and streams groups write
the rest. Types 9 and 18 were retired before 4.1 (a 4.0 log may still hold them), so they
decode as unknown, as in Kafka.

`value_json` is the value as `kafka-dump-log.sh --offsets-decoder` shows it: a classic group
of protocol type "consumer" has each member's subscription and assignment bytes decoded
(ConsumerProtocolSubscription / ConsumerProtocolAssignment) instead of shown as base64.
"""

from __future__ import annotations

import struct
from typing import Any

from kraftpy.protocol.coordinator_records import (
    CoordinatorRecord,
    RecordType,
    UnknownRecordTypeError,
    decode_record,
    record_types,
)
from kraftpy.protocol.errors import DecodeError

__all__ = ["RECORD_TYPES", "CoordinatorRecord", "RecordType", "UnknownRecordTypeError",
           "decode", "value_json"]

RECORD_TYPES: dict[int, RecordType] = record_types([
    (0, "LEGACY_OFFSET_COMMIT", "LegacyOffsetCommit"),
    (1, "OFFSET_COMMIT", "OffsetCommit"),
    (2, "GROUP_METADATA", "GroupMetadata"),
    (3, "CONSUMER_GROUP_METADATA", "ConsumerGroupMetadata"),
    (4, "CONSUMER_GROUP_PARTITION_METADATA", "ConsumerGroupPartitionMetadata"),
    (5, "CONSUMER_GROUP_MEMBER_METADATA", "ConsumerGroupMemberMetadata"),
    (6, "CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA", "ConsumerGroupTargetAssignmentMetadata"),
    (7, "CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER", "ConsumerGroupTargetAssignmentMember"),
    (8, "CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT", "ConsumerGroupCurrentMemberAssignment"),
    (10, "SHARE_GROUP_MEMBER_METADATA", "ShareGroupMemberMetadata"),
    (11, "SHARE_GROUP_METADATA", "ShareGroupMetadata"),
    (12, "SHARE_GROUP_TARGET_ASSIGNMENT_METADATA", "ShareGroupTargetAssignmentMetadata"),
    (13, "SHARE_GROUP_TARGET_ASSIGNMENT_MEMBER", "ShareGroupTargetAssignmentMember"),
    (14, "SHARE_GROUP_CURRENT_MEMBER_ASSIGNMENT", "ShareGroupCurrentMemberAssignment"),
    (15, "SHARE_GROUP_STATE_PARTITION_METADATA", "ShareGroupStatePartitionMetadata"),
    (16, "CONSUMER_GROUP_REGULAR_EXPRESSION", "ConsumerGroupRegularExpression"),
    (17, "STREAMS_GROUP_METADATA", "StreamsGroupMetadata"),
    (19, "STREAMS_GROUP_MEMBER_METADATA", "StreamsGroupMemberMetadata"),
    (20, "STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA", "StreamsGroupTargetAssignmentMetadata"),
    (21, "STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER", "StreamsGroupTargetAssignmentMember"),
    (22, "STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT", "StreamsGroupCurrentMemberAssignment"),
    (23, "STREAMS_GROUP_TOPOLOGY", "StreamsGroupTopology"),
])

GROUP_METADATA = 2
CONSUMER_PROTOCOL_TYPE = "consumer"
_SHORT = struct.Struct(">h")


def decode(key: bytes | None, value: bytes | None) -> CoordinatorRecord:
    """One `__consumer_offsets` record; see `coordinator_records.decode_record`."""
    return decode_record(RECORD_TYPES, key, value)


def value_json(record: CoordinatorRecord) -> dict[str, Any] | None:
    """The value in Kafka's JSON layout (None for a tombstone)."""
    if record.value is None:
        return None
    data = record.value.to_json(record.version)
    if record.record_type.id == GROUP_METADATA and record.value.protocol_type == CONSUMER_PROTOCOL_TYPE:
        for member, shown in zip(record.value.members, data.get("members") or [], strict=False):
            _replace(shown, "subscription", member.subscription, _subscription_class())
            _replace(shown, "assignment", member.assignment, _assignment_class())
    return data


def _replace(shown: dict[str, Any], field: str, data: bytes | None, cls: Any) -> None:
    """Embedded consumer-protocol bytes as their JSON, read at the version they start with;
    bytes that do not read stay as they are (base64), as in Kafka."""
    if field not in shown or data is None or len(data) < 2:
        return
    low, high = cls.VALID_VERSIONS
    # Kafka's reader takes any version: fields are read by `version >= n` checks, so a
    # newer version reads as the newest known and a negative one as the oldest.
    version = min(max(_SHORT.unpack_from(data, 0)[0], low), high)
    try:
        message, _ = cls.decode_from(data, 2, version)
    except DecodeError:
        return
    shown[field] = message.to_json(version)


def _subscription_class() -> Any:
    from kraftpy.protocol.messages.consumer_protocol_subscription import (
        ConsumerProtocolSubscription,
    )

    return ConsumerProtocolSubscription


def _assignment_class() -> Any:
    from kraftpy.protocol.messages.consumer_protocol_assignment import ConsumerProtocolAssignment

    return ConsumerProtocolAssignment
