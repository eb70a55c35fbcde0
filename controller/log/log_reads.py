"""Reading a partition log: what a raft Fetch, a snapshot's timestamp and a replay read.

Kept apart from `PartitionLog`'s writing side because readers run beside the writer: a
Fetch reads whole stored batches as their bytes (never decoded and encoded again) from the
segment list as it was when the read began (a trim in a worker thread replaces the list, never
edits it), and only below a limit the caller gives (the high watermark).
"""

from __future__ import annotations

import bisect
import struct
import threading
from collections.abc import Iterator

from kraftpy.controller.log.segment import Segment, scan
from kraftpy.protocol.record_batch import RecordBatch

# A batch's base offset and length (then the length's bytes follow), and where its last offset
# delta sits: after partition leader epoch (4), magic (1), crc (4), attributes (2).
_BATCH_START = struct.Struct(">qi")
_LAST_OFFSET_DELTA = struct.Struct(">i")


class LogReads:
    """The reading half of `PartitionLog` (a mixin: the state is the log's)."""

    segments: list[Segment]
    leader_epochs: list[tuple[int, int]]
    flushed_offset: int
    read_only: bool
    _pending: bytearray
    _lock: threading.Lock

    @property
    def log_start_offset(self) -> int:
        raise NotImplementedError

    def _write_pending(self) -> None:
        raise NotImplementedError

    def epoch_at(self, offset: int) -> int | None:
        """The leader epoch that wrote `offset` (None: the log's epochs start after it)."""
        found = None
        for epoch, start in self.leader_epochs:
            if start > offset:
                break
            found = epoch
        return found

    def timestamp_below(self, end: int) -> int | None:
        """The max timestamp of the batch holding offset `end - 1` (a snapshot ending at `end`
        carries it as its last contained log timestamp); None if the log no longer holds it."""
        if end <= self.log_start_offset:
            return None
        for batch in self.read(end - 1):
            return batch.max_timestamp if batch.base_offset < end else None
        return None

    def read(
        self, start_offset: int | None = None, *, flushed_only: bool = False
    ) -> Iterator[RecordBatch]:
        """Batches holding offsets >= `start_offset`, in order (the first may begin earlier)."""
        if not self.read_only and self._pending:
            with self._lock:
                self._write_pending()
        start = self.log_start_offset if start_offset is None else start_offset
        limit = self.flushed_offset if flushed_only else None
        for i, seg in enumerate(self.segments):
            nxt = self.segments[i + 1].base_offset if i + 1 < len(self.segments) else None
            if nxt is not None and nxt <= start:
                continue
            position = seg.indexes.position_before(start) if seg.base_offset < start else 0
            for batch in scan(seg.path, position, seg.size):
                if batch.next_offset <= start:
                    continue
                if limit is not None and batch.base_offset >= limit:
                    return
                yield batch

    def read_raw(self, start_offset: int, limit_offset: int, max_bytes: int) -> bytes | None:
        """Whole stored batches from the one holding `start_offset`, below `limit_offset`, as
        their bytes: what a raft Fetch answers with. At most `max_bytes`, but at least one
        batch; from one segment, as Kafka reads. Only what is written is read (call it with a
        limit at or below the high watermark: nothing pending is touched); None when
        `start_offset` is below the log start (its segment deleted by a snapshot meanwhile)."""
        segments = self.segments  # replaced, never edited, by a trim in a worker thread
        if not segments or start_offset < segments[0].base_offset:
            return None
        if start_offset >= limit_offset:
            return b""
        index = bisect.bisect_right([seg.base_offset for seg in segments], start_offset) - 1
        seg = segments[index]
        position = seg.indexes.position_before(start_offset)
        try:
            with open(seg.path, "rb") as f:
                f.seek(position)
                data = f.read(max(max_bytes, 0) + 64 * 1024)
                out = bytearray()
                pos = 0
                while True:
                    if len(data) - pos < 12:
                        more = f.read(64 * 1024)
                        if not more:
                            break
                        data = data[pos:] + more
                        pos = 0
                        continue
                    base, length = _BATCH_START.unpack_from(data, pos)
                    if base >= limit_offset:
                        break
                    size = 12 + length
                    if out and len(out) + size > max_bytes:
                        break
                    while len(data) - pos < size:
                        more = f.read(max(size, 64 * 1024))
                        if not more:
                            return bytes(out)
                        data = data[pos:] + more
                        pos = 0
                    last = base + _LAST_OFFSET_DELTA.unpack_from(data, pos + 23)[0]
                    if last >= start_offset:
                        out += data[pos:pos + size]
                    pos += size
        except FileNotFoundError:
            return None
        return bytes(out)
