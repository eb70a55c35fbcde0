"""Flat rows, one per record: what `dump-log --json` prints and what Spark's
`kraft-metadata` source yields, so the two cannot disagree.

Damage that is not tied to one record (a CRC mismatch, a torn tail, unreadable bytes) becomes
a row with no record type and the problem in `error`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from .audit import AuditRecord
from .paths import LogFile, classify, cluster_of
from .scan import json_text, scan

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
    for position, base, offset, epoch, timestamp, cols, _ in scan(file, data, types=types):
        yield (cluster, path, kind, position, base, offset, epoch, timestamp, *cols)


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


def json_head(cluster: str, file: str, kind: str) -> str:
    """The start of every JSON line of one file, up to the batch position."""
    return (f'{{"cluster":{json_text(cluster)},"file":{json_text(file)},"file_kind":"{kind}",'
            '"batch_position":')
