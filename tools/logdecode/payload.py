"""Record values to Kafka's JSON: framed metadata records, control records, transaction log.

All decoding is the protocol layer's (generated classes and their `to_json`); this module only
picks the decoder for the record's kind and turns a failure into a message on the record.
"""

from __future__ import annotations

from kraftpy.protocol import control_records, txn_log
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.metadata_frame import decode_metadata_record
from kraftpy.protocol.registry import record_type_name

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


def decode_metadata(rec: RecordInfo, key: bytes | None, value: bytes | None, payloads: bool,
                    types: frozenset[str] | None) -> None:
    rec.kind = "metadata"
    if value is None:
        rec.error = "metadata record has a null value"
        return
    # The frame's first three uvarints are one byte each for every type Kafka defines; read
    # them here so a filtered scan can skip the body entirely.
    if len(value) >= 3 and value[0] == 1 and value[1] < 0x80 and value[2] < 0x80:
        rec.type_id, rec.version = value[1], value[2]
        rec.type_name = type_name(rec.type_id)
        if not payloads or (types is not None and rec.type_name not in types):
            return
    try:
        record, version = decode_metadata_record(value)
    except DecodeError as e:
        rec.error = str(e)
        return
    rec.type_id = type(record).API_KEY
    rec.type_name = type_name(rec.type_id)
    rec.version = version
    rec.data = record.to_json(version)
    rec.record = record


def decode_control(rec: RecordInfo, key: bytes | None, value: bytes | None) -> None:
    rec.kind = "control"
    try:
        type_id, name, message = control_records.decode_control_record(key, value)
    except DecodeError as e:
        rec.error = str(e)
        rec.type_id, rec.type_name = _control_type(key)
        return
    rec.type_id, rec.type_name = type_id, name
    rec.data = control_records.control_json(type_id, message)
    rec.record = message


def decode_txn(rec: RecordInfo, key: bytes | None, value: bytes | None, payloads: bool,
               types: frozenset[str] | None) -> None:
    rec.kind = "txn"
    rec.type_name = "TRANSACTION_LOG"
    try:
        txn_key, txn_value, version = txn_log.decode_txn_record(key, value)
    except DecodeError as e:
        rec.error = str(e)
        return
    rec.key_data = txn_key.to_json(0)
    rec.version = version
    rec.data = None if txn_value is None else txn_value.to_json(version)
    rec.record = (txn_key, txn_value)


def decode_raw(rec: RecordInfo, key: bytes | None, value: bytes | None) -> None:
    rec.kind = "raw"


def _control_type(key: bytes | None) -> tuple[int, str]:
    if key is not None and len(key) >= 4:
        type_id = int.from_bytes(key[2:4], "big", signed=True)
        return type_id, "UNKNOWN"
    return -1, "UNKNOWN"
