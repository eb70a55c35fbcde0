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

from .audit import AuditRecord
from .model import BatchInfo, RecordInfo
from .paths import LogFile, cluster_of
from .reader import read_log_file

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
    """Rows of one log file. `types` keeps only records of those type names (and problems)."""
    path = str(file.path)
    cluster = cluster_of(path, cluster)
    kind = file.kind.value
    batch: BatchInfo | None = None
    for event in read_log_file(file, data, types=types):
        if type(event) is RecordInfo:
            assert batch is not None
            if types is not None and event.type_name not in types:
                continue
            yield (cluster, path, kind, batch.position, batch.base_offset, event.offset,
                   batch.partition_leader_epoch, event.timestamp, batch.is_control,
                   event.type_name or None, event.version if event.version >= 0 else None,
                   _payload(event), event.error or None)
        elif type(event) is BatchInfo:
            batch = event
        elif event.kind != "undecodable-record":  # that one is already on its record's row
            yield (cluster, path, kind, event.position,
                   batch.base_offset if batch is not None else -1,
                   event.offset, batch.partition_leader_epoch if batch is not None else -1,
                   -1, False, None, None, None, f"{event.kind}: {event.message}")


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
    from .paths import classify
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
