"""Every record of every partition as one flat row: what `dump-log --json` prints and what the
Spark `kafka-log` source yields, so the two cannot disagree.

A row is the metadata row of `rows.ROW_FIELDS` (what the `kraft-metadata` source yields) plus
where the record lives (topic, partition), the batch fields exactly-once depends on (producer
id and epoch, base and last sequence, the transactional bit, the partition leader epoch, which
is `leader_epoch`), the record's own sequence, a transaction marker's coordinator epoch, and
for records of ordinary topics their key, value and headers as bytes (as text, decoded as
Kafka's StringDecoder does, when asked). Metadata and coordinator records keep their key and
value decoded in `payload`, so their key, value and headers are null.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.record_batch import BATCH_HEADER

from .java_text import java_utf8
from .model import Problem, RecordInfo
from .paths import LogFile, LogKind, cluster_of
from .payload import DATA_TYPE, decode_control
from .reader import crc_problem, read_file, walk_batches
from .rows import ROW_FIELDS
from .scan import json_text, scan

# The columns after `timestamp_ms` and before `is_control`, then those after `error`.
BATCH_FIELDS: tuple[tuple[str, str], ...] = (
    ("topic", "string"),
    ("partition", "int"),
    ("batch_last_offset", "bigint"),
    ("producer_id", "bigint"),
    ("producer_epoch", "int"),
    ("base_sequence", "int"),
    ("last_sequence", "int"),
    ("is_transactional", "boolean"),
    ("timestamp_type", "string"),
    ("compression", "string"),
    ("sequence", "int"),
    ("coordinator_epoch", "int"),
)
BYTES_FIELDS: tuple[tuple[str, str], ...] = (
    ("key", "binary"),
    ("value", "binary"),
    ("headers", "array<struct<key:string,value:binary>>"),
)
FULL_FIELDS = ROW_FIELDS[:8] + BATCH_FIELDS + ROW_FIELDS[8:] + BYTES_FIELDS
FULL_NAMES = tuple(name for name, _ in FULL_FIELDS)


def full_fields(text: bool = False) -> tuple[tuple[str, str], ...]:
    """The row's (name, Spark type) pairs; `text` makes key, value and header values strings."""
    if not text:
        return FULL_FIELDS
    return FULL_FIELDS[:-3] + (("key", "string"), ("value", "string"),
                               ("headers", "array<struct<key:string,value:string>>"))


def full_ddl(text: bool = False) -> str:
    return ", ".join(f"{name} {kind}" for name, kind in full_fields(text))


_COMPRESSION = ("none", "gzip", "snappy", "lz4", "zstd")
NO_BATCH = (None,) * 8  # batch_last_offset .. compression, for a row outside any batch


def batch_part(header: tuple[int, ...]) -> tuple[Any, ...]:
    """batch_last_offset .. compression from an unpacked BATCH_HEADER."""
    base, attrs, delta, pid, pepoch, base_seq = header[0], header[5], header[6], header[9], \
        header[10], header[11]
    codec = attrs & 7
    return (base + delta, pid, pepoch, base_seq,
            -1 if base_seq < 0 else (base_seq + delta) % 0x80000000, bool(attrs & 0x10),
            "LogAppendTime" if attrs & 0x08 else "CreateTime",
            _COMPRESSION[codec] if codec < len(_COMPRESSION) else f"unknown({codec})")


def location(file: LogFile) -> tuple[str | None, int | None]:
    """(topic, partition) of a file in a partition folder; (None, None) outside one."""
    if not file.partition:
        return None, None
    topic, _, number = file.partition.rpartition("-")
    return topic, int(number)


def record_rows(file: LogFile, cluster: str = "", *, text: bool = False,
                data: Any = None) -> Iterator[tuple[Any, ...]]:
    """Every record of one log file as a full row (FULL_NAMES order), damage as rows with no
    record type and the problem in `error`."""
    path = str(file.path)
    cluster = cluster_of(path, cluster)
    kind = file.kind.value
    topic, partition = location(file)
    if data is None:
        try:
            data = read_file(Path(path))
        except OSError as e:
            yield (cluster, path, kind, 0, -1, None, -1, -1, topic, partition, *NO_BATCH,
                   None, None, False, None, None, None, f"io: cannot read: {e.strerror or e}",
                   None, None, None)
            return
    head = (cluster, path, kind)
    if file.log is LogKind.DATA:
        yield from _data_rows(file, data, head, topic, partition, text)
        return
    unpack = BATCH_HEADER.unpack_from
    last_position, part = -1, NO_BATCH
    for position, base, offset, epoch, timestamp, cols, _ in scan(file, data):
        if base < 0:
            part, last_position = NO_BATCH, -1
        elif position != last_position:
            part, last_position = batch_part(unpack(data, position)), position
        sequence = None if offset is None or part[3] is None else (
            -1 if part[3] < 0 else (part[3] + offset - base) % 0x80000000)
        yield (*head, position, base, offset, epoch, timestamp, topic, partition, *part,
               sequence, marker_epoch(cols[0], cols[1], cols[3]), *cols, None, None, None)


def marker_epoch(control: bool, record_type: str | None, payload: str | None) -> int | None:
    """The coordinator epoch of an ABORT/COMMIT marker row (from its payload)."""
    if control and record_type in ("ABORT", "COMMIT") and payload is not None:
        return json.loads(payload)["coordinatorEpoch"]
    return None


def _data_rows(file: LogFile, data: Any, head: tuple[str, str, str], topic: str | None,
               partition: int | None, text: bool) -> Iterator[tuple[Any, ...]]:
    path = head[1]
    as_value = java_utf8 if text else bytes
    for batch in walk_batches(file, data):
        if type(batch) is Problem:
            yield (*head, batch.position, -1, batch.offset, -1, -1, topic, partition, *NO_BATCH,
                   None, None, False, None, None, None, f"{batch.kind}: {batch.message}", None,
                   None, None)
            continue
        h = batch.header
        part = batch_part(h)
        position, base, epoch, base_seq = batch.position, h[0], h[2], h[11]
        if not batch.crc_valid():
            problem = crc_problem(path, batch)
            yield (*head, position, base, problem.offset, epoch, -1, topic, partition, *part,
                   None, None, False, None, None, None, f"crc: {problem.message}", None, None,
                   None)
        try:
            records = batch.records()
        except DecodeError as e:
            yield (*head, position, base, base, epoch, -1, topic, partition, *part, None, None,
                   False, None, None, None, f"bad-batch: {e.reason}", None, None, None)
            continue
        control = bool(h[5] & 0x20)
        for offset, timestamp, key, value, headers in records:
            sequence = -1 if base_seq < 0 else (base_seq + offset - base) % 0x80000000
            if control:
                rec = RecordInfo(offset, timestamp, 0, 0, -1, [], "raw")
                decode_control(rec, key, value)
                cols = (True, rec.type_name or None, rec.version if rec.version >= 0 else None,
                        None if rec.error else rec.json, rec.error or None)
                yield (*head, position, base, offset, epoch, timestamp, topic, partition, *part,
                       sequence, marker_epoch(*cols[:2], cols[3]), *cols, None, None, None)
                continue
            yield (*head, position, base, offset, epoch, timestamp, topic, partition, *part,
                   sequence, None, False, DATA_TYPE, None, None, None,
                   None if key is None else as_value(key),
                   None if value is None else as_value(value),
                   [(k, None if v is None else as_value(v)) for k, v in headers])


def row_json(row: tuple[Any, ...]) -> str:
    """A full row as one JSON line: payload nested, bytes as base64 (text rows as they are)."""
    out = dict(zip(FULL_NAMES, row, strict=True))
    if out["payload"] is not None:
        out["payload"] = _Raw(out["payload"])
    out["key"], out["value"] = _json_bytes(out["key"]), _json_bytes(out["value"])
    if out["headers"] is not None:
        out["headers"] = [{"key": k, "value": _json_bytes(v)} for k, v in out["headers"]]
    return _encode(out)


def row_dict(row: tuple[Any, ...]) -> dict[str, Any]:
    """A full row as `row_json` prints it, parsed back (for tests and jq-like use)."""
    return json.loads(row_json(row))


class _Raw(str):
    """JSON text to embed as is."""


def _json_bytes(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    return value


def _encode(row: dict[str, Any]) -> str:
    parts = []
    for name, value in row.items():
        if isinstance(value, _Raw):
            text = str(value)
        elif value is None:
            text = "null"
        elif value is True:
            text = "true"
        elif value is False:
            text = "false"
        elif isinstance(value, int):
            text = str(value)
        elif isinstance(value, str):
            text = json_text(value) if len(value) < 256 else json.dumps(value, ensure_ascii=False)
        else:
            text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        parts.append(f'"{name}":{text}')
    return "{" + ",".join(parts) + "}"
