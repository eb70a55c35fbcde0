"""Record values to Kafka's JSON: framed metadata records, control records, transaction log.

All decoding is the protocol layer's (generated decoders, `to_json` and the generated
bytes -> JSON text functions); this module only picks the decoder for the record's kind and
turns a failure into a message on the record. The protocol layer imports a record type's
module when the first record of that type is met, so a log of a few types loads a few codecs.
"""

from __future__ import annotations

import functools
from typing import Any

from kraftpy.protocol import control_records
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.metadata_frame import decode_metadata_record, frame_class
from kraftpy.protocol.records import METADATA_TYPES

from .dumptext import compact_json
from .model import RecordInfo

_TYPE_NAMES: dict[int, str] = {t: row[2] for t, row in METADATA_TYPES.items()}


def type_name(type_id: int) -> str:
    return _TYPE_NAMES.get(type_id) or f"UNKNOWN_{type_id}"


def _text_function(prefix: bytes) -> tuple[Any, int] | None:
    """(generated text function, version) for values framed with this 3-byte prefix, when the
    protocol layer knows the frame (`metadata_frame.frame_class`) and its class has one."""
    frame = frame_class(prefix)
    if frame is None:
        return None
    fn = getattr(frame[0], "_TEXT", {}).get(frame[1])
    return None if fn is None else (fn, frame[1])


# Decoding depends only on a value's bytes, and metadata logs repeat themselves (NoOpRecords,
# fence/unfence of the same brokers, ...), so decoded values are kept by their bytes. Bounded:
# emptied when full, which costs one re-decode per distinct value.
Decoded = tuple[int, str, int, Any, "str | None", str]  # type id, name, version, data, json, error
_CACHE: dict[bytes, Decoded] = {}
_CACHE_LIMIT = 50_000


def _skipped(value: bytes, types: frozenset[str] | None) -> tuple[int, str, int] | None:
    """(type, name, version) of a value `types` leaves out, read off its frame's first three
    uvarints (one byte each for every type Kafka defines); None when it is to be decoded."""
    if types is not None and len(value) >= 3 and value[0] == 1 and value[1] < 0x80 \
            and value[2] < 0x80:
        name = type_name(value[1])
        if name not in types:
            return value[1], name, value[2]
    return None


def metadata_value(value: bytes | None, types: frozenset[str] | None = None) -> Decoded:
    """(type id, type name, version, data, JSON text, error) of a framed metadata value.

    With `types`, a record of another type keeps its type and version but is not decoded
    (data and JSON None).
    """
    if value is None:
        return -1, "", -1, None, None, "metadata record has a null value"
    hit = _CACHE.get(value)
    if hit is not None:
        return hit
    skipped = _skipped(value, types)
    if skipped is not None:
        return *skipped, None, None, ""
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


def text_codec(prefix: bytes) -> tuple[Any, int, str, int] | None:
    """(text function, type id, type name, version) for values framed with this 3-byte
    prefix, when a generated text function serves them (see `metadata_text` for its use)."""
    found = _text_function(prefix)
    if found is None:
        return None
    return found[0], prefix[1], _TYPE_NAMES[prefix[1]], found[1]


def metadata_text(value: bytes | None, types: frozenset[str] | None = None,
                  ) -> tuple[int, str, int, str | None, str]:
    """`metadata_value` without the data: (type id, type name, version, JSON text, error).

    The text comes straight from the bytes (the generated `_TEXT` functions, the same text as
    `compact_json(record.to_json(version))`). Those only agree with the object decoder on good
    input, so on any failure the value goes the object way, whose DecodeError is the report.
    """
    if value is not None and len(value) >= 3:
        if type(value) is not bytes:
            value = bytes(value)
        skipped = _skipped(value, types)
        if skipped is not None:
            return *skipped, None, ""
        found = _text_function(value[:3])
        if found is not None:
            try:
                text, end = found[0](value, 3)
            except Exception:  # noqa: BLE001 - decoded again below, which names the damage
                end = -1
            if end == len(value):
                return value[1], _TYPE_NAMES[value[1]], found[1], text, ""
    type_id, name, version, _, text, error = metadata_value(value, types)
    return type_id, name, version, text, error


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


def decode_metadata_text(rec: RecordInfo, key: bytes | None, value: bytes | None,
                         payloads: bool, types: frozenset[str] | None,
                         objects: bool = False) -> None:
    """`decode_metadata` for readers of the JSON text only: `data` stays None."""
    if objects or not payloads:
        decode_metadata(rec, key, value, payloads, types, objects)
        return
    rec.kind = "metadata"
    rec.type_id, rec.type_name, rec.version, rec.json, rec.error = metadata_text(value, types)


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
    """A `__transaction_state` record; `rec.record` keeps (key, value) for replay."""
    from kraftpy.protocol import txn_log  # its codecs load only for __transaction_state

    rec.kind = "txn"
    _coordinator(rec, txn_log.decode, key, value)
    if rec.json is not None:
        rec.record = (rec.record.key, rec.record.value)


def decode_offsets(rec: RecordInfo, key: bytes | None, value: bytes | None, payloads: bool,
                   types: frozenset[str] | None, objects: bool = False) -> None:
    """A `__consumer_offsets` record, its value as `--offsets-decoder` shows it."""
    from kraftpy.protocol import offsets_log  # its codecs load only for __consumer_offsets

    rec.kind = "offsets"
    _coordinator(rec, offsets_log.decode, key, value, offsets_log.value_json)


@functools.cache
def coordinator_type_names() -> frozenset[str]:
    """Every record type name the two coordinator logs have (TRANSACTION_LOG, OFFSET_COMMIT, ...)."""
    from kraftpy.protocol import offsets_log, txn_log

    return frozenset(t.name for table in (txn_log.RECORD_TYPES, offsets_log.RECORD_TYPES)
                     for t in table.values())


def _coordinator(rec: RecordInfo, decode: Any, key: bytes | None, value: bytes | None,
                 value_json: Any = None) -> None:
    """Type, key and value of a coordinator record. A record type the table does not know
    keeps `key_data` None and no error: Kafka's decoder skips it by name, and Kafka 4.1 has
    retired types that older logs still hold. A record that does not decode keeps the error."""
    from kraftpy.protocol.coordinator_records import UnknownRecordTypeError

    try:
        record = decode(key, value)
    except UnknownRecordTypeError as e:  # kind "coordinator": nothing for replay to read
        rec.kind, rec.type_id, rec.type_name = "coordinator", e.record_type, f"UNKNOWN_{e.record_type}"
        return
    except DecodeError as e:
        if key is not None and len(key) >= 2:
            rec.type_id = int.from_bytes(key[:2], "big", signed=True)
        rec.error = str(e)
        return
    rec.type_id, rec.type_name = record.record_type.id, record.record_type.name
    rec.key_data = record.key.to_json(0)
    if record.value is not None:
        rec.version = record.version
        rec.data = value_json(record) if value_json is not None else record.value.to_json(record.version)
    rec.json = compact_json({"key": rec.key_data, "value": rec.data})
    rec.record = record


def decode_data(rec: RecordInfo, key: bytes | None, value: bytes | None, payloads: bool,
                types: frozenset[str] | None, objects: bool = False) -> None:
    """A record of an ordinary topic: key and value as text, as Kafka's default decoder
    (StringDecoder: Java's UTF-8, malformed sequences shown as U+FFFD) prints them."""
    rec.type_name = DATA_TYPE
    if not payloads:
        return
    from .java_text import java_utf8

    rec.kind = "data"
    rec.key_data = None if key is None else java_utf8(bytes(key))
    rec.data = None if value is None else java_utf8(bytes(value))


DATA_TYPE = "DATA"


def _control_type(key: bytes | None) -> tuple[int, str]:
    if key is not None and len(key) >= 4:
        type_id = int.from_bytes(key[2:4], "big", signed=True)
        return type_id, "UNKNOWN"
    return -1, "UNKNOWN"
