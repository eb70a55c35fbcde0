"""Records of Kafka's coordinator logs (`__consumer_offsets`, `__transaction_state`).

Both logs share one framing: the key is an int16 record type followed by that type's key
message (every key is version 0), the value an int16 version followed by the type's value
message at that version, and a null value is the tombstone that deletes the key. The record
types of a log are a table of Kafka's `CoordinatorRecordType` (id, enum name, schema stem);
each type's codecs are imported the first time a record of that type is met.

As Kafka's `CoordinatorRecordSerde` does, a message is read from the front of its buffer and
bytes after it are left alone; a record type the table does not hold is an
`UnknownRecordTypeError` (Kafka's dump tool skips those records by name).
"""

from __future__ import annotations

import importlib
import re
import struct
from collections.abc import Mapping
from typing import Any, NamedTuple

from kraftpy.protocol.errors import DecodeError

_SHORT = struct.Struct(">h")


class UnknownRecordTypeError(DecodeError):
    """A record type this table does not know (a newer or a retired one)."""

    def __init__(self, record_type: int) -> None:
        super().__init__(f"Found an unknown record type {record_type}")
        self.record_type = record_type


class RecordType(NamedTuple):
    """One `CoordinatorRecordType`: id, Kafka's enum name and the schemas' common stem."""

    id: int
    name: str  # OFFSET_COMMIT
    stem: str  # OffsetCommit: OffsetCommitKey / OffsetCommitValue


class CoordinatorRecord(NamedTuple):
    record_type: RecordType
    key: Any  # the key message
    value: Any  # the value message, None for a tombstone
    version: int | None  # the value's version, None for a tombstone


def record_types(rows: list[tuple[int, str, str]]) -> dict[int, RecordType]:
    return {i: RecordType(i, name, stem) for i, name, stem in rows}


_CLASSES: dict[str, type] = {}


def message_class(stem: str, role: str) -> type:
    """The generated class `<stem><Key|Value>` (imported once)."""
    name = stem + role
    cls = _CLASSES.get(name)
    if cls is None:
        module = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
        cls = getattr(importlib.import_module(f"kraftpy.protocol.records.{module}"), name)
        _CLASSES[name] = cls
    return cls


def read_version(data: bytes | None, what: str) -> int:
    if data is None or len(data) < 2:
        raise DecodeError(f"Could not read version from {what}'s buffer.")
    return _SHORT.unpack_from(data, 0)[0]


def decode_record(types: Mapping[int, RecordType], key: bytes | None,
                  value: bytes | None) -> CoordinatorRecord:
    """Key and value of one coordinator record. Raises `UnknownRecordTypeError` for a type not
    in `types`, `DecodeError` (naming key or value and the version) for anything unreadable."""
    if key is None:
        raise DecodeError("the record has no key")
    found = types.get(read_version(key, "key"))
    if found is None:
        raise UnknownRecordTypeError(read_version(key, "key"))
    key_message = _read(message_class(found.stem, "Key"), key, 0, "key", found.id)
    if value is None:
        return CoordinatorRecord(found, key_message, None, None)
    cls = message_class(found.stem, "Value")
    version = read_version(value, "value")
    low, high = cls.VALID_VERSIONS
    if not low <= version <= high:
        raise DecodeError(f"Found an unknown record version {version} for {found.id} type")
    return CoordinatorRecord(found, key_message, _read(cls, value, version, "value"), version)


def _read(cls: Any, data: bytes, version: int, what: str, shown: int | None = None) -> Any:
    """`shown`: the version Kafka names in its message (a key is read as its record type)."""
    try:
        message, _ = cls.decode_from(data, 2, version)
    except DecodeError as e:
        named = version if shown is None else shown
        raise DecodeError(f"Could not read record with version {named} from {what}'s buffer "
                          f"due to: {e}.") from None
    return message
