"""ReplicationControlManager: topics and partitions, by replaying their records.

Topics are created, given partitions and deleted by the commands of `topic_control.py`;
AlterPartition, elections and reassignments are in `partition_commands.py`. What is here is
the state and the moves that broker events make, as Kafka 4.1's generateLeaderAndIsrUpdates:
a fenced broker, or one in controlled shutdown, leaves every ISR and hands its leaderships to
the next in-sync replica; an unfenced one may lead leaderless partitions again; an
unregistered one leaves ISRs and ELRs; one back from an unclean shutdown (ELR on) loses its
ELR places too; a directory a broker reports offline hands over the leaderships of the
partitions on it as if the broker were fenced for them alone. Each partition's next state
comes from `partition_change.py`; which partitions an event touches comes from the indexes
of `brokers_to_isrs.py`, never from a walk over every partition.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kraftpy.controller.brokers_to_isrs import BrokersToIsrs, PartitionSets
from kraftpy.controller.partition_change import (
    UNASSIGNED,
    Election,
    PartitionChangeBuilder,
    current_directories,
)
from kraftpy.controller.properties import default
from kraftpy.protocol.records.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from kraftpy.protocol.records.partition_change_record import PartitionChangeRecord
from kraftpy.protocol.records.partition_record import PartitionRecord
from kraftpy.protocol.records.topic_record import TopicRecord
from kraftpy.protocol.uuid import kafka_uuid_str

if TYPE_CHECKING:
    from kraftpy.controller.cluster_control import ClusterControlManager
    from kraftpy.controller.config_control import ConfigurationControlManager
    from kraftpy.controller.feature_control import FeatureControlManager

TOPIC_RESOURCE = 2  # ConfigResource.Type.TOPIC

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
    eligible_leader_replicas: list[int] = field(default_factory=list)
    last_known_elr: list[int] = field(default_factory=list)

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
        # Kafka's indexes, kept by replay: ISR members (leaderless under NO_LEADER) and
        # leaderships, ELR members, partitions by log directory, partitions not led by
        # their preferred replica
        self.brokers_to_isrs = BrokersToIsrs()
        self.brokers_to_elrs = PartitionSets()
        self.directories_to_partitions = PartitionSets()
        self.imbalanced: dict[tuple[uuid.UUID, int], Partition] = {}

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
        for part in topic.partitions.values():
            self._index(part, None)
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
        prev = topic.partitions.get(record.partition_id)
        part = topic.partitions[record.partition_id] = Partition(
            record.topic_id, record.partition_id, list(record.replicas), list(record.isr),
            record.leader, record.leader_epoch, record.partition_epoch,
            list(record.removing_replicas), list(record.adding_replicas),
            record.leader_recovery_state, list(record.directories or []),
            list(record.eligible_leader_replicas or []), list(record.last_known_elr or []))
        if prev is not None:
            self._index(prev, None)
        self._index(None, part)

    def replay_partition_change(self, record: PartitionChangeRecord) -> None:
        topic = self.topics.get(record.topic_id)
        part = topic.partitions.get(record.partition_id) if topic else None
        if part is None:
            return
        prev = _Indexed(part.isr, part.leader, part.eligible_leader_replicas, part.directories,
                        part.replicas)
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
        self._index(prev, part)

    def _index(self, prev: Partition | _Indexed | None, part: Partition | None) -> None:
        """Move one partition in the indexes from its state `prev` to `part` (None: absent).
        A list the change did not replace is the same object in both: nothing to move."""
        if prev is None and part is not None:
            self._index_new(part)
            return
        some = part if part is not None else prev
        assert some is not None
        topic_id, partition_id = some.topic_id, some.partition_id
        if prev is None or part is None or prev.isr is not part.isr \
                or prev.leader != part.leader:
            self.brokers_to_isrs.update(
                topic_id, partition_id, None if prev is None else prev.isr,
                None if part is None else part.isr,
                NO_LEADER if prev is None else prev.leader,
                NO_LEADER if part is None else part.leader, part)
        if prev is None or part is None \
                or prev.eligible_leader_replicas is not part.eligible_leader_replicas:
            self.brokers_to_elrs.update(
                topic_id, partition_id, () if prev is None else prev.eligible_leader_replicas,
                () if part is None else part.eligible_leader_replicas, part)
        if prev is None or part is None or prev.directories is not part.directories:
            self.directories_to_partitions.update(
                topic_id, partition_id, () if prev is None else _real_dirs(prev.directories),
                () if part is None else _real_dirs(part.directories), part)
        if part is not None and part.leader != (part.replicas[0] if part.replicas
                                                else NO_LEADER):
            self.imbalanced[topic_id, partition_id] = part
        elif prev is not None:
            self.imbalanced.pop((topic_id, partition_id), None)

    def _index_new(self, part: Partition) -> None:
        """`_index(None, part)` for a new partition, the bulk of a replay, in fewer steps."""
        t, p = part.topic_id, part.partition_id
        self.brokers_to_isrs.add(part)
        if part.eligible_leader_replicas:
            for b in part.eligible_leader_replicas:
                self.brokers_to_elrs.add(b, t, p, part)
        for d in part.directories:
            if d.int >= 100:
                self.directories_to_partitions.add(d, t, p, part)
        if part.leader != (part.replicas[0] if part.replicas else NO_LEADER):
            self.imbalanced[t, p] = part

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
        """Kafka's BrokersToIsrs.hasLeaderships."""
        return self.brokers_to_isrs.has_leaderships(broker_id)


    def topic_of(self, part: Partition) -> Topic:
        return self.topics[part.topic_id]

    # --- what the other managers say (set by `bind`) --------------------------------------

    def bind(self, cluster: ClusterControlManager, features: FeatureControlManager,
             configs: ConfigurationControlManager) -> None:
        """The managers whose state the leader and ISR rules read: brokers, feature levels,
        topic configs. Replay needs none of them."""
        self.cluster, self.features, self.configs = cluster, features, configs

    def topic_config(self, name: str, key: str) -> str | None:
        """The topic's effective value of `key`: its own, else the broker layers' (Kafka's
        ConfigurationControlManager.getTopicConfig)."""
        own = self.configs.configs((TOPIC_RESOURCE, name))
        if key in own:
            return own[key]
        value, _ = self.configs.broker_layers().topic_value(key)
        return value

    def effective_min_isr(self, topic: Topic) -> int:
        """min.insync.replicas, never above the replication factor (getTopicEffectiveMinIsr)."""
        text = self.topic_config(topic.name, "min.insync.replicas") or "1"
        try:
            min_isr = int(text)
        except ValueError:
            min_isr = 1
        first = topic.partitions.get(0) or next(iter(topic.partitions.values()), None)
        factor = len(first.replicas) if first is not None else min_isr
        return min(min_isr, factor)

    def unclean_enabled(self, topic: Topic) -> bool:
        """unclean.leader.election.enable for the topic (uncleanLeaderElectionEnabledForTopic)."""
        return (self.topic_config(topic.name, "unclean.leader.election.enable") or ""
                ).strip().lower() == "true"

    def acceptor(self, part: Partition,
                 accept: Callable[[int], bool] | None = None) -> Callable[[int], bool]:
        """Kafka's LeaderAcceptor: active (or `accept`) and its replica's directory online."""
        accept = accept or self.cluster.usable
        dirs = dict(zip(part.replicas, current_directories(part), strict=False))

        def test(broker_id: int) -> bool:
            return accept(broker_id) and self.cluster.has_online_dir(
                broker_id, dirs.get(broker_id, UNASSIGNED))
        return test

    def builder(self, part: Partition, accept: Callable[[int], bool] | None = None,
                election: Election = Election.ONLINE) -> PartitionChangeBuilder:
        """A PartitionChangeBuilder over `part` with this cluster's rules."""
        topic = self.topic_of(part)
        return PartitionChangeBuilder(
            part, self.acceptor(part, accept), self.features.metadata_version,
            self.effective_min_isr(topic), elr_enabled=self.features.elr_enabled(),
            election=election, default_dir=self.cluster.default_dir)

    def change_version(self) -> int:
        return self.features.partition_change_record_version()

    # --- leader and ISR moves on broker events --------------------------------------------

    def generate_leader_and_isr_updates(self, parts: Iterable[Partition], *,
                                        remove: int = NO_LEADER, add: int = NO_LEADER,
                                        unclean: int = NO_LEADER) -> list[tuple[Any, int]]:
        """Kafka's generateLeaderAndIsrUpdates: `remove` leaves each ISR and may not lead,
        `add` may lead though still fenced (it is being unfenced), `unclean` (a broker back
        from an unclean shutdown) leaves ISR and ELR and may not lead."""
        def accept(r: int) -> bool:
            return r not in (remove, unclean) and (r == add or self.cluster.usable(r))

        out: list[tuple[Any, int]] = []
        version = self.change_version()
        for part in list(parts):
            b = self.builder(part, accept, Election.UNCLEAN
                             if self.unclean_enabled(self.topic_of(part)) else Election.ONLINE)
            if unclean != NO_LEADER:
                b.set_unclean_shutdown_replicas([unclean])
            b.set_target_isr(r for r in part.isr if r not in (remove, unclean))
            record = b.build()
            if record is not None:
                out.append((record, version))
        return out

    def in_isr(self, broker_id: int) -> list[Partition]:
        return self.brokers_to_isrs.partitions_with_broker_in_isr(broker_id)

    def in_elr(self, broker_id: int) -> list[Partition]:
        return self.brokers_to_elrs.partitions(broker_id)

    def leaderless(self) -> list[Partition]:
        return self.brokers_to_isrs.partitions_with_no_leader()

    def imbalanced_partitions(self) -> list[Partition]:
        """Led by another replica than their first (Kafka's imbalancedPartitions)."""
        return list(self.imbalanced.values())

    def on_directory(self, directory: uuid.UUID) -> list[Partition]:
        return self.directories_to_partitions.partitions(directory)

    def handle_broker_fenced(self, broker_id: int) -> list[tuple[Any, int]]:
        """Fenced (session expired, asked, or shutting down now): out of every ISR."""
        return self.generate_leader_and_isr_updates(self.in_isr(broker_id), remove=broker_id)

    def handle_broker_unfenced(self, broker_id: int) -> list[tuple[Any, int]]:
        """Unfenced: leaderless partitions may now elect it."""
        return self.generate_leader_and_isr_updates(self.leaderless(), add=broker_id)

    def handle_broker_in_controlled_shutdown(self, broker_id: int) -> list[tuple[Any, int]]:
        """Controlled shutdown: out of every ISR, its leaderships to the next in-sync replica."""
        return self.generate_leader_and_isr_updates(self.in_isr(broker_id), remove=broker_id)

    def handle_broker_unregistered(self, broker_id: int) -> list[tuple[Any, int]]:
        return (self.generate_leader_and_isr_updates(self.in_isr(broker_id), remove=broker_id)
                + self.generate_leader_and_isr_updates(self.in_elr(broker_id),
                                                       remove=broker_id))

    def handle_broker_shutdown(self, broker_id: int, clean: bool) -> list[tuple[Any, int]]:
        """A new incarnation registers: an unclean end (ELR on) also costs its ELR places."""
        if self.features.elr_enabled() and not clean:
            return (self.generate_leader_and_isr_updates(self.in_isr(broker_id),
                                                         unclean=broker_id)
                    + self.generate_leader_and_isr_updates(self.in_elr(broker_id),
                                                           unclean=broker_id))
        return self.generate_leader_and_isr_updates(self.in_isr(broker_id), remove=broker_id)

    def handle_directories_offline(self, broker_id: int, epoch: int,
                                   offline: Iterable[uuid.UUID],
                                   log_dirs: list[uuid.UUID]) -> tuple[list[tuple[Any, int]],
                                                                      list[uuid.UUID]]:
        """Kafka's handleDirectoriesOffline: of the broker's registered `log_dirs`, those in
        `offline` it did not report before lose it as ISR member and leader of every
        partition on them, as a fence would for those partitions alone; then a
        BrokerRegistrationChangeRecord keeps only its online directories. Directories it
        does not have are ignored. Returns the records and the newly offline directories."""
        offline = set(offline)
        gone = [d for d in log_dirs if d in offline]
        if not gone:
            return [], []
        out: list[tuple[Any, int]] = []
        for directory in gone:
            out += self.generate_leader_and_isr_updates(self.on_directory(directory),
                                                        remove=broker_id)
        online = [d for d in log_dirs if d not in offline]
        out.append((BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch,
                                                   log_dirs=online), 2))
        return out, gone

    def describe(self) -> list[dict[str, Any]]:
        return [{"name": t.name, "topic_id": kafka_uuid_str(t.topic_id),
                 "partitions": [{"partition": p.partition_id, "leader": p.leader,
                                 "leader_epoch": p.leader_epoch, "isr": list(p.isr),
                                 "replicas": list(p.replicas)}
                                for p in sorted(t.partitions.values(),
                                                key=lambda p: p.partition_id)]}
                for t in sorted(self.topics.values(), key=lambda t: t.name)]


@dataclass
class _Indexed:
    """What the indexes know of a partition, taken before a change is replayed into it."""

    isr: list[int]
    leader: int
    eligible_leader_replicas: list[int]
    directories: list[uuid.UUID]
    replicas: list[int]


def _real_dirs(directories: Iterable[uuid.UUID]) -> list[uuid.UUID]:
    """Directory ids a broker can register (DirectoryId.reserved: the first 100 are not)."""
    return [d for d in directories if d.int >= 100]


@dataclass
class ElectionSchedule:
    """When the periodic elections run (Kafka's electPreferred and electUnclean tasks):
    `auto.leader.rebalance.enable` with `leader.imbalance.check.interval.seconds`, and
    `unclean.leader.election.interval.ms`, from the node's properties."""

    balance_interval_ms: int | None = 300_000  # None: auto.leader.rebalance.enable=false
    unclean_interval_ms: int = 300_000
    max_elections: int = 1000  # Kafka's maxElectionsPerImbalance
    next_balance_ms: int = 0
    next_unclean_ms: int = 0

    @staticmethod
    def of(props: Any) -> ElectionSchedule:
        def number(key: str, default: int) -> int:
            try:
                return int(str(props.get(key, default)).strip())
            except ValueError:
                return default
        enabled = str(props.get("auto.leader.rebalance.enable",
                                default("auto.leader.rebalance.enable"))).strip().lower()
        balance = number("leader.imbalance.check.interval.seconds",
                         int(default("leader.imbalance.check.interval.seconds"))) * 1000
        return ElectionSchedule(balance if enabled == "true" else None,
                                number("unclean.leader.election.interval.ms",
                                       int(default("unclean.leader.election.interval.ms"))))

    def start(self, now_ms: int) -> None:
        self.next_balance_ms = now_ms + (self.balance_interval_ms or 0)
        self.next_unclean_ms = now_ms + self.unclean_interval_ms

    def balance_due(self, now_ms: int) -> bool:
        return self.balance_interval_ms is not None and now_ms >= self.next_balance_ms

    def balanced(self, now_ms: int, more: bool) -> None:
        self.next_balance_ms = now_ms + (0 if more else self.balance_interval_ms or 0)

    def unclean_due(self, now_ms: int) -> bool:
        return now_ms >= self.next_unclean_ms

    def uncleaned(self, now_ms: int, more: bool) -> None:
        self.next_unclean_ms = now_ms + (0 if more else self.unclean_interval_ms)
