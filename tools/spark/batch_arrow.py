"""The `batches` table's Arrow columns for a segment, read with numpy straight from the batch
headers in the file's bytes (the rows of `batches.batch_row`, in BATCH_TABLE_FIELDS' types).

The walk (`batches.scan_batches`: lengths, CRCs, markers) is per batch in Python; the rest is
one gather of every 61-byte header into a numpy record array and column arithmetic, so a
segment of a million batches makes no Python object per field. Spark's workers have numpy
(the `spark` extra's pandas needs it); nothing else imports this module.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
from kraftpy.tools.logdecode.batches import (
    ABORT,
    BATCH_TABLE_FIELDS,
    COMMIT,
    CONTROL_NAMES,
    NO_CONTROL,
    Batch,
    scan_batches,
)
from kraftpy.tools.logdecode.paths import LogFile
from kraftpy.tools.logdecode.reader import read_file

# RecordBatch v2's header, as it lies in the file (big-endian, packed: 61 bytes).
HEADER = np.dtype([
    ("base_offset", ">i8"), ("length", ">i4"), ("leader_epoch", ">i4"), ("magic", "i1"),
    ("crc", ">u4"), ("attributes", ">i2"), ("last_offset_delta", ">i4"),
    ("first_timestamp", ">i8"), ("max_timestamp", ">i8"), ("producer_id", ">i8"),
    ("producer_epoch", ">i2"), ("base_sequence", ">i4"), ("record_count", ">i4"),
])
assert HEADER.itemsize == 61
_OFFSETS = np.arange(61, dtype=np.int64)
_COMPRESSION = ["none", "gzip", "snappy", "lz4", "zstd", "5", "6", "7"]


def segment_batches(pa: Any, segment: LogFile, where: tuple[str, str, str, int],
                    rows: int = 20_000) -> Iterator[Any]:
    """Arrow record batches (`rows` at most) of the segment's `batches` table rows."""
    data = read_file(segment.path)
    found = [b for b in scan_batches(segment, data) if type(b) is Batch]
    schema = pa.schema([(n, _arrow(pa, k)) for n, k in BATCH_TABLE_FIELDS])
    for start in range(0, len(found), rows):
        yield _columns(pa, schema, data, found[start:start + rows], where, str(segment.path),
                       segment.base_offset)


def _arrow(pa: Any, kind: str) -> Any:
    return {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64(),
            "boolean": pa.bool_()}[kind]


def _columns(pa: Any, schema: Any, data: Any, batches: list[Batch],
             where: tuple[str, str, str, int], path: str, segment: int) -> Any:
    n = len(batches)
    raw = np.frombuffer(data, dtype=np.uint8)
    positions = np.fromiter((b[0] for b in batches), dtype=np.int64, count=n)
    h = raw[positions[:, None] + _OFFSETS].view(HEADER).ravel()
    base = h["base_offset"].astype(np.int64)
    delta = h["last_offset_delta"].astype(np.int64)
    attributes = h["attributes"].astype(np.int64)
    base_sequence = h["base_sequence"].astype(np.int64)
    last_sequence = np.where(base_sequence < 0, -1, (base_sequence + delta) % 0x80000000)
    control = [b[13] for b in batches]
    markers = [None if c not in (ABORT, COMMIT) else b[14] for c, b in zip(control, batches,
                                                                             strict=True)]
    names = [None if c == NO_CONTROL else CONTROL_NAMES.get(c, f"UNKNOWN({c})") if c >= 0
             else "UNKNOWN" for c in control]
    cluster, broker, topic, partition = where
    i32, i64 = pa.int32(), pa.int64()
    columns = [
        pa.repeat(pa.scalar(cluster, pa.string()), n),
        pa.repeat(pa.scalar(broker, pa.string()), n),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, i32), n),
        pa.repeat(pa.scalar(path, pa.string()), n),
        pa.repeat(pa.scalar(segment, i64), n),
        pa.array(positions, i64),
        pa.array(base, i64),
        pa.array(base + delta, i64),
        pa.array(h["record_count"].astype(np.int32), i32),
        pa.array((h["length"].astype(np.int64) + 12).astype(np.int32), i32),
        pa.array(h["leader_epoch"].astype(np.int32), i32),
        pa.array(h["first_timestamp"].astype(np.int64), i64),
        pa.array(h["max_timestamp"].astype(np.int64), i64),
        pa.array(["CreateTime", "LogAppendTime"]).take(pa.array((attributes >> 3) & 1)),
        pa.array(_COMPRESSION).take(pa.array(attributes & 7)),
        pa.array(h["producer_id"].astype(np.int64), i64),
        pa.array(h["producer_epoch"].astype(np.int32), i32),
        pa.array(base_sequence.astype(np.int32), i32),
        pa.array(last_sequence.astype(np.int32), i32),
        pa.array((attributes & 0x10) != 0),
        pa.array((attributes & 0x20) != 0),
        pa.array(names, pa.string()),
        pa.array(markers, i32),
        pa.array(h["crc"].astype(np.int64), i64),
        pa.array([b[12] for b in batches], pa.bool_()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)
