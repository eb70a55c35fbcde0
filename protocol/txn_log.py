"""Records of `__transaction_state`: key and value each start with an int16 schema version.

Key: version 0 + TransactionLogKey v0 (the transactional id). Value: version 0 or 1 +
TransactionLogValue at that version (1 is flexible, with the tagged producer-id fields); a
null value is the tombstone of a removed transactional id. The key's int16 is also Kafka's
record type (`coordinator_records`): `decode` reads a record as Kafka 4.1's serde does, where
any type but 0 is unknown.

The topic has `transaction.state.log.num.partitions` partitions (50 by default) and each
transactional id lives in one of them, `partition_for` (Kafka's TransactionStateManager.
partitionFor: Java's String.hashCode, Utils.abs, modulo the count): a coordinator loading a
partition finds the ids it owns there, and only there.
"""

from __future__ import annotations

import struct

from kraftpy.protocol.coordinator_records import (
    CoordinatorRecord,
    RecordType,
    decode_record,
    record_types,
)
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.records.transaction_log_key import TransactionLogKey
from kraftpy.protocol.records.transaction_log_value import PartitionsSchema, TransactionLogValue

__all__ = [
    "RECORD_TYPES",
    "TOPIC",
    "PartitionsSchema",
    "TransactionLogKey",
    "TransactionLogValue",
    "decode",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "java_string_hash",
    "partition_for",
]

TOPIC = "__transaction_state"
DEFAULT_PARTITIONS = 50  # transaction.state.log.num.partitions

_VERSION = struct.Struct(">h")
KEY_VERSION = 0
VALUE_VERSION = 1  # what Kafka 4.x writes from transaction.version 1 (0 below it)

RECORD_TYPES: dict[int, RecordType] = record_types([(0, "TRANSACTION_LOG", "TransactionLog")])


def decode(key: bytes | None, value: bytes | None) -> CoordinatorRecord:
    """One `__transaction_state` record as Kafka's dump tool reads it."""
    return decode_record(RECORD_TYPES, key, value)


def encode_key(key: TransactionLogKey | str, version: int = KEY_VERSION) -> bytes:
    if isinstance(key, str):
        key = TransactionLogKey(transactional_id=key)
    return _VERSION.pack(version) + key.encode(version)


def decode_key(data: bytes) -> tuple[TransactionLogKey, int]:
    version = _version(data, "key")
    return TransactionLogKey.decode(data[2:], version), version


def encode_value(value: TransactionLogValue, version: int = VALUE_VERSION) -> bytes:
    return _VERSION.pack(version) + value.encode(version)


def decode_value(data: bytes | None) -> tuple[TransactionLogValue | None, int | None]:
    """(value, version), or (None, None) for a tombstone."""
    if data is None:
        return None, None
    version = _version(data, "value")
    return TransactionLogValue.decode(data[2:], version), version


def _version(data: bytes, what: str) -> int:
    if data is None or len(data) < 2:
        raise DecodeError(f"transaction log {what} is shorter than its version", offset=0, field="version")
    return _VERSION.unpack_from(data, 0)[0]


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: 31-based over UTF-16 code units, wrapped to a signed int32."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """The `__transaction_state` partition that holds `transactional_id`, as Kafka picks it:
    Utils.abs (0 for Integer.MIN_VALUE) of the id's hash, modulo the partition count."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions
