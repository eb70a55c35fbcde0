"""KRaft-shaped records gathered into batches of a bounded size as they come.

A snapshot is hundreds of thousands of records in batches of at most 8 MiB. Listing its values
and then building a batch of each slice walks every record twice, and a snapshot's first write
is the time a node spends between starting a `.checkpoint.part` and renaming it.
`KraftBatches` encodes each record as it is appended and frames a batch when the next record
would not fit. A run of records that knows its values' shapes (a topic's partitions,
`controller/partition_values.py`) appends its records to `parts` itself: each record there is
its lead (the previous record's empty header count, then this record's length, attributes and
timestamp delta), its offset delta, its trail (key length -1, value length) and its value,
the heads coming from `kraft_record_head` by value length and offset-delta width.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from kraftpy.protocol.record_batch import (
    RECORD_BATCH_OVERHEAD,
    encode_varint,
    frame_records,
    kraft_record_head,
    offset_delta_varints,
)

# The most a record adds to its value: length, attributes, timestamp and offset deltas, key
# length, value length (varints) and header count. Batches are cut by this bound, so that no
# batch passes its limit whatever its records' varints turn out to be.
RECORD_OVERHEAD = 5 + 1 + 5 + 5 + 1 + 5 + 1


class RecordRun(Protocol):
    """Records that append themselves to a `KraftBatches` (yielding each batch they close)."""

    def append_to(self, batches: KraftBatches) -> Iterator[bytes]: ...


class KraftBatches:
    """Batches of KRaft-shaped records (null key, no headers, one timestamp, no producer), at
    most `max_batch_bytes` each, from `base_offset` on."""

    def __init__(self, *, base_offset: int, partition_leader_epoch: int, timestamp: int,
                 max_batch_bytes: int) -> None:
        self.room = max_batch_bytes - RECORD_BATCH_OVERHEAD
        self.next_offset = base_offset  # the first offset of the batch being built
        self.partition_leader_epoch = partition_leader_epoch
        self.timestamp = timestamp
        self.parts: list[bytes] = []
        self.count = 0  # records in the batch being built
        self.size = 0  # their values' lengths plus RECORD_OVERHEAD each: at most `room`
        self.deltas = offset_delta_varints()

    def append(self, value: bytes) -> bytes | None:
        """A record of `value`; returns the batch it closed first to make room, if it did."""
        length = len(value)
        closed = None
        if self.count and self.size + length + RECORD_OVERHEAD > self.room:
            closed = self.close()
        count = self.count
        delta = self.deltas[count] if count < len(self.deltas) else encode_varint(count)
        lead, trail = kraft_record_head(length, len(delta))
        self.parts += (lead, delta, trail, value)
        self.count = count + 1
        self.size += length + RECORD_OVERHEAD
        return closed

    def close(self) -> bytes | None:
        """The batch of the records appended since the last one closed, framed (None if
        there are none); the next batch begins after it."""
        if not self.count:
            return None
        parts = self.parts
        parts[0] = parts[0][1:]  # the first record has no record before it
        parts.append(b"\x00")
        batch = frame_records(b"".join(parts), self.count, base_offset=self.next_offset,
                              partition_leader_epoch=self.partition_leader_epoch,
                              timestamp=self.timestamp)
        self.next_offset += self.count
        self.parts, self.count, self.size = [], 0, 0
        return batch
