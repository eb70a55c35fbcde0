"""What Raft knows of the replicated log: offsets, leader epochs and snapshots, no records.

`RaftLog` is the live model the core keeps beside the real log, changed only by the appends,
truncations, flushes and snapshots the core itself asks the shell for, so the two never
disagree. The rules (`end_offset_for_epoch`, `validate_offset_and_epoch`) are Kafka's
ReplicatedLog and leader-epoch cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BOOTSTRAP_SNAPSHOT = (0, 0)  # (end offset, epoch) of bootstrap.checkpoint: never replicated


def end_offset_for_epoch(log: RaftLog, epoch: int, log_end_offset: int
                         ) -> tuple[int, int]:
    """(epoch, end offset) of the largest leader epoch at or below `epoch`, as Kafka's
    leader-epoch cache answers (the end is the next epoch's start, or the log end)."""
    epochs = log.epochs
    if epochs and epochs[-1][0] == epoch:
        return epoch, log_end_offset
    higher = next((e for e in epochs if e[0] > epoch), None)
    if higher is None:  # larger than every known epoch: the log end at the last epoch
        return _last_fetched_epoch(log, log_end_offset), log_end_offset
    floor = [e for e in epochs if e[0] <= epoch]
    if not floor:
        earliest = log.snapshots[0] if log.snapshots else None
        if earliest is not None and earliest[0] == higher[1]:
            return earliest[1], earliest[0]
        return epoch, higher[1]
    return floor[-1][0], higher[1]


def _last_fetched_epoch(log: RaftLog, log_end_offset: int) -> int:
    """The epoch of the last record, else of a snapshot the empty log starts at, else 0."""
    if log.epochs:
        return log.epochs[-1][0]
    if log.snapshots and log.snapshots[-1][0] == log_end_offset:
        return log.snapshots[-1][1]
    return 0


def validate_offset_and_epoch(log: RaftLog, offset: int, epoch: int
                              ) -> tuple[str, tuple[int, int] | None]:
    """("valid", None), ("diverging", (epoch, end offset)) or ("snapshot", (end offset,
    epoch)) for a fetcher at `offset` whose last record has `epoch` (ReplicatedLog's rule)."""
    if log.start_offset == 0 and offset == 0:
        return "valid", None
    earliest = log.snapshots[0] if log.snapshots else None
    if earliest is not None and (offset < log.start_offset
                                 or (offset == log.start_offset and epoch != earliest[1])
                                 or epoch < earliest[1]):
        return "snapshot", log.snapshots[-1]
    end = log.end_offset if log.end_offset is not None else log.high_watermark
    end_epoch, end_offset = end_offset_for_epoch(log, epoch, end)
    if end_epoch != epoch or end_offset < offset:
        return "diverging", (end_epoch, end_offset)
    return "valid", None


@dataclass
class RaftLog:
    """The core's model of __cluster_metadata-0: what is written, what is durable."""

    start_offset: int = 0
    end_offset: int = 0
    flushed_offset: int = 0  # everything below is on disk
    epochs: list[tuple[int, int]] = field(default_factory=list)
    snapshots: list[tuple[int, int]] = field(default_factory=list)  # (end offset, epoch)
    high_watermark: int = 0

    @property
    def last_fetched_epoch(self) -> int:
        """The epoch of the last record (or of the snapshot the log starts at), 0 if none."""
        return _last_fetched_epoch(self, self.end_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return end_offset_for_epoch(self, epoch, self.end_offset)

    def validate(self, offset: int, epoch: int) -> tuple[str, tuple[int, int] | None]:
        return validate_offset_and_epoch(self, offset, epoch)

    def appended(self, base_offset: int, last_offset: int, epoch: int) -> None:
        """A batch written at the end (the shell checked it is contiguous)."""
        if base_offset != self.end_offset or last_offset < base_offset:
            raise ValueError(f"batch {base_offset}-{last_offset} does not start at the log "
                             f"end {self.end_offset}")
        if not self.epochs or self.epochs[-1][0] < epoch:
            self.epochs.append((epoch, base_offset))
        elif self.epochs[-1][0] > epoch:
            raise ValueError(f"batch of epoch {epoch} after epoch {self.epochs[-1][0]}")
        self.end_offset = last_offset + 1

    def truncate_to(self, offset: int) -> None:
        """Drop every record at or above `offset` (never below the high watermark)."""
        if offset >= self.end_offset:
            return
        self.end_offset = max(offset, self.start_offset)
        self.flushed_offset = min(self.flushed_offset, self.end_offset)
        while self.epochs and self.epochs[-1][1] >= self.end_offset:
            self.epochs.pop()

    def truncation_offset(self, epoch: int, end_offset: int) -> int:
        """Where to cut for a leader's DivergingEpoch (ReplicatedLog.truncateToEndOffset)."""
        if epoch == 0:
            return min(end_offset, self.end_offset)
        local_epoch, local_end = self.end_offset_for_epoch(epoch)
        return min(local_end, end_offset) if local_epoch == epoch else local_end

    def reset_to_snapshot(self, snapshot: tuple[int, int]) -> None:
        """A downloaded snapshot replaces the whole log (truncateToLatestSnapshot)."""
        end, _epoch = snapshot
        if snapshot not in self.snapshots:
            self.snapshots.append(snapshot)
            self.snapshots.sort()
        self.start_offset = self.end_offset = self.flushed_offset = end
        self.snapshots = [x for x in self.snapshots if x[0] >= end]
        self.epochs = []
        self.high_watermark = max(self.high_watermark, end)

    def snapshot_taken(self, snapshot: tuple[int, int], *, delete_before: bool) -> None:
        """A snapshot at or below the high watermark; optionally the log below it goes."""
        if snapshot not in self.snapshots:
            self.snapshots.append(snapshot)
            self.snapshots.sort()
        if delete_before and snapshot[0] > self.start_offset:
            # the log and every older snapshot go: the earliest snapshot is at the log start
            self.start_offset = snapshot[0]
            self.snapshots = [x for x in self.snapshots if x[0] >= self.start_offset]
            while len(self.epochs) > 1 and self.epochs[1][1] <= self.start_offset:
                self.epochs.pop(0)
