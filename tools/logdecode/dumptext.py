"""The text layout of Kafka's `kafka-dump-log.sh --cluster-metadata-decoder`, line for line,
so people who know Kafka's tool can read ours (and diff the two)."""

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
    if record.kind == "txn":
        return _txn_tail(record)
    if record.value_size < 0:  # no value: Kafka's decoder prints no payload at all
        return ""
    if record.error:
        return f" payload: Error at {record.offset}, skipping. {record.error}"
    if record.kind == "metadata":
        return f' payload: {{"type":"{record.type_name}","version":{record.version},"data":{record.json}}}'
    return ""


_TXN_STATES = ("Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
               "CompleteAbort", "Dead", "PrepareEpochFence")


def _txn_tail(record: RecordInfo) -> str:
    """Kafka's `--transaction-log-decoder` form: `key: transaction_metadata::...`."""
    if record.error:
        return f" key: Error at offset {record.offset}, skipping. {record.error}"
    key = f" key: transaction_metadata::transactionalId={record.key_data['transactionalId']}"
    value = record.data
    if value is None:
        return key + " payload: <DELETE>"
    status = value["transactionStatus"]
    state = _TXN_STATES[status] if 0 <= status < len(_TXN_STATES) else f"Unknown({status})"
    partitions = [f"{t['topic']}-{p}" for t in value.get("transactionPartitions") or []
                  for p in t["partitionIds"]]
    return (
        f"{key} payload: producerId:{value['producerId']},producerEpoch:{value['producerEpoch']},"
        f"state={state},partitions=[{','.join(partitions)}],"
        f"txnLastUpdateTimestamp={value['transactionLastUpdateTimestampMs']},"
        f"txnTimeoutMs={value['transactionTimeoutMs']}"
    )


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
