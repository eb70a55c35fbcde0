"""PartitionLog: one Kafka partition directory (`__cluster_metadata-0`, `__transaction_state-<n>`).

Theory of operation. The directory holds segments `<20-digit base offset>.log` (v2 record
batches, back to back) with their `.index`/`.timeindex`, plus `partition.metadata` and
`leader-epoch-checkpoint`.

Recovery at open is `log_recovery.py`'s, reading `log_reads.py`'s. `append` builds one batch (all of an operation's
records, so it is atomic) and writes it to the segment at once (not fsynced: a reader sees it,
a crash may drop it); `accumulator.py` gathers several operations into one batch (the
transaction log's). `flush` writes what is pending and fsyncs, and only then moves the flushed
offset. `begin_flush` / `FlushTicket.fsync` / `complete_flush` split that so the fsync can run
in a worker thread while the owner keeps appending.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kraftpy.controller.log import files
from kraftpy.controller.log.log_reads import LogReads
from kraftpy.controller.log.log_recovery import (
    LogCorruptError,
    RecoveringLog,
    newest_snapshot_end,
)
from kraftpy.controller.log.segment import Segment, parse_segment_name, scan
from kraftpy.protocol.record_batch import (
    LOG_OVERHEAD,
    build_record_batch,
    iter_record_batches,
)

log = logging.getLogger("kraftpy.log")

DEFAULT_SEGMENT_BYTES = 1024 * 1024 * 1024
MAX_BATCH_BYTES = 8 * 1024 * 1024  # KafkaRaftClient.MAX_BATCH_SIZE_BYTES
LEFTOVER_SUFFIXES = (".deleted", ".tmp", ".cleaned", ".swap")


@dataclass
class FlushTicket:
    """What one fsync covers: the end offset it makes durable and the segments it must sync
    (`fds`: their sync descriptors, held open until `release`)."""

    end_offset: int
    segments: list[Segment] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)
    generation: int = 0  # the log's truncation count when it was made
    directory: Path | None = None  # the partition's

    def sync(self) -> None:
        """fsync every file, then let go of the descriptors."""
        try:
            self.fsync()
        finally:
            self.release()

    def fsync(self) -> None:
        """fsync every file; safe in a worker thread (the descriptors stay open until
        `release`, whatever happens to the segments meanwhile)."""
        for fd in self.fds:
            os.fsync(fd)

    def release(self) -> None:
        segments, self.segments, self.fds = self.segments, [], []
        for seg in segments:
            seg.drop_sync_fd()


class PartitionLog(RecoveringLog, LogReads):
    """A partition's segments; see the module docstring for the rules."""

    def __init__(
        self,
        directory: Path,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        read_only: bool = False,
        contiguous: bool = True,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        segment_ms: int | None = None,
    ) -> None:
        self.directory = Path(directory)
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.max_batch_bytes = max_batch_bytes
        self.read_only = read_only
        self.contiguous = contiguous
        self.segments: list[Segment] = []
        self.leader_epochs: list[tuple[int, int]] = []
        self.flushed_offset = 0
        self._pending = bytearray()
        self._dirty: list[Segment] = []  # segments written since the last fsync
        self._lock = threading.Lock()
        self._checkpointed_epochs: list[tuple[int, int]] = []
        self._cut_at: int | None = None
        self._torn: tuple[Segment, int] | None = None  # (segment, position) to cut, once allowed
        self._torn_reason = ""
        self._empty_after_cut: list[Segment] = []
        # (the last segment's index file, the last offset it names), as found at open. After a
        # clean stop every indexed batch was written: a log ending before it lost records.
        self.indexed: tuple[Path, int] | None = None
        self._generation = 0  # counts truncations: a flush ticket of an earlier one is stale

    # --- opening -------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        directory: Path,
        *,
        topic_id: str | None = None,
        start_offset: int = 0,
        recovery_point: int | None = None,
        clean: bool = False,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        read_only: bool = False,
        contiguous: bool = True,
        create: bool = True,
        max_batch_bytes: int = MAX_BATCH_BYTES,
        segment_ms: int | None = None,
        before_changes: Callable[[PartitionLog], None] | None = None,
    ) -> PartitionLog:
        """Open (creating when `create`) and recover a partition directory.

        Batches before `recovery_point` are trusted (they were fsynced before a clean point);
        those after are validated. By default the recovery point is the end offset of the
        newest snapshot file in the directory (a snapshot is only written of fsynced records).
        `clean` (after a clean stop) checks only the batches after the last index entry. An
        empty directory starts at `start_offset`. `before_changes` sees the recovered log
        (start, end, epochs) before anything in the directory changes (a torn tail cut,
        indexes rewritten, leftovers deleted); what it raises leaves the directory as it was.
        """
        self = cls(
            directory,
            segment_bytes=segment_bytes,
            read_only=read_only,
            contiguous=contiguous,
            max_batch_bytes=max_batch_bytes,
            segment_ms=segment_ms,
        )
        d = self.directory
        if not d.is_dir():
            if read_only or not create:
                raise files.LogDirError(f"{d} does not exist")
            d.mkdir(parents=True)
            files.fsync_dir(d.parent)
        self.leader_epochs = files.read_leader_epochs(d)
        bases = sorted(b for p in d.iterdir() if (b := parse_segment_name(p.name)) is not None)
        self.segments = [Segment(d, b) for b in bases]
        if not self.segments:
            if read_only:
                self.flushed_offset = start_offset
                return self
            seg = Segment(d, start_offset)
            seg.create()
            self.segments.append(seg)
            files.fsync_dir(d)
        last = self.segments[-1]
        indexed = last.indexes.last_offset_on_disk()
        if indexed is not None:
            self.indexed = (last.indexes.index_path, indexed)
        if clean:
            recovery_point = last.base_offset
            if last.indexes.load() and last.indexes.offsets:
                if last.indexes.positions[-1] < last.path.stat().st_size:
                    recovery_point = last.indexes.offsets[-1]
                # else the batch it points at is gone: scan the whole segment to find the end
        elif recovery_point is None:
            recovery_point = newest_snapshot_end(d)
        rebuilt = self._recover(recovery_point)
        if before_changes is not None:
            before_changes(self)
        if not read_only:
            # Only now that nothing was refused does anything in the directory change.
            self._cut_torn_tail()
            for seg in rebuilt:
                seg.indexes.rewrite()
            self._clean_leftovers()
            if topic_id is not None:
                existing = files.read_partition_metadata(d)
                if existing is None:
                    files.write_partition_metadata(d, topic_id)
                elif existing != topic_id:
                    raise files.LogDirError(
                        f"{d / files.PARTITION_METADATA}: topic id {existing}, expected {topic_id}"
                    )
            if self._epochs_changed:
                files.write_leader_epochs(d, self.leader_epochs)
            self._epochs_changed = False
        self.flushed_offset = self.log_end_offset
        return self

    # --- state ---------------------------------------------------------------------------
    @property
    def active(self) -> Segment:
        return self.segments[-1]

    @property
    def log_start_offset(self) -> int:
        return self.segments[0].base_offset if self.segments else self.flushed_offset

    @property
    def log_end_offset(self) -> int:
        """The offset the next appended record gets (Kafka's LEO)."""
        return self.segments[-1].next_offset if self.segments else self.flushed_offset

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    def size_from(self, offset: int) -> int:
        """The log's size once the segments wholly below `offset` are deleted."""
        segs = self.segments
        return sum(
            seg.size
            for i, seg in enumerate(segs)
            if not (i + 1 < len(segs) and segs[i + 1].base_offset <= offset)
        )

    # --- appending -----------------------------------------------------------------------
    def append(
        self,
        values: Sequence[bytes | None],
        *,
        leader_epoch: int,
        timestamp: int,
        keys: Sequence[bytes | None] | None = None,
        control: bool = False,
    ) -> int:
        """Add one batch (not yet durable); returns its base offset."""
        base = self.log_end_offset
        raw = build_record_batch(
            values,
            base_offset=base,
            partition_leader_epoch=leader_epoch,
            timestamp=timestamp,
            keys=keys,
            control=control,
        )
        self._add(raw, base, base + len(values), leader_epoch, timestamp)
        return base

    def _note_new_epoch(self, epoch: int, base: int) -> None:
        """leader-epoch-checkpoint gains an entry when an epoch's first record is appended.
        The entry says the log reaches `base` (recovery refuses a log ending before it), so
        what is written below it is fsynced first: a power loss must not leave the entry
        durable and the records below it torn off (a follower appends a fetch's batches of
        an old epoch and a new one before its flush)."""
        epochs = self.leader_epochs
        if not epochs or epoch > epochs[-1][0]:
            self._write_pending()
            for seg in self._dirty:
                os.fsync(seg.fd)
            epochs.append((epoch, base))
            files.write_leader_epochs(self.directory, epochs)

    @property
    def last_append_timestamp(self) -> int | None:
        """The timestamp of the newest batch, sealed or open (None for an empty segment)."""
        ts = self.segments[-1].indexes.max_timestamp if self.segments else -1
        return ts if ts >= 0 else None

    def append_batch(self, raw: bytes) -> int:
        """Add one pre-built batch whose base offset must be the log end offset."""
        (batch,) = iter_record_batches(raw)
        base = self.log_end_offset
        if batch.base_offset != base:
            raise ValueError(f"batch base offset {batch.base_offset}, log end offset {base}")
        self._add(raw, base, batch.next_offset, batch.partition_leader_epoch, batch.max_timestamp)
        return base

    def _add(self, raw: bytes, base: int, next_offset: int, epoch: int, max_timestamp: int) -> None:
        if self.read_only:
            raise files.LogDirError(f"{self.directory} is open read-only")
        self._check_size(raw)
        epochs = self.leader_epochs
        if epochs and epoch < epochs[-1][0]:
            raise ValueError(f"leader epoch {epoch} below {epochs[-1][0]}")
        with self._lock:
            self._place(raw, base, next_offset, max_timestamp)
            self._note_new_epoch(epoch, base)
            # Written now (not fsynced): a Fetch may read it back from the file at once.
            self._write_pending()

    @staticmethod
    def _check_size(raw: bytes) -> None:
        if len(raw) > MAX_BATCH_BYTES:
            raise ValueError(f"batch of {len(raw)} bytes exceeds {MAX_BATCH_BYTES}")

    def _place(self, raw: bytes, base: int, next_offset: int, max_timestamp: int) -> None:
        """Queue a built batch at the log end (lock held), rolling the segment if full."""
        seg = self.segments[-1]
        if seg.size > 0 and (
            seg.size + len(raw) > self.segment_bytes or self._aged(seg, max_timestamp)
        ):
            seg = self._roll()
        if seg.size == 0:
            seg.first_timestamp = max_timestamp
        seg.indexes.on_batch(next_offset - 1, seg.size, len(raw), max_timestamp)
        self._pending += raw
        seg.size += len(raw)
        seg.next_offset = next_offset

    def _aged(self, seg: Segment, timestamp: int) -> bool:
        """segment.ms, as Kafka's LogSegment.shouldRoll: the new batch's timestamp is more than
        segment_ms past the segment's first batch's."""
        if self.segment_ms is None:
            return False
        first = seg.first_batch_timestamp()
        return first is not None and first >= 0 and timestamp - first > self.segment_ms

    def _roll(self) -> Segment:
        # Called with the lock held: the old segment's pending bytes go out first, fsynced
        # before the new segment exists. Recovery takes a bad batch with a later segment
        # after it for damage, not a torn tail, so only the last segment may end torn by a
        # power loss.
        old = self.active
        self._write_pending()
        os.fsync(old.fd)
        old.indexes.finish()
        old.retire()
        new = Segment(self.directory, old.next_offset)
        new.next_offset = old.next_offset
        new.create()
        self.segments.append(new)
        files.fsync_dir(self.directory)
        log.info("rolled %s at offset %d", self.directory.name, new.base_offset)
        return new

    def _write_pending(self) -> None:
        if self._pending:
            seg = self.active
            seg.write(self._pending)
            self._pending = bytearray()
            if seg not in self._dirty:
                self._dirty.append(seg)

    # --- durability ----------------------------------------------------------------------
    def begin_flush(self) -> FlushTicket:
        """Write what is pending (one write) and hand back what an fsync must cover."""
        if not (self._pending or self._dirty):  # nothing since the last
            return FlushTicket(self.log_end_offset, [], [], self._generation, self.directory)
        with self._lock:
            self._write_pending()
            dirty, self._dirty = self._dirty, []
            ticket = FlushTicket(self.log_end_offset, dirty, [s.hold_sync_fd() for s in dirty],
                                 self._generation, self.directory)
        return ticket

    def complete_flush(self, ticket: FlushTicket) -> int:
        # A ticket made before a truncation may end past what the log now holds.
        if ticket.generation == self._generation and ticket.end_offset > self.flushed_offset:
            self.flushed_offset = ticket.end_offset
        return self.flushed_offset

    def flush(self) -> int:
        """Write and fsync everything appended; returns the new flushed offset."""
        ticket = self.begin_flush()
        ticket.sync()
        return self.complete_flush(ticket)

    def truncate_to(self, offset: int) -> None:
        """Drop every record at or above `offset`, a batch boundary (a Raft follower's
        diverging suffix, never committed data). Crash-ordered, as `reset_to`: the
        leader-epoch checkpoint loses the epochs from `offset` first (recovery finds them
        again in the batches if the cut never happens, but refuses a checkpoint naming an
        epoch past the log end), then later segments go and the one holding `offset` is cut
        there (fsynced), its indexes following."""
        if self.read_only:
            raise files.LogDirError(f"{self.directory} is open read-only")
        if offset >= self.log_end_offset:
            return
        with self._lock:
            self._write_pending()
            segs = self.segments
            keep = [s for s in segs if s.base_offset < offset] or segs[:1]
            seg = keep[-1]
            position = None
            if offset <= seg.base_offset:
                position = 0
            elif offset >= seg.next_offset:  # the cut is where this segment ends
                position = seg.size
            else:
                for batch in scan(seg.path, seg.indexes.position_before(offset), seg.size):
                    if batch.base_offset == offset:
                        position = batch.position
                        break
                    if batch.base_offset > offset or batch.next_offset > offset:
                        raise ValueError(f"offset {offset} is not a batch boundary of "
                                         f"{seg.path}")
                if position is None:
                    raise ValueError(f"offset {offset} not found in {seg.path}")
            kept = [(e, o) for e, o in self.leader_epochs if o < max(offset, seg.base_offset)]
            if kept != self.leader_epochs:
                self.leader_epochs = kept
                files.write_leader_epochs(self.directory, kept)
            for doomed in segs[len(keep):]:
                doomed.close()
                for path in (doomed.path, doomed.indexes.index_path, doomed.indexes.time_path):
                    path.unlink(missing_ok=True)
            self._dirty = [s for s in self._dirty if s in keep]
            seg.truncate(position)
            self._generation += 1
            seg.indexes.writable = True
            seg.next_offset = max(offset, seg.base_offset)
            self.segments = keep
            self.flushed_offset = min(self.flushed_offset, self.log_end_offset)
        files.fsync_dir(self.directory)

    def reset_to(self, offset: int) -> None:
        """Drop the whole log and start it empty at `offset` (Kafka's truncateFullyAndStartAt:
        a follower that installed a snapshot ending there). Crash-ordered: the leader-epoch
        checkpoint is emptied first, then segments go newest first, then the new segment is
        made, so a crash leaves a prefix of the old log (or none) below a snapshot that ends
        past it, which a voter's recovery finishes the same way (`MetadataStorage.open`)."""
        if self.read_only:
            raise files.LogDirError(f"{self.directory} is open read-only")
        with self._lock:
            self._pending = bytearray()
            self._dirty = []
            self._generation += 1  # a flush of the old log in flight covers nothing now
            self.leader_epochs = []
            files.write_leader_epochs(self.directory, [])
            doomed, self.segments = self.segments, []
            for seg in reversed(doomed):
                seg.close()
                for path in (seg.path, seg.indexes.index_path, seg.indexes.time_path):
                    path.unlink(missing_ok=True)
            files.fsync_dir(self.directory)
            seg = Segment(self.directory, offset)
            seg.create()
            self.segments = [seg]
            self.flushed_offset = offset
        files.fsync_dir(self.directory)
        self.indexed = None

    # --- retention -----------------------------------------------------------------------
    def delete_segments_below(self, offset: int) -> list[Path]:
        """Delete segments wholly below `offset` (the newest snapshot's end offset).

        Safe in a worker thread while the owner appends: the segment list is replaced, never
        changed in place, and the active segment is never deleted.
        """
        with self._lock:
            segs = self.segments
            k = 0
            while k + 1 < len(segs) and segs[k + 1].base_offset <= offset:
                k += 1
            doomed = segs[:k]
            if doomed:
                self.segments = segs[k:]
                # Not for the next flush round either: its descriptor would open (and so
                # create again) the file deleted below, an empty segment where the log was.
                self._dirty = [seg for seg in self._dirty if seg not in doomed]
        deleted: list[Path] = []
        for seg in doomed:
            seg.close()
            for path in (seg.path, seg.indexes.index_path, seg.indexes.time_path):
                if path.exists():
                    gone = path.with_name(path.name + ".deleted")
                    os.replace(path, gone)
                    gone.unlink()
                    deleted.append(path)
        if deleted:
            files.fsync_dir(self.directory)
            with self._lock:
                self.leader_epochs = _epochs_from(self.leader_epochs, self.log_start_offset)
                files.write_leader_epochs(self.directory, self.leader_epochs)
            log.info(
                "deleted %d segment files of %s below offset %d",
                len(doomed),
                self.directory.name,
                offset,
            )
        return deleted

    def close(self) -> None:
        """Flush, add the final time index entries, and release the files."""
        if not self.read_only:
            self.flush()
            if self.segments:
                self.active.indexes.finish()
        for seg in self.segments:
            seg.close()


def _epochs_from(epochs: list[tuple[int, int]], start: int) -> list[tuple[int, int]]:
    """Kafka's truncateFromStart: the epoch covering `start` now begins there."""
    out: list[tuple[int, int]] = []
    for epoch, offset in epochs:
        if offset < start:
            out = [(epoch, start)]
        else:
            out.append((epoch, offset))
    return out


__all__ = ["FlushTicket", "LogCorruptError", "PartitionLog", "LOG_OVERHEAD"]
