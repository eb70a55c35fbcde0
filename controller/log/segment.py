"""One segment file `<20-digit base offset>.log` and the scan that recovery and reads share."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

from kraftpy.controller.log.index import SegmentIndexes
from kraftpy.protocol.record_batch import (
    RECORD_BATCH_OVERHEAD,
    CorruptBatchError,
    RecordBatch,
    TruncatedBatchError,
    iter_record_batches,
)

READ_CHUNK = 8 * 1024 * 1024


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def parse_segment_name(name: str) -> int | None:
    stem, dot, suffix = name.partition(".")
    if suffix != "log" or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def scan(
    path: Path, start: int = 0, end: int | None = None, *, verify_crc: bool = True
) -> Iterator[RecordBatch]:
    """The batches of `path` from file position `start`, read in chunks.

    Raises `TruncatedBatchError` only when the file (or `end`) ends inside a batch, and
    `CorruptBatchError` for a bad batch; both carry the batch's file position.
    """
    with open(path, "rb") as f:
        if end is None:
            end = os.fstat(f.fileno()).st_size
        pos = start
        want = READ_CHUNK
        while pos < end:
            f.seek(pos)
            buf = f.read(min(want, end - pos))
            consumed = 0
            try:
                for batch in iter_record_batches(buf, position=pos, verify_crc=verify_crc):
                    consumed = batch.end
                    yield batch
            except TruncatedBatchError:
                if pos + len(buf) >= end:
                    raise
                if consumed == 0:  # one batch larger than the chunk: read it whole
                    want = max(want * 2, _batch_size(buf) + RECORD_BATCH_OVERHEAD)
            pos += consumed


def _batch_size(buf: bytes) -> int:
    return int.from_bytes(buf[8:12], "big", signed=True) + 12 if len(buf) >= 12 else 0


class Segment:
    """A segment's file handle (append-only, unbuffered) plus its indexes."""

    def __init__(self, directory: Path, base_offset: int) -> None:
        self.base_offset = base_offset
        self.path = directory / segment_name(base_offset)
        self.indexes = SegmentIndexes(self.path, base_offset)
        self.size = self.path.stat().st_size if self.path.exists() else 0
        self.next_offset = base_offset  # set by recovery / appends
        self.first_timestamp: int | None = None  # the first batch's max timestamp, once known
        self._fd: int | None = None
        # A duplicate of the descriptor for flush rounds' fsyncs, and how many rounds hold it:
        # it stays open for them even if the segment closes (retention runs in a thread).
        # One per segment, not one per round: a close costs the loop ~10 us per round.
        self._sync_fd: int | None = None
        self._sync_holds = 0
        self._sync_kept = True  # while this is the active segment (rounds keep coming)
        self._sync_lock = threading.Lock()

    def first_batch_timestamp(self) -> int | None:
        """The first batch's max timestamp (what segment.ms is measured from), read once."""
        if self.first_timestamp is None and self.size > 0:
            try:
                with open(self.path, "rb") as f:
                    head = f.read(RECORD_BATCH_OVERHEAD)
                if len(head) == RECORD_BATCH_OVERHEAD:
                    self.first_timestamp = RecordBatch(head).max_timestamp
            except OSError:
                return None
        return self.first_timestamp

    @property
    def fd(self) -> int:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        return self._fd

    def create(self) -> None:
        """Create the (empty) segment and index files now, as Kafka does on a roll."""
        _ = self.fd
        for path in (self.indexes.index_path, self.indexes.time_path):
            path.touch()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]

    def truncate(self, position: int) -> None:
        with open(self.path, "r+b") as f:
            f.truncate(position)
            f.flush()
            os.fsync(f.fileno())
        self.size = position
        if position == 0:
            self.first_timestamp = None
        self.indexes.truncate_after(position)

    def hold_sync_fd(self) -> int:
        """A descriptor to fsync this segment through, open until `drop_sync_fd`."""
        with self._sync_lock:
            if self._sync_fd is None:
                self._sync_fd = os.dup(self.fd)
            self._sync_holds += 1
            return self._sync_fd

    def drop_sync_fd(self) -> None:
        with self._sync_lock:
            self._sync_holds -= 1
            if self._sync_holds == 0 and (self._fd is None or not self._sync_kept):
                self._close_sync_fd()

    def retire(self) -> None:
        """No longer the active segment: its sync descriptor goes with the last round."""
        with self._sync_lock:
            self._sync_kept = False
            if self._sync_holds == 0:
                self._close_sync_fd()

    def _close_sync_fd(self) -> None:
        if self._sync_fd is not None:
            os.close(self._sync_fd)
            self._sync_fd = None

    def close(self) -> None:
        self.indexes.close()
        with self._sync_lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if self._sync_holds == 0:  # else the last round to let go closes it
                self._close_sync_fd()

    def __repr__(self) -> str:
        return f"Segment({self.path.name}, size={self.size}, next_offset={self.next_offset})"


__all__ = ["CorruptBatchError", "Segment", "TruncatedBatchError", "parse_segment_name", "scan"]
