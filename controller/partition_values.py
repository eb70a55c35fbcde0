"""The encoded TopicRecord and PartitionRecord values of a snapshot, without encoding each
partition.

A snapshot of a million partitions is a million PartitionRecords, and building and encoding
each one costs about 5 us of Python: seconds where Kafka's controller takes one. But a
cluster's partitions repeat a few states: replay shares their replica, ISR and directory
lists (`replication_control.shared`), and most carry the same leader, epochs and recovery
state. Replay also gives each partition the interned `PartitionState` of its lists, leader and
recovery state. A PartitionRecord's value is its 3-byte frame prefix, the partition id (int32),
the topic id (16 bytes), then the rest, which that state and the two epochs alone decide. So
the rest is encoded once per distinct (state, leader epoch, partition epoch), by the generated
codec, and each partition's value is the prefix, its two ids and that tail. The values are the
codec's bytes exactly (`tests/controller/test_partition_values.py` compares them on every
shape a partition has).

A snapshot writer does not even join a value per partition: a topic's partitions are one
`TopicPartitions` run, which appends each partition's record to the batch being built
(`protocol/kraft_batches.py`) piece by piece, its record head (which only the value's length
and the offset delta's width decide) kept with the state's tail. The records are those
`build_record_batch` makes of the values, and the batches are cut where it would cut them.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import Any

from kraftpy.controller.replication_control import partition_state
from kraftpy.protocol.kraft_batches import RECORD_OVERHEAD, KraftBatches
from kraftpy.protocol.metadata_frame import encode_metadata_record
from kraftpy.protocol.record_batch import encode_varint, kraft_record_head
from kraftpy.protocol.records.topic_record import TopicRecord

_IDS = struct.Struct(">i16s").pack  # partition id, topic id
_IDS_END = 3 + 4 + 16  # frame prefix, partition id, topic id
# Distinct partition states kept per pass at most (a pass over an image whose lists are not
# shared would otherwise keep a tail per partition; it then only runs at the codec's pace).
_MAX_TAILS = 65_536
_WIDTHS = range(6)  # an offset delta's varint is one to five bytes wide (0 is not used)

# What one (state, leader epoch, partition epoch) encodes to: the record's cost in a batch, the
# record's lead by offset-delta width, its trail followed by the value's frame prefix, and the
# value past the two ids.
Tail = tuple[int, tuple[bytes, ...], bytes, bytes]


class TopicPartitions:
    """A topic's PartitionRecords, in its order, as values or appended to batches."""

    __slots__ = ("tails", "topic", "version")

    def __init__(self, topic: Any, version: int, tails: dict[tuple[Any, ...], Tail]) -> None:
        self.topic = topic
        self.version = version
        self.tails = tails  # shared by the pass's topics

    def _tail(self, part: Any, key: tuple[Any, ...]) -> Tail:
        value = encode_metadata_record(*part.record(self.version))
        length = len(value)
        trail = kraft_record_head(length, 1)[1]
        if len(self.tails) >= _MAX_TAILS:
            self.tails.clear()
        found = self.tails[key] = (
            length + RECORD_OVERHEAD,
            tuple(kraft_record_head(length, width)[0] if width else b"" for width in _WIDTHS),
            trail + value[:3], value[_IDS_END:])
        return found

    def values(self) -> Iterator[bytes]:
        topic_id = self.topic.topic_id.bytes
        tails = self.tails
        for part in self.topic.partitions.values():
            key = _key(part)
            found = tails.get(key) or self._tail(part, key)
            yield b"".join((found[2][-3:], _IDS(part.partition_id, topic_id), found[3]))

    def append_to(self, batches: KraftBatches) -> Iterator[bytes]:
        """Each partition's record appended to `batches`; yields each batch that fills."""
        parts = batches.parts
        append = parts.append
        count, size, room = batches.count, batches.size, batches.room
        deltas = batches.deltas
        table_size = len(deltas)
        topic_id = self.topic.topic_id.bytes
        tails = self.tails
        for part in self.topic.partitions.values():
            key = (part.state or partition_state(part), part.leader_epoch,
                   part.partition_epoch)  # `_key`, inline
            found = tails.get(key)
            if found is None:
                found = self._tail(part, key)
            cost = found[0]
            if count and size + cost > room:
                batches.count, batches.size = count, size
                yield batches.close()  # type: ignore[misc]
                parts = batches.parts
                append = parts.append
                count = size = 0
            delta = deltas[count] if count < table_size else encode_varint(count)
            append(found[1][len(delta)])
            append(delta)
            append(found[2])
            append(_IDS(part.partition_id, topic_id))
            append(found[3])
            count += 1
            size += cost
        batches.count, batches.size = count, size


def _key(part: Any) -> tuple[Any, ...]:
    """A partition's state (interned by replay; found now for one built apart) and epochs."""
    return (part.state or partition_state(part), part.leader_epoch, part.partition_epoch)


def topic_runs(topics: Iterable[Any], partition_version: int) -> Iterator[bytes | TopicPartitions]:
    """Each topic's TopicRecord value, then its PartitionRecords (at `partition_version`, or
    the one a partition's fields need) as a run: `ReplicationControlManager.snapshot_records`'s
    records, in its order."""
    tails: dict[tuple[Any, ...], Tail] = {}
    for topic in topics:
        yield encode_metadata_record(TopicRecord(name=topic.name, topic_id=topic.topic_id), 0)
        yield TopicPartitions(topic, partition_version, tails)


def record_values(items: Iterable[bytes | TopicPartitions]) -> Iterator[bytes]:
    """The values of `topic_runs`'s items (or a snapshot's: values and runs), one by one."""
    for item in items:
        if isinstance(item, bytes):
            yield item
        else:
            yield from item.values()
