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

Each key holds, per topic, a bitmap of partition ids (a bytearray, bit `i` for partition
`i`): a million partitions, each in the ISR of three brokers and on three directories, cost
a few megabytes here instead of hundreds (a set or dict entry per member). Adding or removing
a member is O(1); listing a key's partitions costs O(its members + its topics' partition
counts / 8). Within one key,
partitions come out by topic (in the order the key first met the topic) and then by id:
deterministic for one history of records. Kafka keeps an int array per (broker, topic).
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Hashable, Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kraftpy.controller.replication_control import Partition, Topic

NO_LEADER = -1

# byte value -> the positions of its set bits, lowest first
_BITS: tuple[tuple[int, ...], ...] = tuple(
    tuple(bit for bit in range(8) if value >> bit & 1) for value in range(256))


class PartitionSets:
    """key -> topic -> bitmap of partition ids, with O(1) add and remove and a count of
    members per key. Topics are the replication manager's `Topic` objects (hashed by
    identity: no topic id is hashed per change), so a member resolves to its partition with
    no lookup but the topic's own."""

    __slots__ = ("_sets", "_counts", "size")

    def __init__(self) -> None:
        self._sets: dict[Hashable, dict[Topic, bytearray]] = {}
        self._counts: dict[Hashable, int] = {}
        self.size = 0  # members under all keys

    def add(self, key: Hashable, topic: Topic, partition_id: int) -> None:
        topics = self._sets.get(key)
        if topics is None:
            topics = self._sets[key] = {}
            self._counts[key] = 0
        bits = topics.get(topic)
        byte = partition_id >> 3
        if bits is None:
            bits = topics[topic] = bytearray(byte + 1)
        elif byte >= len(bits):
            bits.extend(bytes(byte + 1 - len(bits)))
        old = bits[byte]
        new = old | 1 << (partition_id & 7)
        if new != old:
            bits[byte] = new
            self._counts[key] += 1
            self.size += 1

    def remove(self, key: Hashable, topic: Topic, partition_id: int) -> None:
        topics = self._sets.get(key)
        if topics is None:
            return
        bits = topics.get(topic)
        byte = partition_id >> 3
        if bits is None or byte >= len(bits):
            return
        old = bits[byte]
        new = old & ~(1 << (partition_id & 7))
        if new == old:
            return
        bits[byte] = new
        self.size -= 1
        left = self._counts[key] - 1
        if left:
            self._counts[key] = left
        else:  # the key's last member: the key goes (its empty bitmaps with it)
            del self._sets[key], self._counts[key]

    def update(self, topic: Topic, partition_id: int, before: Collection[Hashable],
               after: Collection[Hashable]) -> None:
        """The partition was under the keys `before` and is now under `after`."""
        for key in after:
            if key not in before:
                self.add(key, topic, partition_id)
        for key in before:
            if key not in after:
                self.remove(key, topic, partition_id)

    def forget_topic(self, topic: Topic) -> None:
        """Drop the topic's (now empty) bitmaps, once its partitions are gone."""
        for topics in self._sets.values():
            topics.pop(topic, None)

    def freeze(self, key: Hashable) -> Frozen:
        """The members of `key` as they are now (copies of its bitmaps: cheap, and walked
        later by `frozen_ids` while replay goes on changing the index)."""
        return [(topic, bytes(bits)) for topic, bits in self._sets.get(key, {}).items()]

    def freeze_all(self) -> Frozen:
        """`freeze` of every key, one after another."""
        return [member for key in list(self._counts) for member in self.freeze(key)]

    def ids(self, key: Hashable) -> Iterator[tuple[uuid.UUID, int]]:
        """(topic id, partition id) of each member of `key` (as it was when asked)."""
        return ((topic.topic_id, partition_id)
                for topic, partition_id in frozen_ids(self.freeze(key)))

    def partitions(self, key: Hashable) -> list[Partition]:
        """A copy: the caller may replay changes to these partitions while it walks them."""
        out: list[Partition] = []
        for topic, bits in self._sets.get(key, {}).items():
            parts = topic.partitions
            for byte, value in enumerate(bits):
                if value:
                    base = byte << 3
                    for bit in _BITS[value]:
                        out.append(parts[base | bit])
        return out

    def has(self, key: Hashable) -> bool:
        return key in self._counts

    def count(self, key: Hashable) -> int:
        return self._counts.get(key, 0)

    def keys(self) -> Iterator[Hashable]:
        return iter(list(self._counts))


Frozen = list[tuple["Topic", bytes]]


def frozen_ids(members: Frozen) -> Iterator[tuple[Topic, int]]:
    """(topic, partition id) of each member of a `freeze`, in order."""
    for topic, bits in members:
        for byte, value in enumerate(bits):
            if value:
                base = byte << 3
                for bit in _BITS[value]:
                    yield topic, base | bit


class BrokersToIsrs:
    """Kafka's BrokersToIsrs: the partitions each broker is in the ISR of, the leaderless
    ones under NO_LEADER, and how many partitions each broker leads (`hasLeaderships`)."""

    __slots__ = ("members", "_leads")

    def __init__(self) -> None:
        self.members = PartitionSets()
        self._leads: dict[int, int] = {}

    def update(self, topic: Topic, partition_id: int,
               prev_isr: Iterable[int] | None, next_isr: Iterable[int] | None,
               prev_leader: int, next_leader: int) -> None:
        """A partition's ISR and leader moved (None: the partition is new, or removed)."""
        before = _with_no_leader(prev_isr, prev_leader)
        after = _with_no_leader(next_isr, next_leader)
        self.members.update(topic, partition_id, before, after)
        leads = self._leads
        if prev_isr is not None and prev_leader != NO_LEADER:
            left = leads[prev_leader] - 1
            if left:
                leads[prev_leader] = left
            else:
                del leads[prev_leader]
        if next_isr is not None and next_leader != NO_LEADER:
            leads[next_leader] = leads.get(next_leader, 0) + 1

    def add(self, topic: Topic, part: Partition) -> None:
        """A new partition: `update` from nothing."""
        members, p = self.members, part.partition_id
        for b in part.isr:
            members.add(b, topic, p)
        leader = part.leader
        if leader == NO_LEADER:
            members.add(NO_LEADER, topic, p)
        else:
            self._leads[leader] = self._leads.get(leader, 0) + 1

    def partitions_with_broker_in_isr(self, broker_id: int) -> list[Partition]:
        return self.members.partitions(broker_id)

    def partitions_with_no_leader(self) -> list[Partition]:
        return self.members.partitions(NO_LEADER)

    def offline_count(self) -> int:
        """Partitions without a leader (Kafka's offlinePartitionCount)."""
        return self.members.count(NO_LEADER)

    def has_leaderships(self, broker_id: int) -> bool:
        return broker_id in self._leads

    def leaderships(self, broker_id: int) -> int:
        return self._leads.get(broker_id, 0)


def _with_no_leader(isr: Iterable[int] | None, leader: int) -> Collection[int]:
    if isr is None:
        return ()
    if leader == NO_LEADER:
        return [*isr, NO_LEADER]
    return isr  # type: ignore[return-value]
