"""The hot loop of `dump-log --json` and the Spark source: a log file's records as their
place and time plus a shared, cached tail.

Metadata logs repeat themselves: more than 95% of a real one is a NoOpRecord alone in its
batch every 500 ms, and much of the rest recurs (the same brokers fenced and unfenced). So what
a row says beyond place and time (control flag, type, version, payload, error, and those as the
end of a JSON line) is computed once per distinct value and shared by every record carrying
it. A batch of one record is looked up by its record bytes, which are the same in every NoOp
batch, so those records are not parsed again either. Anything else (a header that does not
frame, a CRC mismatch, control and transaction-log batches, several records) takes the general
way through `RecordBatch.records()`.

The coordinators' logs (`__transaction_state`, `__consumer_offsets`) take the general way
too, each record a row of its record type with `{"key": ..., "value": ...}` as payload. An
ordinary topic's files give no rows: their records are application data, not typed records.
"""

from __future__ import annotations

import functools
import json
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import crc32c
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.record_batch import (
    BATCH_HEADER,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    RecordBatch,
)

from .model import Problem, RecordInfo
from .paths import LogFile, LogKind
from .payload import (
    coordinator_type_names,
    decode_control,
    decode_offsets,
    decode_txn,
    metadata_text,
    text_codec,
)
from .reader import crc_problem, read_file, walk_batches

# control flag, record type, version, payload (JSON text), error: the last five row columns.
Cols = tuple[bool, "str | None", "int | None", "str | None", "str | None"]
# batch position, batch base offset, offset, leader epoch, timestamp, the columns, and the JSON
# text those columns end a line with (None for a report row: its offset may be null).
Item = tuple[int, int, "int | None", int, int, Cols, "str | None"]

_CRC_START = 21
# BATCH_HEADER without the fields the rows do not use (MaxTimestamp .. BaseSequence skipped).
_HEADER = struct.Struct(">qiibIhiq22xi")
assert _HEADER.size == BATCH_HEADER.size
_MIN_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
_PLAIN_DATA = 0x2F  # compression, LogAppendTime, control: any of these leaves the fast path
_CACHE_LIMIT = 50_000


# A metadata or coordinator record's key, value and headers are in its payload.
TAIL_END = ',"key":null,"value":null,"headers":null}'


def json_tail(cols: Cols) -> str:
    """The end of a JSON line from `is_control` on, as `records.row_json` writes it."""
    control, rtype, version, payload, error = cols
    return (f'"is_control":{"true" if control else "false"},'
            f'"record_type":{"null" if rtype is None else json_text(rtype)},'
            f'"version":{"null" if version is None else version},'
            f'"payload":{"null" if payload is None else payload},'
            f'"error":{"null" if error is None else json_text(error)}{TAIL_END}')


@functools.lru_cache(maxsize=4096)
def json_text(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


class _Caches:
    """Per `types` filter: tails by value bytes, (offset delta, timestamp delta, tail) by the
    record bytes of one-record batches, and what a frame prefix (type and version) needs to
    write a tail: the text function and the tail's start (or False: not kept by `types`, None:
    the general way). Bounded: emptied when full."""

    def __init__(self) -> None:
        self.values: dict[bytes, tuple[Cols, str] | None] = {}
        self.singles: dict[bytes, tuple[int, int, Cols | None, str | None]] = {}
        self.prefixes: dict[bytes, tuple[Any, str, int, str] | bool | None] = {}


_CACHES: dict[frozenset[str] | None, _Caches] = {}


def _prefix_way(prefix: bytes, types: frozenset[str] | None,
                prefixes: dict[bytes, tuple[Any, str, int, str] | bool | None],
                ) -> tuple[Any, str, int, str] | bool | None:
    found = text_codec(prefix) if len(prefix) == 3 else None
    way: tuple[Any, str, int, str] | bool | None = None
    if found is not None:
        fn, _, name, version = found
        if types is not None and name not in types:
            way = False
        else:
            tail = json_tail((False, name, version, "", None))
            way = (fn, name, version, tail[:tail.index('"payload":') + 10])
    prefixes[bytes(prefix)] = way
    return way


def _value_tail(value: bytes | None, types: frozenset[str] | None,
                cache: dict[bytes, tuple[Cols, str] | None]) -> tuple[Cols, str] | None:
    """The tail of a metadata record's value; None when `types` leaves it out."""
    if value is not None:
        hit = cache.get(value, False)
        if hit is not False:
            return hit  # type: ignore[return-value]
        prefixes = _CACHES[types].prefixes
        way = prefixes.get(value[:3], True)
        if way is True:
            way = _prefix_way(value[:3], types, prefixes)
        if way is False:
            return None
        if way is not None:  # the usual case: text straight from the bytes
            fn, name, version, lead = way  # type: ignore[misc]
            try:
                text, end = fn(value, 3)
            except Exception:  # noqa: BLE001 - the general way below names the damage
                end = -1
            if end == len(value):
                tail = ((False, name, version, text, None), f'{lead}{text},"error":null{TAIL_END}')
                if len(cache) >= _CACHE_LIMIT:
                    cache.clear()
                cache[value if type(value) is bytes else bytes(value)] = tail
                return tail
    _, name, version, text, error = metadata_text(value, types)
    tail: tuple[Cols, str] | None = None
    if types is None or name in types:
        cols: Cols = (False, name or None, version if version >= 0 else None, text, error or None)
        tail = (cols, json_tail(cols))
    if value is not None:
        if len(cache) >= _CACHE_LIMIT:
            cache.clear()
        cache[bytes(value)] = tail
    return tail


def scan(file: LogFile, data: Any = None, *, types: frozenset[str] | None = None) -> Iterator[Item]:
    """Every record of one file and every problem in it, in file order (nothing for an
    ordinary topic's file)."""
    path = str(file.path)
    log = file.log
    if log is LogKind.DATA:
        return
    if data is None:
        try:
            data = read_file(Path(path))
        except OSError as e:
            yield _problem(Problem(path, 0, "io", f"cannot read: {e.strerror or e}"), None)
            return
    caches = _CACHES.get(types)
    if caches is None:
        caches = _CACHES[types] = _Caches()
    values, singles = caches.values, caches.singles
    # a coordinator log's batches all take the general way, with its decoder
    coordinator = {LogKind.TRANSACTION: decode_txn, LogKind.OFFSETS: decode_offsets}.get(log)
    if coordinator is not None and types is not None and not any(
            t.startswith("UNKNOWN_") or t in coordinator_type_names() for t in types):
        return  # `types` names only metadata records: nothing here to decode
    get = values.get
    unpack = _HEADER.unpack_from
    view = memoryview(data)
    crc_of = crc32c.crc32c
    pos, end = 0, len(data)
    last = end - RECORD_BATCH_OVERHEAD
    while pos <= last:
        base, length, epoch, magic, crc, attrs, delta, base_ts, count = unpack(data, pos)
        stop = pos + LOG_OVERHEAD + length
        if length < _MIN_LENGTH or magic != 2 or stop > end or count < 0 or delta < 0:
            break
        if not attrs & _PLAIN_DATA and not coordinator and crc_of(view[pos + _CRC_START:stop]) == crc:
            if count == 1:
                key = data[pos + RECORD_BATCH_OVERHEAD:stop]
                hit = singles.get(key)
                if hit is None:
                    hit = _learn_single(RecordBatch(data, pos), key, types, values, singles)
                if hit is not None:
                    if hit[2] is not None:
                        yield pos, base, base + hit[0], epoch, base_ts + hit[1], hit[2], hit[3]
                    pos = stop
                    continue
            else:  # a plain batch of several metadata records: their tails, inline
                try:
                    records = RecordBatch(data, pos).records()
                except DecodeError:
                    records = None  # the general way reports it
                if records is not None:
                    for offset, timestamp, _key, value, _headers in records:
                        tail = get(value, False) if value is not None else False
                        if tail is False:
                            tail = _value_tail(value, types, values)
                        if tail is not None:
                            yield pos, base, offset, epoch, timestamp, tail[0], tail[1]
                    pos = stop
                    continue
        yield from _batch(path, RecordBatch(data, pos), types, values, coordinator)
        pos = stop
    if pos < end:  # a header that does not frame: the general walk reports it
        for batch in walk_batches(file, data, start=pos):
            if type(batch) is Problem:
                yield _problem(batch, None)
            else:
                yield from _batch(path, batch, types, values, coordinator)
    view.release()


def _learn_single(batch: RecordBatch, key: bytes, types: frozenset[str] | None,
                  values: dict[bytes, tuple[Cols, str] | None],
                  singles: dict[bytes, tuple[int, int, Cols | None, str | None]],
                  ) -> tuple[int, int, Cols | None, str | None] | None:
    try:
        records = batch.records()
    except DecodeError:
        return None  # the general way reports it
    if len(records) != 1:
        return None
    offset, timestamp, _, value, _ = records[0]
    tail = _value_tail(value, types, values)
    hit = (offset - batch.base_offset, timestamp - batch.base_timestamp,
           None if tail is None else tail[0], None if tail is None else tail[1])
    if len(singles) >= _CACHE_LIMIT:
        singles.clear()
    singles[bytes(key)] = hit
    return hit


def _batch(path: str, batch: RecordBatch, types: frozenset[str] | None,
           values: dict[bytes, tuple[Cols, str] | None], coordinator: Any) -> Iterator[Item]:
    position, base, epoch = batch.position, batch.base_offset, batch.partition_leader_epoch
    if not batch.crc_valid():
        yield _problem(crc_problem(path, batch), batch)
    try:
        records = batch.records()
    except DecodeError as e:
        yield _problem(Problem(path, position, "bad-batch", e.reason, base), batch)
        return
    control = batch.is_control
    if control or coordinator:
        for offset, timestamp, key, value, _headers in records:
            rec = RecordInfo(offset, timestamp, 0, 0, -1, [], "raw")
            if control:
                decode_control(rec, key, value)
            else:
                coordinator(rec, key, value, True, None)
            if types is not None and rec.type_name not in types:
                continue
            cols: Cols = (control, rec.type_name or None, rec.version if rec.version >= 0 else None,
                          None if rec.error else rec.json, rec.error or None)
            yield position, base, offset, epoch, timestamp, cols, json_tail(cols)
        return
    get = values.get
    for offset, timestamp, _key, value, _headers in records:
        tail = get(value, False) if value is not None else False  # type: ignore[call-overload]
        if tail is False:
            tail = _value_tail(value, types, values)
        if tail is not None:
            yield position, base, offset, epoch, timestamp, tail[0], tail[1]


def _problem(problem: Problem, batch: RecordBatch | None) -> Item:
    cols: Cols = (False, None, None, None, f"{problem.kind}: {problem.message}")
    if batch is None:
        return problem.position, -1, problem.offset, -1, -1, cols, None
    return (problem.position, batch.base_offset, problem.offset, batch.partition_leader_epoch, -1,
            cols, None)
