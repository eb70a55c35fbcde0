"""The encoded TopicRecord and PartitionRecord values of a snapshot, without encoding each
partition.

A snapshot of a million partitions is a million PartitionRecords, and building and encoding
each one costs about 5 us of Python: seconds where Kafka's controller takes one. But a
cluster's partitions repeat a few states: replay shares their replica, ISR and directory
lists (`replication_control.shared`), and most carry the same leader, epochs and recovery
state. A PartitionRecord's value is its 3-byte frame prefix, the partition id (int32), the
topic id (16 bytes), then the rest, which those shared values alone decide. So the rest is
encoded once per distinct state, by the generated codec, and each partition's value is the
prefix, its two ids and that tail joined. The values are the codec's bytes exactly
(`tests/controller/test_partition_values.py` compares them on every shape a partition has).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from typing import Any

from kraftpy.protocol.metadata_frame import encode_metadata_record
from kraftpy.protocol.records.topic_record import TopicRecord

_INT32 = struct.Struct(">i").pack
_IDS_END = 3 + 4 + 16  # frame prefix, partition id, topic id
# Distinct partition states kept per pass at most (a pass over an image whose lists are not
# shared would otherwise keep a tail per partition; it then only runs at the codec's pace).
_MAX_TAILS = 65_536


def topic_values(topics: Iterable[Any], partition_version: int) -> Iterator[bytes]:
    """Each topic's TopicRecord then its PartitionRecords (at `partition_version`, or the one
    a partition's fields need), encoded: `ReplicationControlManager.snapshot_records`'s
    records, in its order, as values."""
    tails: dict[tuple[Any, ...], tuple[bytes, bytes, tuple[Any, ...]]] = {}
    for topic in topics:
        yield encode_metadata_record(TopicRecord(name=topic.name, topic_id=topic.topic_id), 0)
        topic_id = topic.topic_id.bytes
        for part in topic.partitions.values():
            # The lists by identity (they are shared, and kept with the tail so that no id is
            # reused while the pass lasts), the scalars by value.
            key = (id(part.replicas), id(part.isr), id(part.removing_replicas),
                   id(part.adding_replicas), id(part.directories),
                   id(part.eligible_leader_replicas), id(part.last_known_elr), part.leader,
                   part.leader_recovery_state, part.leader_epoch, part.partition_epoch)
            found = tails.get(key)
            if found is None:
                value = encode_metadata_record(*part.record(partition_version))
                if len(tails) >= _MAX_TAILS:
                    tails.clear()
                found = tails[key] = (value[:3], value[_IDS_END:], (
                    part.replicas, part.isr, part.removing_replicas, part.adding_replicas,
                    part.directories, part.eligible_leader_replicas, part.last_known_elr))
            yield b"".join((found[0], _INT32(part.partition_id), topic_id, found[1]))
