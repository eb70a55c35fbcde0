"""BrokersToIsrs, BrokersToElrs, directoriesToPartitions: partitions by the broker (or log
directory) they involve, kept up to date by replay.

Why: a broker event (fenced, in controlled shutdown, unregistered, back from an unclean
shutdown), a directory gone offline and the periodic elections change only the partitions
that involve one broker or directory, or that are leaderless or led by another replica than
their preferred one. Looking for them in every partition costs O(partitions) per event (on
100,000 partitions about as much as the rest of the event's work many times over, see
`benchmarks/broker_index.py`); Kafka's ReplicationControlManager keeps the same indexes and
so does this one. Nothing here is written to the log: it is rebuilt by the same replay that
builds the partitions.

Each entry holds the partition itself (the object replay keeps changing in place, replaced
only when a PartitionRecord comes for a partition that exists: then the entry is replaced
too), so a lookup costs no second search. Within one key, partitions come out by topic (in
the order the key first met the topic) and then in the order they joined: deterministic for
one history of records, as Kafka's arrays.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Hashable, Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kraftpy.controller.replication_control import Partition

NO_LEADER = -1



class PartitionSets:
    """key -> topic id -> partition id -> partition (insertion-ordered), with O(1) add and
    remove."""

    def __init__(self) -> None:
        self._sets: dict[Hashable, dict[uuid.UUID, dict[int, Partition]]] = {}

    def add(self, key: Hashable, topic_id: uuid.UUID, partition_id: int,
            part: Partition) -> None:
        topics = self._sets.get(key)
        if topics is None:
            self._sets[key] = {topic_id: {partition_id: part}}
            return
        parts = topics.get(topic_id)
        if parts is None:
            topics[topic_id] = {partition_id: part}
        else:
            parts[partition_id] = part

    def remove(self, key: Hashable, topic_id: uuid.UUID, partition_id: int) -> None:
        topics = self._sets.get(key)
        if topics is None:
            return
        parts = topics.get(topic_id)
        if parts is None:
            return
        parts.pop(partition_id, None)
        if not parts:
            del topics[topic_id]
            if not topics:
                del self._sets[key]

    def update(self, topic_id: uuid.UUID, partition_id: int, before: Collection[Hashable],
               after: Collection[Hashable], part: Partition | None) -> None:
        """The partition was under the keys `before` and is now (as `part`) under `after`."""
        if part is not None:
            for key in after if not before else set(after) - set(before):
                self.add(key, topic_id, partition_id, part)
        for key in set(before) - set(after):
            self.remove(key, topic_id, partition_id)

    def partitions(self, key: Hashable) -> list[Partition]:
        """A copy: the caller may replay changes to these partitions while it walks them."""
        return [part for parts in self._sets.get(key, {}).values() for part in parts.values()]

    def has(self, key: Hashable) -> bool:
        return key in self._sets

    def count(self, key: Hashable) -> int:
        return sum(len(parts) for parts in self._sets.get(key, {}).values())

    def keys(self) -> Iterator[Hashable]:
        return iter(self._sets)


class BrokersToIsrs:
    """Kafka's BrokersToIsrs: the partitions each broker is in the ISR of, the leaderless
    ones under NO_LEADER, and how many partitions each broker leads (`hasLeaderships`)."""

    def __init__(self) -> None:
        self.members = PartitionSets()
        self._leads: dict[int, int] = {}

    def update(self, topic_id: uuid.UUID, partition_id: int,
               prev_isr: Iterable[int] | None, next_isr: Iterable[int] | None,
               prev_leader: int, next_leader: int, part: Partition | None) -> None:
        """A partition's ISR and leader moved (None: the partition is new, or removed)."""
        before = _with_no_leader(prev_isr, prev_leader)
        after = _with_no_leader(next_isr, next_leader)
        self.members.update(topic_id, partition_id, before, after, part)
        if prev_isr is not None and prev_leader != NO_LEADER:
            left = self._leads[prev_leader] - 1
            if left:
                self._leads[prev_leader] = left
            else:
                del self._leads[prev_leader]
        if next_isr is not None and next_leader != NO_LEADER:
            self._leads[next_leader] = self._leads.get(next_leader, 0) + 1

    def add(self, part: Partition) -> None:
        """A new partition: `update` from nothing."""
        members, t, p = self.members, part.topic_id, part.partition_id
        for b in part.isr:
            members.add(b, t, p, part)
        if part.leader == NO_LEADER:
            members.add(NO_LEADER, t, p, part)
        else:
            self._leads[part.leader] = self._leads.get(part.leader, 0) + 1

    def partitions_with_broker_in_isr(self, broker_id: int) -> list[Partition]:
        return self.members.partitions(broker_id)

    def partitions_with_no_leader(self) -> list[Partition]:
        return self.members.partitions(NO_LEADER)

    def has_leaderships(self, broker_id: int) -> bool:
        return broker_id in self._leads

    def leaderships(self, broker_id: int) -> int:
        return self._leads.get(broker_id, 0)


def _with_no_leader(isr: Iterable[int] | None, leader: int) -> list[int]:
    if isr is None:
        return []
    members = list(isr)
    if leader == NO_LEADER:
        members.append(NO_LEADER)
    return members
