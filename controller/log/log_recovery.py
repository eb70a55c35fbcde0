"""Recovering a partition directory at open: what `PartitionLog.open` finds and checks.

Batches at or after the recovery point are checked (length, magic, CRC32C, offsets
contiguous, leader epochs non-decreasing and as leader-epoch-checkpoint records them). A tail
that is incomplete or fails its CRC and is followed by nothing valid is a torn write: it is
cut, with a warning naming file, position and bytes dropped, but only once the caller's checks
passed (`_cut_torn_tail`). A bad batch with a valid batch after it is damage, not a torn
write: `LogCorruptError` names file and position, and nothing is touched. Indexes that do not
load are rebuilt from the segment; leftovers of interrupted deletions and swaps go.
"""

from __future__ import annotations

import logging
from pathlib import Path

from kraftpy.controller.log import files
from kraftpy.controller.log.segment import Segment, parse_segment_name, scan
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.record_batch import (
    LOG_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    CorruptBatchError,
    RecordBatch,
    TruncatedBatchError,
    iter_record_batches,
)

log = logging.getLogger("kraftpy.log")

LEFTOVER_SUFFIXES = (".deleted", ".tmp", ".cleaned", ".swap")
LEADER_EPOCH_FILE = files.LEADER_EPOCH_CHECKPOINT


class LogCorruptError(RuntimeError):
    """Damage that is not a torn tail; `path` and `position` say where. Nothing was changed."""

    def __init__(self, message: str, *, path: Path, position: int) -> None:
        super().__init__(f"{path}: {message} (file position {position}); refusing to start")
        self.path = path
        self.position = position


class _Inconsistent(CorruptBatchError):
    """A batch that reads fine but contradicts its neighbours (offsets, epochs)."""


class RecoveringLog:
    """`PartitionLog`'s recovery at open (its state: segments, leader epochs, read_only)."""

    segments: list[Segment]
    leader_epochs: list[tuple[int, int]]
    directory: Path
    read_only: bool
    contiguous: bool
    _checkpointed_epochs: list[tuple[int, int]]
    _cut_at: int | None
    _torn: tuple[Segment, int] | None
    _torn_reason: str
    _empty_after_cut: list[Segment]
    _epochs_changed: bool = False

    @property
    def log_end_offset(self) -> int:  # PartitionLog's
        raise NotImplementedError

    def _clean_leftovers(self) -> None:
        live = {
            p.name[:20] for p in self.directory.iterdir() if parse_segment_name(p.name) is not None
        }
        for p in self.directory.iterdir():
            name = p.name
            if name.endswith(LEFTOVER_SUFFIXES):
                log.info("deleting leftover %s", p)
                p.unlink()
            elif name.endswith((".index", ".timeindex")) and name[:20] not in live:
                log.info("deleting orphaned index %s", p)
                p.unlink()

    def _recover(self, recovery_point: int) -> list[Segment]:
        """Find each segment's end and validate every batch from `recovery_point` on.

        Reads only (a torn tail is cut later, by `_cut_torn_tail`); returns the segments whose
        indexes were rebuilt in memory (the caller writes them once recovery has succeeded).
        """
        rebuilt: list[Segment] = []
        self._checkpointed_epochs = list(self.leader_epochs)
        segs = self.segments
        first = max((i for i, s in enumerate(segs) if s.base_offset <= recovery_point), default=0)
        for i, seg in enumerate(segs[:first]):
            seg.next_offset = segs[i + 1].base_offset
            seg.size = seg.path.stat().st_size
            if not seg.indexes.load():
                self._rebuild_indexes(seg)
                rebuilt.append(seg)
        last_epoch, last_position = -1, 0
        self._cut_at: int | None = None
        for i in range(first, len(segs)):
            seg = segs[i]
            start = 0
            if self.contiguous and i > first and self._cut_at is None:
                if segs[i - 1].next_offset != seg.base_offset:
                    raise LogCorruptError(
                        f"segment starts at offset {seg.base_offset}, but the one before it "
                        f"ends at {segs[i - 1].next_offset}",
                        path=seg.path,
                        position=0,
                    )
            if i == first and seg.base_offset < recovery_point and seg.indexes.load():
                start = seg.indexes.position_before(recovery_point)
                seg.indexes.truncate_after(start, writable=False)
            else:
                seg.indexes.reset(writable=False)
            rebuilt.append(seg)
            expected = seg.base_offset if start == 0 else None
            position = start
            try:
                for batch in scan(seg.path, start, verify_crc=False):
                    if expected is None:
                        expected = batch.base_offset
                    # Offsets and epochs are checked everywhere (cheap); CRCs only past the
                    # recovery point, as everything before it was checked when it was written.
                    if batch.next_offset > recovery_point and not batch.crc_valid():
                        raise CorruptBatchError(
                            f"CRC mismatch in batch at base offset {batch.base_offset}",
                            offset=batch.position,
                        )
                    self._check_batch(batch, expected, last_epoch, last_position)
                    self._note_epoch(batch)
                    last_epoch, last_position = batch.partition_leader_epoch, batch.position
                    expected = batch.next_offset
                    seg.indexes.on_batch(
                        batch.last_offset, batch.position, batch.size, batch.max_timestamp
                    )
                    position = batch.position + batch.size
            except _Inconsistent as exc:
                raise LogCorruptError(exc.reason, path=seg.path, position=exc.offset or 0) from None
            except (TruncatedBatchError, CorruptBatchError) as exc:
                self._damaged(i, exc)
                position = exc.offset if exc.offset is not None else position
            seg.size = position
            seg.next_offset = (
                seg.base_offset if expected is None else max(expected, seg.base_offset)
            )
        if self._cut_at is not None and not self.read_only:
            # Empty segments rolled after the torn one would leave a gap in offsets (they are
            # deleted with the cut, in `_cut_torn_tail`).
            self._empty_after_cut = self.segments[self._cut_at + 1 :]
            del self.segments[self._cut_at + 1 :]
        end = self.log_end_offset
        kept = [(e, o) for e, o in self.leader_epochs if o < end]
        if kept != self.leader_epochs:
            self.leader_epochs = kept
            self._epochs_changed = True
        return rebuilt

    def _rebuild_indexes(self, seg: Segment) -> None:
        seg.indexes.reset(writable=False)
        for batch in scan(seg.path, 0, seg.size):
            seg.indexes.on_batch(batch.last_offset, batch.position, batch.size, batch.max_timestamp)
        seg.indexes.on_close()

    _epochs_changed = False

    def _cut_torn_tail(self) -> None:
        """Cut the torn tail recovery found, and the empty segments rolled after it."""
        torn, self._torn = self._torn, None
        if torn is not None:
            seg, position = torn
            dropped = seg.path.stat().st_size - position
            log.warning("%s: truncating torn tail at position %d, dropping %d bytes (%s)",
                        seg.path, position, dropped, self._torn_reason)
            seg.truncate(position)
        empty, self._empty_after_cut = self._empty_after_cut, []
        for seg in empty:
            seg.close()
            for path in (seg.path, seg.indexes.index_path, seg.indexes.time_path):
                path.unlink(missing_ok=True)
            log.warning("%s: removed empty segment after a torn tail", seg.path)

    def _note_epoch(self, batch: RecordBatch) -> None:
        epoch = batch.partition_leader_epoch
        if not self.leader_epochs or epoch > self.leader_epochs[-1][0]:
            if self.leader_epochs and batch.base_offset < self.leader_epochs[-1][1]:
                return
            self.leader_epochs.append((epoch, batch.base_offset))
            self._epochs_changed = True

    def _check_batch(
        self, batch: RecordBatch, expected: int, last_epoch: int, last_position: int
    ) -> None:
        """Consistency of a batch whose CRC checks: a failure here is damage, never a torn tail."""
        where = batch.position
        if (batch.base_offset != expected) if self.contiguous else (batch.base_offset < expected):
            raise _Inconsistent(
                f"base offset {batch.base_offset} where {expected} was expected", offset=where
            )
        epoch = batch.partition_leader_epoch
        known = self._checkpointed_epochs
        if known and batch.base_offset >= known[0][1]:
            # leader-epoch-checkpoint says which epoch wrote each offset.
            covering = max(e for e, start in known if start <= batch.base_offset)
            if epoch != covering and epoch <= known[-1][0]:
                raise _Inconsistent(
                    f"leader epoch {epoch}, but {LEADER_EPOCH_FILE} has epoch {covering} here",
                    offset=where,
                )
        if epoch < last_epoch:
            # One of the two is wrong; the earlier batch claims the higher epoch.
            raise _Inconsistent(
                f"leader epoch {last_epoch} here, but {batch.partition_leader_epoch} in the next "
                f"batch at position {where}",
                offset=last_position,
            )
        if self.contiguous and batch.records_count != batch.last_offset_delta + 1:
            raise _Inconsistent(
                f"{batch.records_count} records for offset delta {batch.last_offset_delta}",
                offset=where,
            )

    def _damaged(self, index: int, exc: DecodeError) -> None:
        """A bad batch in segment `index`: cut a torn tail, refuse anything else."""
        seg = self.segments[index]
        position = exc.offset or 0
        after = _valid_batch_after(seg.path, position)
        later = any(s.path.stat().st_size > 0 for s in self.segments[index + 1 :])
        if after is not None or later:
            where = (
                f"a valid batch follows at position {after}"
                if after is not None
                else "later segments follow"
            )
            raise LogCorruptError(
                f"bad batch ({exc.reason}); {where}", path=seg.path, position=position
            )
        dropped = seg.path.stat().st_size - position
        if self.read_only:
            log.warning(
                "%s: torn tail at position %d (%d bytes, %s) ignored (read-only)",
                seg.path,
                position,
                dropped,
                exc.reason,
            )
            return
        # Cut only once the caller's checks pass (`_cut_torn_tail`): until then the segment
        # just ends here in memory.
        self._torn = (seg, position)
        self._torn_reason = exc.reason
        self._cut_at = index


def newest_snapshot_end(directory: Path) -> int:
    ends = [
        int(p.name[:20])
        for p in directory.iterdir()
        if p.name.endswith(".checkpoint") and len(p.name) == 42 and p.name[:20].isdigit()
    ]
    return max(ends, default=0)


def _valid_batch_after(path: Path, position: int, *, chunk: int = 8 * 1024 * 1024) -> int | None:
    """The position of a batch after `position` whose CRC checks, if any (damage detector).

    Every byte after `position` is tried as a batch start; a candidate needs magic 2 and a
    plausible length before its bytes are read and its CRC computed.
    """
    size = path.stat().st_size
    with open(path, "rb") as f:
        base = position + 1
        while base + RECORD_BATCH_OVERHEAD <= size:
            f.seek(base)
            data = f.read(min(chunk, size - base))
            i = data.find(b"\x02", 16)
            while i != -1:
                start = base + i - 16
                if i - 16 + LOG_OVERHEAD <= len(data):
                    length = int.from_bytes(data[i - 8 : i - 4], "big", signed=True)
                    end = start + LOG_OVERHEAD + length
                    if length >= RECORD_BATCH_OVERHEAD - LOG_OVERHEAD and end <= size:
                        f.seek(start)
                        raw = f.read(end - start)
                        try:
                            next(iter_record_batches(raw))
                            return start
                        except DecodeError:
                            pass
                i = data.find(b"\x02", i + 1)
            if base + len(data) >= size:
                break
            base += len(data) - RECORD_BATCH_OVERHEAD  # overlap: a header may straddle chunks
    return None


