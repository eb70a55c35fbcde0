"""Record values to Kafka's JSON: framed metadata records, control records, transaction log.

All decoding is the protocol layer's (generated classes and their `to_json`); this module only
picks the decoder for the record's kind and turns a failure into a message on the record.
"""

from __future__ import annotations

from typing import Any

from kraftpy.protocol import control_records, txn_log
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.metadata_frame import decode_metadata_record
from kraftpy.protocol.registry import record_type_name

from .dumptext import compact_json
from .model import RecordInfo

_TYPE_NAMES: dict[int, str] = {}


def type_name(type_id: int) -> str:
    name = _TYPE_NAMES.get(type_id)
    if name is None:
        try:
            name = record_type_name(type_id)
        except (KeyError, ValueError):
            name = f"UNKNOWN_{type_id}"
        _TYPE_NAMES[type_id] = name
    return name


# Decoding depends only on a value's bytes, and metadata logs repeat themselves (NoOpRecords,
# fence/unfence of the same brokers, ...), so decoded values are kept by their bytes. Bounded:
# emptied when full, which costs one re-decode per distinct value.
Decoded = tuple[int, str, int, Any, "str | None", str]  # type id, name, version, data, json, error
_CACHE: dict[bytes, Decoded] = {}
_CACHE_LIMIT = 50_000


def metadata_value(value: bytes | None, types: frozenset[str] | None = None) -> Decoded:
    """(type id, type name, version, data, JSON text, error) of a framed metadata value.

    With `types`, a record of another type keeps its type and version but is not decoded
    (data and JSON None); the frame's first three uvarints are one byte each for every type
    Kafka defines, so that costs three byte reads.
    """
    if value is None:
        return -1, "", -1, None, None, "metadata record has a null value"
    hit = _CACHE.get(value)
    if hit is not None:
        return hit
    if types is not None and len(value) >= 3 and value[0] == 1 and value[1] < 0x80 \
            and value[2] < 0x80:
        name = type_name(value[1])
        if name not in types:
            return value[1], name, value[2], None, None, ""
    try:
        record, version = decode_metadata_record(value)
    except DecodeError as e:
        type_id = value[1] if len(value) > 1 and value[1] < 0x80 else -1
        return type_id, type_name(type_id) if type_id >= 0 else "", -1, None, None, str(e)
    data = record.to_json(version)
    decoded = (record.API_KEY, type_name(record.API_KEY), version, data, compact_json(data), "")
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[bytes(value)] = decoded
    return decoded


def decode_metadata(rec: RecordInfo, key: bytes | None, value: bytes | None, payloads: bool,
                    types: frozenset[str] | None, objects: bool = False) -> None:
    """Fill in type, version, data and its JSON text; `objects` also keeps the decoded record
    (a fresh one, never shared) for replay."""
    rec.kind = "metadata"
    if objects and value is not None:
        try:
            rec.record, rec.version = decode_metadata_record(value)
        except DecodeError as e:
            rec.error = str(e)
            return
        rec.type_id = rec.record.API_KEY
        rec.type_name = type_name(rec.type_id)
        rec.data = rec.record.to_json(rec.version)
        rec.json = compact_json(rec.data)
        return
    if not payloads and value is not None and len(value) >= 3 and value[0] == 1 \
            and value[1] < 0x80 and value[2] < 0x80:
        rec.type_id, rec.type_name, rec.version = value[1], type_name(value[1]), value[2]
        return
    rec.type_id, rec.type_name, rec.version, rec.data, rec.json, rec.error = \
        metadata_value(value, types)


# Kafka's names for the control types, as its dump tool prints them.
CONTROL_NAMES = {0: "ABORT", 1: "COMMIT", 2: "LeaderChange", 3: "SnapshotHeader",
                 4: "SnapshotFooter", 5: "KRaftVersion", 6: "KRaftVoters"}


def decode_control(rec: RecordInfo, key: bytes | None, value: bytes | None) -> None:
    rec.kind = "control"
    try:
        rec.type_id = control_records.parse_control_key(key)
    except DecodeError as e:
        rec.type_name, rec.error = "UNKNOWN", str(e)
        return
    rec.type_name = CONTROL_NAMES.get(rec.type_id, "UNKNOWN")
    if rec.type_id == -1 and key is not None:  # Kafka prints the id it did not know
        rec.type_id = int.from_bytes(key[2:4], "big", signed=True)
    try:
        _, message = control_records.decode_control_record(key, value)
    except DecodeError as e:
        rec.error = str(e)
        return
    rec.record = message
    if rec.type_id in (0, 1):
        rec.data = {"coordinatorEpoch": message}
    elif message is not None:
        rec.version = 0
        rec.data = message.to_json(0)
    if rec.data is not None:
        rec.json = compact_json(rec.data)


def decode_txn(rec: RecordInfo, key: bytes | None, value: bytes | None, payloads: bool,
               types: frozenset[str] | None, objects: bool = False) -> None:
    rec.kind = "txn"
    rec.type_name = "TRANSACTION_LOG"
    try:
        if key is None:
            raise DecodeError("transaction log record without a key", offset=0)
        txn_key, key_version = txn_log.decode_key(key)
        txn_value, version = txn_log.decode_value(value)
    except DecodeError as e:
        rec.error = str(e)
        return
    rec.key_data = txn_key.to_json(key_version)
    rec.version = -1 if version is None else version
    rec.data = None if txn_value is None else txn_value.to_json(version)
    rec.json = compact_json({"key": rec.key_data, "value": rec.data})
    rec.record = (txn_key, txn_value)


def _control_type(key: bytes | None) -> tuple[int, str]:
    if key is not None and len(key) >= 4:
        type_id = int.from_bytes(key[2:4], "big", signed=True)
        return type_id, "UNKNOWN"
    return -1, "UNKNOWN"
