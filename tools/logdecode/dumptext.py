"""The text layout of Kafka 4.1's `kafka-dump-log.sh`, line for line, so people who know
Kafka's tool can read ours (and diff the two): `--cluster-metadata-decoder` for metadata logs,
`--transaction-log-decoder` and `--offsets-decoder` for the coordinators' logs, and the default
decoder (`--print-data-log` for keys and values) for ordinary topics."""

from __future__ import annotations

import json

from .model import BatchInfo, Problem, RecordInfo
from .paths import FileKind, LogFile


def file_header(file: LogFile, shown_path: str) -> list[str]:
    lines = [f"Dumping {shown_path}"]
    if file.kind is FileKind.SEGMENT:
        lines.append(f"Log starting offset: {file.base_offset}")
    elif file.kind is FileKind.BOOTSTRAP:
        lines.append("KRaft bootstrap snapshot")
    elif file.kind is FileKind.SNAPSHOT:
        lines.append(f"Snapshot end offset: {file.base_offset}, epoch: {file.snapshot_epoch}")
    return lines


def batch_line(batch: BatchInfo, position: int) -> str:
    horizon = batch.delete_horizon_ms
    return (
        f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} "
        f"count: {batch.record_count} baseSequence: {batch.base_sequence} "
        f"lastSequence: {batch.last_sequence} producerId: {batch.producer_id} "
        f"producerEpoch: {batch.producer_epoch} partitionLeaderEpoch: {batch.partition_leader_epoch} "
        f"isTransactional: {_bool(batch.is_transactional)} isControl: {_bool(batch.is_control)} "
        f"deleteHorizonMs: {'OptionalLong.empty' if horizon is None else f'OptionalLong[{horizon}]'} "
        f"position: {position} {batch.timestamp_type}: {batch.max_timestamp} size: {batch.size} "
        f"magic: {batch.magic} compresscodec: {batch.compression} crc: {batch.crc} "
        f"isvalid: {_bool(batch.crc_valid)}"
    )


# Control records Kafka pretty-prints, and the label it puts before the JSON.
_CONTROL_LABELS = {
    "LeaderChange": "LeaderChange:",
    "SnapshotHeader": "SnapshotHeader",
    "SnapshotFooter": "SnapshotFooter",
    "KRaftVersion": "KRaftVersion",
    "KRaftVoters": "KRaftVoters",
}


def record_line(batch: BatchInfo, record: RecordInfo) -> str:
    line = (
        f"| offset: {record.offset} {batch.timestamp_type}: {record.timestamp} "
        f"keySize: {record.key_size} valueSize: {record.value_size} "
        f"sequence: {record.sequence} headerKeys: [{','.join(record.header_keys)}]"
    )
    return line + _record_tail(record)


def _record_tail(record: RecordInfo) -> str:
    if record.kind == "control":
        if record.error:
            return f" controlType: {record.type_name}({record.type_id}) error: {record.error}"
        if record.type_name in ("ABORT", "COMMIT"):
            return f" endTxnMarker: {record.type_name} coordinatorEpoch: {record.data['coordinatorEpoch']}"
        label = _CONTROL_LABELS.get(record.type_name)
        if label is None:
            return f" controlType: {record.type_name}({record.type_id})"
        return f" {label} {record.json}"
    if record.kind in _COORDINATOR_KINDS:
        return _coordinator_tail(record)
    if record.kind == "data":
        return _data_tail(record)
    if record.value_size < 0:  # no value: Kafka's decoder prints no payload at all
        return ""
    if record.error:
        return f" payload: Error at {record.offset}, skipping. {record.error}"
    if record.kind == "metadata":
        return f' payload: {{"type":"{record.type_name}","version":{record.version},"data":{record.json}}}'
    return ""


_COORDINATOR_KINDS = frozenset(("txn", "offsets", "coordinator"))


def _coordinator_tail(record: RecordInfo) -> str:
    """`--transaction-log-decoder` / `--offsets-decoder`: the key as {"type","data"}, the
    value as {"version","data"} (both numbers as text) or <DELETE> for a tombstone."""
    if record.error:
        return f" key: Error at offset {record.offset}, skipping. {record.error}"
    if record.key_data is None:
        return f" key: Unknown record type {record.type_id} at offset {record.offset}, skipping."
    key = compact_json({"type": str(record.type_id), "data": record.key_data})
    if record.version < 0:
        return f" key: {key} payload: <DELETE>"
    return f" key: {key} payload: {compact_json({'version': str(record.version), 'data': record.data})}"


def _data_tail(record: RecordInfo) -> str:
    """The default decoder with --print-data-log: key and value as text, each when present."""
    key = "" if record.key_data is None else f" key: {record.key_data}"
    return key if record.data is None else f"{key} payload: {record.data}"


def trailing_bytes_line(count: int, file_name: str) -> str:
    return f"Found {count} invalid bytes at the end of {file_name}"


def problem_line(problem: Problem) -> str:
    where = f"position {problem.position}"
    if problem.offset is not None:
        where += f", offset {problem.offset}"
    return f"{problem.path}: {problem.kind} at {where}: {problem.message}"


# JSON as Jackson writes it: no spaces, non-ASCII kept as is. One encoder for all calls
# (json.dumps with options builds a new one each time, which doubles the cost).
compact_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def _bool(value: bool) -> str:
    return "true" if value else "false"
