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

import gc
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from operator import attrgetter
from typing import TYPE_CHECKING, Any

from kraftpy.controller.brokers_to_isrs import NO_LEADER, BrokersToIsrs, PartitionSets
from kraftpy.controller.leader_moves import LeaderMoves
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

NO_LEADER_CHANGE = -2


# Kafka's partition states repeat: a few replica orders, ISRs and directory lists serve
# every partition of a cluster. Replay keeps one list per distinct value (`shared`), so a
# million partitions hold a million references, not millions of lists (and a directory id
# decoded a million times is kept once). These lists are never changed in place: a change
# replaces the partition's list with another shared one.
_SHARED: dict[tuple[Any, ...], list[Any]] = {}
_SHARED_MAX = 1 << 16  # distinct values kept; past that the table starts over (never wrong)
NONE: list[Any] = []  # the shared empty list


def shared(values: Iterable[Any] | None) -> list[Any]:
    """The shared list equal to `values` (never to be changed in place)."""
    if not values:
        return NONE
    key = tuple(values)
    found = _SHARED.get(key)
    if found is None:
        if len(_SHARED) >= _SHARED_MAX:
            _SHARED.clear()
        found = _SHARED[key] = list(key)
    return found


_DIRS: dict[tuple[int, ...], list[uuid.UUID]] = {}
_as_int = attrgetter("int")


def shared_dirs(values: Iterable[uuid.UUID] | None) -> list[uuid.UUID]:
    """`shared` for directory ids, looked up by their ints (a UUID hashes in slow Python)."""
    if not values:
        return NONE
    key = tuple(map(_as_int, values))
    found = _DIRS.get(key)
    if found is None:
        if len(_DIRS) >= _SHARED_MAX:
            _DIRS.clear()
        found = _DIRS[key] = list(values)
    return found


class PartitionState:
    """What a partition's record holds besides its ids and epochs: its lists (by identity: they
    are `shared`), leader and recovery state. Partitions in one state share one object
    (`partition_state`), so that a snapshot, which encodes a state once for all the
    partitions in it, finds a partition's state with one attribute, not nine."""

    __slots__ = ("adding_replicas", "directories", "eligible_leader_replicas", "isr",
                 "last_known_elr", "leader", "leader_recovery_state", "removing_replicas",
                 "replicas")

    def __init__(self, part: Partition) -> None:
        # The lists are held: no id in this state's key is reused while it is interned.
        self.replicas, self.isr = part.replicas, part.isr
        self.removing_replicas, self.adding_replicas = part.removing_replicas, part.adding_replicas
        self.directories = part.directories
        self.eligible_leader_replicas = part.eligible_leader_replicas
        self.last_known_elr = part.last_known_elr
        self.leader, self.leader_recovery_state = part.leader, part.leader_recovery_state


_STATES: dict[tuple[Any, ...], PartitionState] = {}


def partition_state(part: Partition) -> PartitionState:
    """The shared `PartitionState` of the partition's fields as they are now (a partition's
    fields change only by replay, which sets its state again)."""
    key = (id(part.replicas), id(part.isr), id(part.removing_replicas),
           id(part.adding_replicas), id(part.directories), id(part.eligible_leader_replicas),
           id(part.last_known_elr), part.leader, part.leader_recovery_state)
    found = _STATES.get(key)
    if found is None:
        if len(_STATES) >= _SHARED_MAX:
            _STATES.clear()  # interned states already given out stay valid
        found = _STATES[key] = PartitionState(part)
    return found


_FIELDS = ("topic_id", "partition_id", "replicas", "isr", "leader", "leader_epoch",
           "partition_epoch", "removing_replicas", "adding_replicas", "leader_recovery_state",
           "directories", "eligible_leader_replicas", "last_known_elr")


class Partition:
    """One partition's registration (Kafka's PartitionRegistration). Its lists are shared
    with other partitions (`shared`) and with the records made from it: replace them, never
    change them in place. `state` is the shared `PartitionState` of its fields in the image:
    replay sets it whenever it sets a field (None: a partition built apart)."""

    __slots__ = (*_FIELDS, "state")

    def __init__(self, topic_id: uuid.UUID, partition_id: int, replicas: list[int],
                 isr: list[int], leader: int, leader_epoch: int, partition_epoch: int,
                 removing_replicas: list[int] = NONE, adding_replicas: list[int] = NONE,
                 leader_recovery_state: int = 0, directories: list[uuid.UUID] = NONE,
                 eligible_leader_replicas: list[int] = NONE,
                 last_known_elr: list[int] = NONE) -> None:
        self.topic_id = topic_id
        self.partition_id = partition_id
        self.replicas = replicas
        self.isr = isr
        self.leader = leader
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.removing_replicas = removing_replicas
        self.adding_replicas = adding_replicas
        self.leader_recovery_state = leader_recovery_state
        self.directories = directories
        self.eligible_leader_replicas = eligible_leader_replicas
        self.last_known_elr = last_known_elr
        # Set by replay, which alone puts a partition in the image (a partition built for a
        # record it proposes must not intern its fresh lists)
        self.state: PartitionState | None = None

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _FIELDS)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Partition):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return "Partition(" + ", ".join(f"{name}={getattr(self, name)!r}"
                                        for name in _FIELDS) + ")"

    def record(self, version: int) -> tuple[PartitionRecord, int]:
        """At `version` (metadata.version's), or the one its fields need if that is later.
        The record shares this partition's lists (records are encoded, never changed)."""
        elr, last = self.eligible_leader_replicas, self.last_known_elr
        if elr or last:
            version = 2
        elif self.directories:
            version = max(version, 1)
        return PartitionRecord(
            partition_id=self.partition_id, topic_id=self.topic_id,
            replicas=self.replicas, isr=self.isr, removing_replicas=self.removing_replicas,
            adding_replicas=self.adding_replicas, leader=self.leader,
            leader_recovery_state=self.leader_recovery_state, leader_epoch=self.leader_epoch,
            partition_epoch=self.partition_epoch, directories=self.directories,
            # Kafka keeps these as arrays and writes only non-empty ones.
            eligible_leader_replicas=elr or None, last_known_elr=last or None), version


class Topic:
    __slots__ = ("name", "topic_id", "partitions")

    def __init__(self, name: str, topic_id: uuid.UUID,
                 partitions: dict[int, Partition] | None = None) -> None:
        self.name = name
        self.topic_id = topic_id
        self.partitions: dict[int, Partition] = {} if partitions is None else partitions

    def __repr__(self) -> str:
        return f"Topic(name={self.name!r}, topic_id={self.topic_id!r}, " \
               f"partitions={len(self.partitions)})"


# The image is frozen out of the cyclic collector's walks each time it grew by this many
# partitions (`_index_new`): a collection then walks some 10 ms of objects at most.
FREEZE_EVERY = 20_000


def _preferred(replicas: list[int]) -> int:
    return replicas[0] if replicas else NO_LEADER


class ReplicationControlManager:
    def __init__(self) -> None:
        self.topics: dict[uuid.UUID, Topic] = {}
        self.topics_by_name: dict[str, uuid.UUID] = {}
        # names with '.' or '_', by their unified form: such names may not collide
        self._collision_names: dict[str, list[str]] = {}
        # Kafka's indexes, kept by replay: ISR members (leaderless under NO_LEADER) and
        # leaderships, ELR members, partitions by log directory (its id's int), partitions
        # not led by their preferred replica (under that replica), partitions being
        # reassigned
        self.brokers_to_isrs = BrokersToIsrs()
        self.brokers_to_elrs = PartitionSets()
        self.directories_to_partitions = PartitionSets()
        self.imbalanced = PartitionSets()
        self.reassigning = PartitionSets()
        self.partition_count = 0  # Kafka's globalPartitionCount
        self._freeze_at = FREEZE_EVERY

    # --- replay ---------------------------------------------------------------------------

    def replay_topic(self, record: TopicRecord) -> None:
        self.topics[record.topic_id] = Topic(record.name, record.topic_id)
        self.topics_by_name[record.name] = record.topic_id
        if "." in record.name or "_" in record.name:
            unified = record.name.replace(".", "_")
            self._collision_names.setdefault(unified, []).append(record.name)

    def replay_remove_topic(self, record: Any) -> Topic | None:
        """Forget the topic; returns it (its configs go too: the caller removes them)."""
        topic = self.topics.get(record.topic_id)
        if topic is None:
            return None
        for part in topic.partitions.values():
            self._unindex(topic, part)
        for index in self._indexes():
            index.forget_topic(topic)
        del self.topics[record.topic_id]
        if self.topics_by_name.get(topic.name) == record.topic_id:
            del self.topics_by_name[topic.name]
        names = self._collision_names.get(topic.name.replace(".", "_"))
        if names and topic.name in names:
            names.remove(topic.name)
            if not names:
                del self._collision_names[topic.name.replace(".", "_")]
        return topic

    def _indexes(self) -> tuple[PartitionSets, ...]:
        return (self.brokers_to_isrs.members, self.brokers_to_elrs,
                self.directories_to_partitions, self.imbalanced, self.reassigning)

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
        partition_id = record.partition_id
        part = Partition(
            topic.topic_id, partition_id, shared(record.replicas), shared(record.isr),
            record.leader, record.leader_epoch, record.partition_epoch,
            shared(record.removing_replicas), shared(record.adding_replicas),
            record.leader_recovery_state, shared_dirs(record.directories),
            shared(record.eligible_leader_replicas), shared(record.last_known_elr))
        part.state = partition_state(part)
        partitions = topic.partitions
        prev = partitions.get(partition_id)
        partitions[partition_id] = part
        if prev is not None:
            self._unindex(topic, prev)
        self._index_new(topic, part)

    def replay_partition_change(self, record: PartitionChangeRecord) -> None:
        topic = self.topics.get(record.topic_id)
        part = topic.partitions.get(record.partition_id) if topic else None
        if part is None:
            return
        isr, leader, replicas = part.isr, part.leader, part.replicas
        elr, directories = part.eligible_leader_replicas, part.directories
        reassigning = bool(part.removing_replicas or part.adding_replicas)
        if record.isr is not None:
            part.isr = shared(record.isr)
        if record.leader != NO_LEADER_CHANGE:
            part.leader = record.leader
            part.leader_epoch += 1
        if record.replicas is not None:
            part.replicas = shared(record.replicas)
        if record.removing_replicas is not None:
            part.removing_replicas = shared(record.removing_replicas)
        if record.adding_replicas is not None:
            part.adding_replicas = shared(record.adding_replicas)
        if record.leader_recovery_state != -1:
            part.leader_recovery_state = record.leader_recovery_state
        if record.directories is not None:
            part.directories = shared_dirs(record.directories)
        if record.eligible_leader_replicas is not None:
            part.eligible_leader_replicas = shared(record.eligible_leader_replicas)
        if record.last_known_elr is not None:
            part.last_known_elr = shared(record.last_known_elr)
        part.partition_epoch += 1
        part.state = partition_state(part)
        # Shared lists: an unchanged value is the same list, and the index need not move.
        t, p = topic, part.partition_id
        if isr is not part.isr or leader != part.leader:
            self.brokers_to_isrs.update(t, p, isr, part.isr, leader, part.leader)
        if elr is not part.eligible_leader_replicas:
            self.brokers_to_elrs.update(t, p, elr, part.eligible_leader_replicas)
        if directories is not part.directories:
            self.directories_to_partitions.update(t, p, _real_dirs(directories),
                                                  _real_dirs(part.directories))
        if leader != part.leader or replicas is not part.replicas:
            before, after = _preferred(replicas), _preferred(part.replicas)
            if leader != before:
                self.imbalanced.remove(before, t, p)
            if part.leader != after:
                self.imbalanced.add(after, t, p)
        if reassigning != bool(part.removing_replicas or part.adding_replicas):
            if reassigning:
                self.reassigning.remove(None, t, p)
            else:
                self.reassigning.add(None, t, p)

    def _index_new(self, topic: Topic, part: Partition) -> None:
        """A new partition into the indexes (the bulk of a replay)."""
        t, p = topic, part.partition_id
        self.partition_count += 1
        if self.partition_count >= self._freeze_at:
            # Python's cyclic collector walks every object it tracks in a full collection
            # (some 0.65 s for a million partitions, 40 ms for 125,000), and runs one each
            # time the heap grew by a quarter, on the loop. The image holds no reference
            # cycles; what exists now is left out of its walks from here on (gc.freeze:
            # constant time), so a collection walks at most the last few partitions. Freed
            # by reference counting as ever.
            gc.freeze()
            self._freeze_at = self.partition_count + FREEZE_EVERY
        self.brokers_to_isrs.add(topic, part)
        if part.eligible_leader_replicas:
            for b in part.eligible_leader_replicas:
                self.brokers_to_elrs.add(b, t, p)
        for d in part.directories:
            d = d.int
            if d >= 100:
                self.directories_to_partitions.add(d, t, p)
        preferred = _preferred(part.replicas)
        if part.leader != preferred:
            self.imbalanced.add(preferred, t, p)
        if part.removing_replicas or part.adding_replicas:
            self.reassigning.add(None, t, p)

    def _unindex(self, topic: Topic, part: Partition) -> None:
        """A partition out of the indexes (its topic removed, or a PartitionRecord replaced it)."""
        t, p = topic, part.partition_id
        self.partition_count -= 1
        self.brokers_to_isrs.update(t, p, part.isr, None, part.leader, NO_LEADER)
        self.brokers_to_elrs.update(t, p, part.eligible_leader_replicas, ())
        self.directories_to_partitions.update(t, p, _real_dirs(part.directories), ())
        preferred = _preferred(part.replicas)
        if part.leader != preferred:
            self.imbalanced.remove(preferred, t, p)
        if part.removing_replicas or part.adding_replicas:
            self.reassigning.remove(None, t, p)

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

    def acceptor(self, part: Partition, accept: Callable[[int], bool] | None = None,
                 directories: list[uuid.UUID] | None = None) -> Callable[[int], bool]:
        """Kafka's LeaderAcceptor: active (or `accept`) and its replica's directory online.
        `directories`: `current_directories(part)`, when the caller has it already."""
        accept = accept or self.cluster.usable
        dirs = dict(zip(part.replicas, current_directories(part) if directories is None
                        else directories, strict=False))

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
        from an unclean shutdown) leaves ISR and ELR and may not lead (`MoveContext`)."""
        moves = self.moves_context(remove=remove, add=add, unclean=unclean)
        out: list[tuple[Any, int]] = []
        for part in list(parts):  # a copy: alive for the whole event (MoveContext.state)
            record = moves.change(part, moves.state(part))
            if record is not None:
                out.append((record, moves.version))
        return out

    def moves_context(self, *, remove: int = NO_LEADER, add: int = NO_LEADER,
                      unclean: int = NO_LEADER) -> MoveContext:
        """One event's moves with these brokers (`generate_leader_and_isr_updates`)."""
        return MoveContext(self, remove, add, unclean)

    def in_isr(self, broker_id: int) -> list[Partition]:
        return self.brokers_to_isrs.partitions_with_broker_in_isr(broker_id)

    def in_elr(self, broker_id: int) -> list[Partition]:
        return self.brokers_to_elrs.partitions(broker_id)

    def leaderless(self) -> list[Partition]:
        return self.brokers_to_isrs.partitions_with_no_leader()

    def imbalanced_partitions(self) -> list[Partition]:
        """Led by another replica than their first (Kafka's imbalancedPartitions)."""
        return [p for key in self.imbalanced.keys() for p in self.imbalanced.partitions(key)]

    def on_directory(self, directory: uuid.UUID) -> list[Partition]:
        return self.directories_to_partitions.partitions(directory.int)

    # --- the same moves as jobs, made a part at a time (leader_moves.py) -------------------

    def fence_moves(self, broker_id: int, epoch: int, closing: list[tuple[Any, int]],
                    fencing: Any) -> LeaderMoves:
        """`handle_broker_fenced` as a job, `closing` (the fence record) after the moves."""
        return LeaderMoves(self, self.brokers_to_isrs.members.freeze(broker_id),
                           broker_id=broker_id, broker_epoch=epoch, remove=broker_id,
                           closing=closing, fencing=fencing)

    def unfence_moves(self, broker_id: int, epoch: int,
                      opening: list[tuple[Any, int]]) -> LeaderMoves:
        """`handle_broker_unfenced` as a job, `opening` (the unfence record) first."""
        return LeaderMoves(self, self.brokers_to_isrs.members.freeze(NO_LEADER),
                           broker_id=broker_id, broker_epoch=epoch, add=broker_id,
                           opening=opening)

    def controlled_shutdown_moves(self, broker_id: int, epoch: int,
                                  opening: list[tuple[Any, int]]) -> LeaderMoves:
        """`handle_broker_in_controlled_shutdown` as a job, `opening` first."""
        return LeaderMoves(self, self.brokers_to_isrs.members.freeze(broker_id),
                           broker_id=broker_id, broker_epoch=epoch, remove=broker_id,
                           opening=opening)

    # --- in one event -----------------------------------------------------------------------

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


class MoveContext:
    """The leader and ISR moves of one controller event (Kafka's generateLeaderAndIsrUpdates
    over some partitions), the brokers and rules as they are during that event.

    A partition's change depends on its lists, leader and recovery state, its topic's rules
    (effective min.insync.replicas, unclean elections) and the brokers, never on its ids or
    epochs. Partitions with the same lists share them (`shared`), so the change is built
    once per such state (`state`: the lists by identity, which the caller keeps alive for
    the event) and the others get the same record with their own ids: a fence of half a
    million partitions on six brokers builds a few dozen."""

    __slots__ = ("rc", "remove", "add", "unclean", "accept", "version", "mv", "elr",
                 "default_dir", "rules", "built")

    def __init__(self, rc: ReplicationControlManager, remove: int, add: int,
                 unclean: int) -> None:
        usable = rc.cluster.usable

        def accept(r: int) -> bool:
            return r != remove and r != unclean and (r == add or usable(r))

        self.rc, self.remove, self.add, self.unclean = rc, remove, add, unclean
        self.accept = accept
        self.version = rc.change_version()
        self.mv, self.elr = rc.features.metadata_version, rc.features.elr_enabled()
        self.default_dir = rc.cluster.default_dir
        self.rules: dict[int, tuple[int, Election]] = {}  # by id(topic id): UUIDs hash slowly
        self.built: dict[tuple[Any, ...], PartitionChangeRecord | None] = {}

    def state(self, part: Partition) -> tuple[Any, ...]:
        """What the partition's change depends on."""
        rules = self.rules.get(id(part.topic_id))
        if rules is None:
            topic = self.rc.topics[part.topic_id]
            rules = self.rules[id(part.topic_id)] = (
                self.rc.effective_min_isr(topic),
                Election.UNCLEAN if self.rc.unclean_enabled(topic) else Election.ONLINE)
        return (id(part.replicas), id(part.isr), part.leader, id(part.eligible_leader_replicas),
                id(part.last_known_elr), id(part.directories), id(part.removing_replicas),
                id(part.adding_replicas), part.leader_recovery_state, rules)

    def change(self, part: Partition, state: tuple[Any, ...]) -> PartitionChangeRecord | None:
        """The partition's change record (None: nothing changes), built unless its state's
        change is (`built`)."""
        if state in self.built:
            record = self.built[state]
            if record is None:
                return None
            return PartitionChangeRecord.of(
                part.partition_id, part.topic_id, record.isr, record.leader, record.replicas,
                record.removing_replicas, record.adding_replicas, record.leader_recovery_state,
                record.directories, record.eligible_leader_replicas, record.last_known_elr)
        dirs = current_directories(part)
        rules = state[-1]
        b = PartitionChangeBuilder(part, self.rc.acceptor(part, self.accept, dirs), self.mv,
                                   rules[0], elr_enabled=self.elr, election=rules[1],
                                   default_dir=self.default_dir, directories=dirs)
        remove, unclean = self.remove, self.unclean
        if unclean != NO_LEADER:
            b.set_unclean_shutdown_replicas([unclean])
        b.set_target_isr([r for r in part.isr if r != remove and r != unclean])
        record = self.built[state] = b.build()
        return record


def _real_dirs(directories: Iterable[uuid.UUID]) -> list[int]:
    """Directory ids a broker can register (DirectoryId.reserved: the first 100 are not), as
    the ints the index is keyed by (a UUID hashes in slow Python)."""
    return [d.int for d in directories if d.int >= 100]


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
