"""Flat rows, one per record: what `dump-log --json` prints and what Spark's
`kraft-metadata` source yields, so the two cannot disagree.

Damage that is not tied to one record (a CRC mismatch, a torn tail, unreadable bytes) becomes
a row with no record type and the problem in `error`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

from kraftpy.protocol.errors import DecodeError

from .audit import AuditRecord
from .model import Problem, RecordInfo
from .paths import LogFile, classify, cluster_of
from .payload import decode_control, decode_metadata, decode_txn, metadata_value
from .reader import crc_problem, walk_batches

# (name, Spark SQL type) in row order.
ROW_FIELDS: tuple[tuple[str, str], ...] = (
    ("cluster", "string"),
    ("file", "string"),
    ("file_kind", "string"),
    ("batch_position", "bigint"),
    ("batch_base_offset", "bigint"),
    ("offset", "bigint"),
    ("leader_epoch", "int"),
    ("timestamp_ms", "bigint"),
    ("is_control", "boolean"),
    ("record_type", "string"),
    ("version", "int"),
    ("payload", "string"),
    ("error", "string"),
)
ROW_NAMES = tuple(name for name, _ in ROW_FIELDS)
ROW_DDL = ", ".join(f"{name} {kind}" for name, kind in ROW_FIELDS)

Row = tuple[str, str, str, int, int, int | None, int, int, bool, str | None, int | None,
            str | None, str | None]


def file_rows(file: LogFile, cluster: str = "", *, types: frozenset[str] | None = None,
              data: bytes | None = None) -> Iterator[Row]:
    """Rows of one log file. `types` keeps only records of those type names (and problems).

    Metadata records take a lean path (this is the hot loop of dump-log --json and of Spark);
    control and transaction-log records go through the reader's RecordInfo.
    """
    path = str(file.path)
    cluster = cluster_of(path, cluster)
    kind = file.kind.value
    decode_value = decode_txn if file.is_transaction_log else decode_metadata
    for batch in walk_batches(file, data):
        if type(batch) is Problem:
            yield _problem_row(cluster, path, kind, batch, None)
            continue
        position, base, epoch = batch.position, batch.base_offset, batch.partition_leader_epoch
        if not batch.crc_valid():
            yield _problem_row(cluster, path, kind, crc_problem(path, batch), batch)
        try:
            records = batch.records()
        except DecodeError as e:
            yield _problem_row(cluster, path, kind,
                               Problem(path, position, "bad-batch", e.reason, base), batch)
            continue
        if batch.is_control or decode_value is decode_txn:
            control = batch.is_control
            for offset, timestamp, key, value, _headers in records:
                rec = RecordInfo(offset, timestamp, 0, 0, -1, [], "raw")
                if control:
                    decode_control(rec, key, value)
                else:
                    decode_txn(rec, key, value, True, None)
                if types is not None and rec.type_name not in types:
                    continue
                yield (cluster, path, kind, position, base, offset, epoch, timestamp, control,
                       rec.type_name or None, rec.version if rec.version >= 0 else None,
                       None if rec.error else rec.json, rec.error or None)
            continue
        for offset, timestamp, _key, value, _headers in records:
            _, name, version, _, text, error = metadata_value(value, types)
            if types is not None and name not in types:
                continue
            yield (cluster, path, kind, position, base, offset, epoch, timestamp, False,
                   name or None, version if version >= 0 else None, text, error or None)


def _problem_row(cluster: str, path: str, kind: str, problem: Problem, batch: Any) -> Row:
    return (cluster, path, kind, problem.position, -1 if batch is None else batch.base_offset,
            problem.offset, -1 if batch is None else batch.partition_leader_epoch, -1, False,
            None, None, None, f"{problem.kind}: {problem.message}")


def _payload(rec: RecordInfo) -> str | None:
    return None if rec.error else rec.json


def row_dict(row: Row) -> dict[str, Any]:
    """The JSON-lines form: payload as a nested object, for jq."""
    out = dict(zip(ROW_NAMES, row, strict=True))
    if out["payload"] is not None:
        out["payload"] = json.loads(out["payload"])
    return out


def audit_record(row: Row | dict[str, Any]) -> AuditRecord:
    """A row (tuple or dict with a JSON-text payload) as the audit's input."""
    r = dict(zip(ROW_NAMES, row, strict=True)) if isinstance(row, tuple) else row
    payload = r["payload"]
    end = classify(r["file"]).base_offset if r["file_kind"] == "snapshot" else -1
    return AuditRecord(r["cluster"], r["file_kind"], end, r["offset"], r["timestamp_ms"],
                       r["record_type"], json.loads(payload) if isinstance(payload, str) else payload)


def row_json(row: Row) -> str:
    """`row_dict(row)` as compact JSON text, without parsing the payload back."""
    (cluster, file, kind, position, base, offset, epoch, timestamp, control, rtype, version,
     payload, error) = row
    return (
        f'{{"cluster":{_text(cluster)},"file":{_text(file)},"file_kind":"{kind}",'
        f'"batch_position":{position},"batch_base_offset":{base},'
        f'"offset":{"null" if offset is None else offset},"leader_epoch":{epoch},'
        f'"timestamp_ms":{timestamp},"is_control":{"true" if control else "false"},'
        f'"record_type":{"null" if rtype is None else _text(rtype)},'
        f'"version":{"null" if version is None else version},'
        f'"payload":{"null" if payload is None else payload},'
        f'"error":{"null" if error is None else _text(error)}}}'
    )


@functools.lru_cache(maxsize=4096)
def _text(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)
