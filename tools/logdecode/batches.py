"""A log segment's batches as the exactly-once audit reads them: headers only, CRC checked,
each transaction marker's type and coordinator epoch read from its one record.

Exactly-once state lives in batch headers (producer id, epoch, base sequence, the
transactional and control bits, the record count); Kafka's own ProducerStateManager never
opens a data batch's records either. So a segment of any size costs one header unpack and one
CRC-32C per batch, whatever the batch holds and however it is compressed.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import crc32c
from kraftpy.protocol.control_records import parse_control_key, parse_end_txn_marker
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.record_batch import (
    BATCH_HEADER,
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    RecordBatch,
)

from .model import Problem
from .paths import LogFile
from .reader import read_file, walk_batches

ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
NO_CONTROL = -1  # a data batch
UNREADABLE_CONTROL = -2  # a control batch whose record does not decode
ABORT, COMMIT = 0, 1
CONTROL_NAMES = {ABORT: "ABORT", COMMIT: "COMMIT", 2: "LeaderChange", 3: "SnapshotHeader",
                 4: "SnapshotFooter", 5: "KRaftVersion", 6: "KRaftVoters"}
_CRC_START = 21
_MIN_LENGTH = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD


class Batch(NamedTuple):
    """One batch header, where it sits, and its marker if it is one."""

    position: int
    base_offset: int
    last_offset: int
    record_count: int
    size: int  # bytes, the offset and length fields included
    leader_epoch: int
    attributes: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    crc_valid: bool
    control_type: int  # NO_CONTROL, ABORT, COMMIT, another control type, UNREADABLE_CONTROL
    coordinator_epoch: int  # of an ABORT/COMMIT marker; -1 otherwise
    crc: int  # as stored: a batch appended twice is the same bytes, the same CRC

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset - self.base_offset) % 0x80000000

    @property
    def compression(self) -> str:
        return ("none", "gzip", "snappy", "lz4", "zstd", "5", "6", "7")[self.attributes & 7]

    @property
    def timestamp_type(self) -> str:
        return "LogAppendTime" if self.attributes & 0x08 else "CreateTime"

    @property
    def control_name(self) -> str | None:
        if self.control_type == NO_CONTROL:
            return None
        if self.control_type == UNREADABLE_CONTROL:
            return "UNKNOWN"
        return CONTROL_NAMES.get(self.control_type, f"UNKNOWN({self.control_type})")


_new_batch = tuple.__new__


def scan_batches(file: LogFile, data: Any = None) -> Iterator[Batch | Problem]:
    """Every batch of one segment in file order, then a Problem for a tail that is not batches.

    A CRC mismatch is reported as a Problem right after its batch (crc_valid False); a marker
    whose record does not decode as one after its batch too (control type UNREADABLE_CONTROL).
    """
    path = str(file.path)
    if data is None:
        try:
            data = read_file(Path(path))
        except OSError as e:
            yield Problem(path, 0, "io", f"cannot read: {e.strerror or e}")
            return
    unpack = BATCH_HEADER.unpack_from
    view = memoryview(data)
    crc_of = crc32c.crc32c
    pos, end = 0, len(data)
    last = end - RECORD_BATCH_OVERHEAD
    try:
        while pos <= last:
            (base, length, epoch, magic, crc, attrs, delta, first_ts, max_ts, pid, pepoch,
             base_seq, count) = unpack(data, pos)
            stop = pos + LOG_OVERHEAD + length
            if length < _MIN_LENGTH or magic != 2 or stop > end or count < 0 or delta < 0:
                break
            valid = crc_of(view[pos + _CRC_START:stop]) == crc
            if attrs & ATTR_CONTROL:
                control, coordinator_epoch, problem = _marker(path, data, pos, stop, count)
            else:
                control, coordinator_epoch, problem = NO_CONTROL, -1, None
            yield _new_batch(Batch, (pos, base, base + delta, count, stop - pos, epoch, attrs,
                                     first_ts, max_ts, pid, pepoch, base_seq, valid, control,
                                     coordinator_epoch, crc))
            if not valid:
                yield Problem(path, pos, "crc", f"CRC mismatch: stored {crc}, computed "
                              f"{crc_of(view[pos + _CRC_START:stop])}", base)
            if problem is not None:
                yield problem
            pos = stop
        if pos < end:  # the general walk names what is wrong with the rest
            for item in walk_batches(file, data, start=pos):
                if type(item) is Problem:
                    yield item
                    break
            else:
                yield Problem(path, pos, "trailing-bytes",
                              f"{end - pos} bytes from here are not a record batch", None)
    finally:
        view.release()


def _marker(path: str, data: Any, pos: int, stop: int,
            count: int) -> tuple[int, int, Problem | None]:
    """(control type, coordinator epoch, problem) of a control batch's first record. Kafka
    reads only that record (ProducerAppendInfo.append); an empty control batch is one whose
    transaction the log cleaner removed."""
    if count == 0:
        return UNREADABLE_CONTROL, -1, None
    # A marker as Kafka writes it, read in place: record length, attributes 0, one-byte
    # timestamp and offset deltas, a 4-byte key (version 0, type), a 6-byte value (version 0,
    # coordinator epoch), no headers. Anything else takes the general way.
    at = pos + RECORD_BATCH_OVERHEAD
    if stop - at == 17 and data[at] == 2 * 16 and data[at + 1] == 0 and data[at + 2] < 0x80 and data[at + 3] < 0x80 \
            and data[at + 4] == 8 and data[at + 9] == 12 and data[at + 16] == 0:
        version, control, value_version, epoch = _MARKER.unpack_from(data, at + 5)
        if version == 0 and value_version == 0 and control in (ABORT, COMMIT):
            return control, epoch, None
    batch = RecordBatch(data, pos)
    try:
        records = batch.records()
        key, value = records[0].key, records[0].value
        control = parse_control_key(None if key is None else bytes(key))
        if control in (ABORT, COMMIT):
            return control, parse_end_txn_marker(None if value is None else bytes(value)), None
        return control, -1, None
    except DecodeError as e:
        return UNREADABLE_CONTROL, -1, Problem(path, pos, "bad-marker", e.reason,
                                               batch.base_offset)


_MARKER = struct.Struct(">hhxhi")  # key version, type; the value's length byte; version, epoch


# The `batches` table: one row per batch, where it sits and its exactly-once fields.
BATCH_TABLE_FIELDS: tuple[tuple[str, str], ...] = (
    ("cluster", "string"), ("broker", "string"), ("topic", "string"), ("partition", "int"),
    ("file", "string"), ("segment", "bigint"), ("position", "bigint"),
    ("base_offset", "bigint"), ("last_offset", "bigint"), ("record_count", "int"),
    ("size", "int"), ("leader_epoch", "int"), ("first_timestamp", "bigint"),
    ("max_timestamp", "bigint"), ("timestamp_type", "string"), ("compression", "string"),
    ("producer_id", "bigint"), ("producer_epoch", "int"), ("base_sequence", "int"),
    ("last_sequence", "int"), ("is_transactional", "boolean"), ("is_control", "boolean"),
    ("control_type", "string"), ("coordinator_epoch", "int"), ("crc", "bigint"),
    ("crc_valid", "boolean"),
)
BATCH_TABLE_DDL = ", ".join(f"{name} {kind}" for name, kind in BATCH_TABLE_FIELDS)


def batch_row(where: tuple[str, str, str, int], file: str, segment: int,
              b: Batch) -> tuple[Any, ...]:
    """A `batches` table row; `where` is (cluster, broker, topic, partition)."""
    return (*where, file, segment, b.position, b.base_offset, b.last_offset, b.record_count,
            b.size, b.leader_epoch, b.first_timestamp, b.max_timestamp, b.timestamp_type,
            b.compression, b.producer_id, b.producer_epoch, b.base_sequence, b.last_sequence,
            b.is_transactional, b.is_control, b.control_name,
            b.coordinator_epoch if b.control_type in (ABORT, COMMIT) else None, b.crc,
            b.crc_valid)
