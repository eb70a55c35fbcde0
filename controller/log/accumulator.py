"""Kafka's BatchAccumulator: operations' records gathered into shared batches until a flush.

The transaction log's partitions write this way: each operation's records get their offsets
at once and join the open batch, which later operations share until it is sealed (before a
flush or a read), or until the next operation would not fit in `max_batch_bytes`; an
operation is never split across batches, so a torn batch drops whole operations, none of
them acknowledged. The batch takes the leader epoch and timestamp of its first operation, as
KRaft's accumulator does; another epoch seals it first. (The metadata log needs none of this:
the Raft core gathers a leader's records into batches itself.)
"""

from __future__ import annotations

from collections.abc import Sequence

from kraftpy.controller.log import files
from kraftpy.controller.log.partition_log import PartitionLog
from kraftpy.protocol.record_batch import RECORD_BATCH_OVERHEAD, build_record_batch

# Most a record adds to a batch beyond its key and value: length, attributes, timestamp
# delta, offset delta, key length, value length (varints), header count.
RECORD_OVERHEAD_BOUND = 5 + 1 + 1 + 5 + 5 + 5 + 1


class BatchAccumulator:
    """The open batch of one `PartitionLog`."""

    def __init__(self, log: PartitionLog, max_batch_bytes: int | None = None) -> None:
        self.log = log
        self.max_batch_bytes = max_batch_bytes or log.max_batch_bytes
        self._base = 0
        self._epoch = 0
        self._timestamp = 0
        self._values: list[bytes | None] = []
        self._keys: list[bytes | None] | None = None  # None while every key is null
        self._bytes = 0

    @property
    def log_end_offset(self) -> int:
        """The offset the next record gets (the open batch's included)."""
        return self._base + len(self._values) if self._values else self.log.log_end_offset

    @property
    def pending(self) -> bool:
        return bool(self._values)

    def add(self, values: Sequence[bytes | None], *, leader_epoch: int, timestamp: int,
            keys: Sequence[bytes | None] | None = None) -> int:
        """Add one operation's records to the open batch (not yet written); the first's
        offset. An operation that cannot fit any batch raises ValueError, and then nothing
        changed."""
        log = self.log
        if log.read_only:
            raise files.LogDirError(f"{log.directory} is open read-only")
        count = len(values)
        if not count:
            raise ValueError("an operation needs at least one record")
        if keys is not None and len(keys) != count:
            raise ValueError(f"{len(keys)} keys for {count} values")
        epochs = log.leader_epochs
        newest = max(epochs[-1][0] if epochs else -1, self._epoch if self._values else -1)
        if leader_epoch < newest:
            raise ValueError(f"leader epoch {leader_epoch} below {newest}")
        size = RECORD_OVERHEAD_BOUND * count
        size += sum(len(v) for v in values if v is not None)
        if keys is not None:
            size += sum(len(k) for k in keys if k is not None)
        room = self.max_batch_bytes - RECORD_BATCH_OVERHEAD
        if self._values and (leader_epoch != self._epoch or self._bytes + size > room):
            self.seal()
        if size > room:  # alone it may still fit: built exactly, as `PartitionLog.append`
            raw = build_record_batch(values, base_offset=log.log_end_offset,
                                     partition_leader_epoch=leader_epoch,
                                     timestamp=timestamp, keys=keys)
            return log.append_batch(raw)
        opened = self._values
        if not opened:
            base = log.log_end_offset
            self._base, self._epoch, self._timestamp = base, leader_epoch, timestamp
        else:
            base = self._base + len(opened)
        if keys is not None:
            if self._keys is None:
                self._keys = [None] * len(opened)
            self._keys.extend(keys)
        elif self._keys is not None:
            self._keys.extend([None] * count)
        opened.extend(values)
        self._bytes += size
        return base

    def seal(self) -> None:
        """Write the open batch to the log (no fsync)."""
        values = self._values
        if not values:
            return
        self.log.append(values, keys=self._keys, leader_epoch=self._epoch,
                        timestamp=self._timestamp)
        self._values, self._keys, self._bytes = [], None, 0

    def flush(self) -> int:
        """Seal, then write and fsync the log; its flushed offset."""
        self.seal()
        return self.log.flush()
