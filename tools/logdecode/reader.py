"""Walk one log file (segment, snapshot, bootstrap.checkpoint): batches, records, problems.

Damage never stops the walk early without a report: a CRC mismatch is reported and its batch
still decoded (as Kafka's dump does, with `isvalid: false`); a batch whose records do not
parse is reported and skipped; a torn or garbage tail is reported with its size. Only bytes
that cannot be framed as batches end the walk, and then the rest of the file is reported.
"""

from __future__ import annotations

import mmap
from collections.abc import Iterator
from pathlib import Path

from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.record_batch import (
    CorruptBatchError,
    RecordBatch,
    TruncatedBatchError,
    iter_record_batches,
)

from .model import BatchInfo, Problem, RecordInfo, batch_info
from .paths import LogFile, LogKind
from .payload import (
    decode_control,
    decode_data,
    decode_metadata,
    decode_metadata_text,
    decode_offsets,
    decode_txn,
)

Event = BatchInfo | RecordInfo | Problem


def walk_batches(file: LogFile, data: bytes | None = None, *,
                 start: int = 0) -> Iterator[RecordBatch | Problem]:
    """Each batch view from `start` on (CRC not checked: callers report a mismatch and go on),
    then a Problem for an unreadable file or a tail that is not batches."""
    path = str(file.path)
    if data is None:
        try:
            data = read_file(Path(path))
        except OSError as e:
            yield Problem(path, 0, "io", f"cannot read: {e.strerror or e}")
            return
    pos = start
    end = len(data)
    try:
        for batch in iter_record_batches(data, start=start, verify_crc=False):
            pos = batch.end
            yield batch
    except TruncatedBatchError as e:
        yield Problem(path, _at(e, pos), "torn-tail",
                      f"{end - _at(e, pos)} bytes at the end do not form a batch: {e.reason}")
    except CorruptBatchError as e:
        yield Problem(path, _at(e, pos), "trailing-bytes",
                      f"{end - _at(e, pos)} bytes from here are not a record batch: {e.reason}")


def crc_problem(path: str, batch: RecordBatch) -> Problem:
    return Problem(path, batch.position, "crc",
                   f"CRC mismatch: stored {batch.crc}, computed {batch.compute_crc()}",
                   batch.base_offset)


def read_log_file(file: LogFile, data: bytes | None = None, *, payloads: bool = True,
                  types: frozenset[str] | None = None, objects: bool = False,
                  with_data: bool = True, records: str = "all") -> Iterator[Event]:
    """Yield each batch, then its records, with Problems where the bytes are damaged.

    Records are decoded by what their partition holds (`LogFile.log`): metadata records,
    the coordinators' records, or an ordinary topic's keys and values as text.
    `payloads=False` skips value decoding (type names are still read); `types` limits full
    decoding to those record type names (others keep type and version, no data); `objects`
    keeps each decoded record object on `RecordInfo.record` (for replay); `with_data=False`
    leaves a metadata record's `data` None and writes only its JSON text (faster);
    `records="none"` yields batches only (what Kafka's dump prints without --deep-iteration),
    `records="control"` the records of control batches only (a count of the rest is in the
    batch headers).
    """
    path = str(file.path)
    log = file.log
    if log is LogKind.TRANSACTION:
        decode_value = decode_txn
    elif log is LogKind.OFFSETS:
        decode_value = decode_offsets
    elif log is LogKind.DATA:
        decode_value = decode_data
    elif with_data:
        decode_value = decode_metadata
    else:
        decode_value = decode_metadata_text
    for batch in walk_batches(file, data):
        if type(batch) is Problem:
            yield batch
            continue
        info = batch_info(batch)
        yield info
        if not info.crc_valid:
            yield crc_problem(path, batch)
        if records == "all" or (records == "control" and info.is_control):
            yield from _records(path, batch, info, decode_value, payloads, types, objects)


def _records(path: str, batch: RecordBatch, info: BatchInfo, decode_value, payloads: bool,
             types: frozenset[str] | None, objects: bool) -> Iterator[Event]:
    try:
        records = batch.records()
    except DecodeError as e:
        yield Problem(path, batch.position, "bad-batch", e.reason, batch.base_offset)
        return
    base_seq = batch.base_sequence
    base_offset = batch.base_offset
    control = info.is_control
    for offset, timestamp, key, value, headers in records:
        rec = RecordInfo(
            offset, timestamp, -1 if key is None else len(key), -1 if value is None else len(value),
            -1 if base_seq < 0 else (base_seq + offset - base_offset) % 0x80000000,
            [h[0] for h in headers] if headers else _NO_HEADERS, "raw",
        )
        if control:
            decode_control(rec, key, value)
        elif decode_value is not None:
            decode_value(rec, key, value, payloads, types, objects)
        yield rec
        if rec.error:
            yield Problem(path, batch.position, "undecodable-record", rec.error, offset)


_NO_HEADERS: list[str] = []


def _at(error: DecodeError, default: int) -> int:
    return error.offset if error.offset is not None else default


def read_file(path: Path) -> bytes:
    """The whole file; large files are mapped rather than copied."""
    with path.open("rb") as f:
        size = path.stat().st_size
        if size < (1 << 20):
            return f.read()
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)  # type: ignore[return-value]
