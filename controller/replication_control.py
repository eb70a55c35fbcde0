"""ReplicationControlManager: topics and partitions, by replaying their records.

Topics are created, given partitions and deleted by the commands of `topic_control.py`.
Kafka's heartbeat rules depend on them too: a fenced broker leaves every ISR, a broker in
controlled shutdown hands its leaderships over, an unfenced one takes leaderless partitions
back. Only those moves are made here (no ELR, no reassignment).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kraftpy.protocol.records.partition_change_record import PartitionChangeRecord
from kraftpy.protocol.records.partition_record import PartitionRecord
from kraftpy.protocol.records.topic_record import TopicRecord
from kraftpy.protocol.uuid import kafka_uuid_str

NO_LEADER = -1
NO_LEADER_CHANGE = -2


@dataclass
class Partition:
    topic_id: uuid.UUID
    partition_id: int
    replicas: list[int]
    isr: list[int]
    leader: int
    leader_epoch: int
    partition_epoch: int
    removing_replicas: list[int] = field(default_factory=list)
    adding_replicas: list[int] = field(default_factory=list)
    leader_recovery_state: int = 0
    directories: list[uuid.UUID] = field(default_factory=list)
    eligible_leader_replicas: list[int] | None = None
    last_known_elr: list[int] | None = None

    def record(self, version: int) -> tuple[PartitionRecord, int]:
        """At `version` (metadata.version's), or the one its fields need if that is later."""
        if self.eligible_leader_replicas or self.last_known_elr:
            version = 2
        elif self.directories:
            version = max(version, 1)
        return PartitionRecord(
            partition_id=self.partition_id, topic_id=self.topic_id,
            replicas=list(self.replicas), isr=list(self.isr),
            removing_replicas=list(self.removing_replicas),
            adding_replicas=list(self.adding_replicas), leader=self.leader,
            leader_recovery_state=self.leader_recovery_state, leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch, directories=list(self.directories),
            # Kafka keeps these as arrays and writes only non-empty ones.
            eligible_leader_replicas=list(self.eligible_leader_replicas or []) or None,
            last_known_elr=list(self.last_known_elr or []) or None), version


@dataclass
class Topic:
    name: str
    topic_id: uuid.UUID
    partitions: dict[int, Partition] = field(default_factory=dict)


class ReplicationControlManager:
    def __init__(self) -> None:
        self.topics: dict[uuid.UUID, Topic] = {}
        self.topics_by_name: dict[str, uuid.UUID] = {}
        # names with '.' or '_', by their unified form: such names may not collide
        self._collision_names: dict[str, list[str]] = {}

    # --- replay ---------------------------------------------------------------------------

    def replay_topic(self, record: TopicRecord) -> None:
        self.topics[record.topic_id] = Topic(record.name, record.topic_id)
        self.topics_by_name[record.name] = record.topic_id
        if "." in record.name or "_" in record.name:
            unified = record.name.replace(".", "_")
            self._collision_names.setdefault(unified, []).append(record.name)

    def replay_remove_topic(self, record: Any) -> Topic | None:
        """Forget the topic; returns it (its configs go too: the caller removes them)."""
        topic = self.topics.pop(record.topic_id, None)
        if topic is None:
            return None
        if self.topics_by_name.get(topic.name) == record.topic_id:
            del self.topics_by_name[topic.name]
        names = self._collision_names.get(topic.name.replace(".", "_"))
        if names and topic.name in names:
            names.remove(topic.name)
            if not names:
                del self._collision_names[topic.name.replace(".", "_")]
        return topic

    def replay_clear_elr(self, record: Any) -> None:
        """ClearElrRecord: no partition of the topic (of every topic, for an empty name) keeps
        eligible leader replicas, as after a min.insync.replicas change."""
        if record.topic_name:
            topic_id = self.topics_by_name.get(record.topic_name)
            topics = [self.topics[topic_id]] if topic_id in self.topics else []
        else:
            topics = list(self.topics.values())
        for topic in topics:
            for part in list(topic.partitions.values()):
                if part.eligible_leader_replicas or part.last_known_elr:
                    self.replay_partition_change(PartitionChangeRecord(
                        partition_id=part.partition_id, topic_id=part.topic_id,
                        eligible_leader_replicas=[], last_known_elr=[]))

    def colliding(self, unified: str) -> list[str]:
        """Existing topic names whose '.' -> '_' form is `unified`."""
        return list(self._collision_names.get(unified, ()))

    def replay_partition(self, record: PartitionRecord) -> None:
        topic = self.topics.get(record.topic_id)
        if topic is None:  # Kafka refuses this too; tolerate it, a log may be partial
            topic = self.topics[record.topic_id] = Topic("", record.topic_id)
        topic.partitions[record.partition_id] = Partition(
            record.topic_id, record.partition_id, list(record.replicas), list(record.isr),
            record.leader, record.leader_epoch, record.partition_epoch,
            list(record.removing_replicas), list(record.adding_replicas),
            record.leader_recovery_state, list(record.directories or []),
            _opt(record.eligible_leader_replicas), _opt(record.last_known_elr))

    def replay_partition_change(self, record: PartitionChangeRecord) -> None:
        topic = self.topics.get(record.topic_id)
        part = topic.partitions.get(record.partition_id) if topic else None
        if part is None:
            return
        if record.isr is not None:
            part.isr = list(record.isr)
        if record.leader != NO_LEADER_CHANGE:
            part.leader = record.leader
            part.leader_epoch += 1
        if record.replicas is not None:
            part.replicas = list(record.replicas)
        if record.removing_replicas is not None:
            part.removing_replicas = list(record.removing_replicas)
        if record.adding_replicas is not None:
            part.adding_replicas = list(record.adding_replicas)
        if record.leader_recovery_state != -1:
            part.leader_recovery_state = record.leader_recovery_state
        if record.directories is not None:
            part.directories = list(record.directories)
        if record.eligible_leader_replicas is not None:
            part.eligible_leader_replicas = list(record.eligible_leader_replicas)
        if record.last_known_elr is not None:
            part.last_known_elr = list(record.last_known_elr)
        part.partition_epoch += 1

    def snapshot_records(self, partition_version: int) -> list[tuple[Any, int]]:
        out: list[tuple[Any, int]] = []
        for topic in self.topics.values():
            out.append((TopicRecord(name=topic.name, topic_id=topic.topic_id), 0))
            out.extend(p.record(partition_version) for p in topic.partitions.values())
        return out

    # --- queries --------------------------------------------------------------------------

    def partitions(self) -> Iterator[Partition]:
        for topic in self.topics.values():
            yield from topic.partitions.values()

    def leads_partitions(self, broker_id: int) -> bool:
        return any(p.leader == broker_id for p in self.partitions())

    # --- leader and ISR moves -------------------------------------------------------------

    def remove_from_isr(self, broker_id: int, usable: Callable[[int], bool],
                        version: int) -> list[tuple[Any, int]]:
        """Fencing: the broker leaves every ISR (keeping a last member) and every leadership."""
        out = []
        for part in self.partitions():
            if broker_id not in part.isr:
                continue
            isr = [r for r in part.isr if r != broker_id] or [broker_id]
            leader = part.leader
            if leader == broker_id or leader not in isr:
                leader = next((r for r in part.replicas if r in isr and r != broker_id
                               and usable(r)), NO_LEADER)
            out.extend(self._change(part, isr, leader, version))
        return out

    def move_leaders_away(self, broker_id: int, usable: Callable[[int], bool],
                          version: int) -> list[tuple[Any, int]]:
        """Controlled shutdown: hand each leadership to another usable ISR member."""
        out = []
        for part in self.partitions():
            if part.leader != broker_id:
                continue
            isr = [r for r in part.isr if r != broker_id] or list(part.isr)
            leader = next((r for r in part.replicas if r in isr and r != broker_id
                           and usable(r)), NO_LEADER)
            out.extend(self._change(part, isr, leader, version))
        return out

    def elect_for(self, broker_id: int, version: int) -> list[tuple[Any, int]]:
        """Unfencing: leaderless partitions whose ISR holds the broker get it as leader."""
        return [c for p in self.partitions() if p.leader == NO_LEADER and broker_id in p.isr
                for c in self._change(p, p.isr, broker_id, version)]

    @staticmethod
    def _change(part: Partition, isr: list[int], leader: int,
                version: int) -> list[tuple[Any, int]]:
        """The change record taking `part` to (isr, leader); none when nothing changes."""
        if isr == part.isr and leader == part.leader:
            return []
        return [(PartitionChangeRecord(
            partition_id=part.partition_id, topic_id=part.topic_id,
            isr=isr if isr != part.isr else None,
            leader=leader if leader != part.leader else NO_LEADER_CHANGE), version)]

    def describe(self) -> list[dict[str, Any]]:
        return [{"name": t.name, "topic_id": kafka_uuid_str(t.topic_id),
                 "partitions": [{"partition": p.partition_id, "leader": p.leader,
                                 "leader_epoch": p.leader_epoch, "isr": list(p.isr),
                                 "replicas": list(p.replicas)}
                                for p in sorted(t.partitions.values(),
                                                key=lambda p: p.partition_id)]}
                for t in sorted(self.topics.values(), key=lambda t: t.name)]


def _opt(values: list[int] | None) -> list[int] | None:
    return None if values is None else list(values)
