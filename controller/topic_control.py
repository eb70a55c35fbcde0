"""Topic commands: CreateTopics, DeleteTopics, CreatePartitions, AssignReplicasToDirs.

Each returns a ControllerResult and changes nothing; state moves only when its records are
replayed into ReplicationControlManager. The checks and their order are Kafka 4.1's
(ReplicationControlManager.createTopics / deleteTopics / createPartitions /
handleAssignReplicasToDirs, and ControllerApis around them): all records of one request go in
one atomic batch, topic by topic: TopicRecord, its ConfigRecords (with the ClearElrRecord a
min.insync.replicas brings when ELR is on), then one PartitionRecord per partition, leader the
first active replica, directories the replica's only log dir or UNASSIGNED.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kraftpy.controller import topic_placement
from kraftpy.controller.config_control import SET, ConfigurationControlManager
from kraftpy.controller.config_schema import TOPIC
from kraftpy.controller.properties import default
from kraftpy.controller.replication_control import Partition
from kraftpy.controller.result import ControllerResult
from kraftpy.controller.topic_names import (
    has_collision_chars,
    topic_name_error,
    unify_collision_chars,
)
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.assign_replicas_to_dirs_response import (
    AssignReplicasToDirsResponse,
)
from kraftpy.protocol.messages.assign_replicas_to_dirs_response import (
    DirectoryData as ResDirectory,
)
from kraftpy.protocol.messages.assign_replicas_to_dirs_response import (
    PartitionData as ResPartition,
)
from kraftpy.protocol.messages.assign_replicas_to_dirs_response import (
    TopicData as ResTopic,
)
from kraftpy.protocol.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)
from kraftpy.protocol.messages.create_topics_response import (
    CreatableTopicConfigs,
    CreatableTopicResult,
    CreateTopicsResponse,
)
from kraftpy.protocol.messages.delete_topics_response import (
    DeletableTopicResult,
    DeleteTopicsResponse,
)
from kraftpy.protocol.records.partition_change_record import PartitionChangeRecord
from kraftpy.protocol.records.remove_topic_record import RemoveTopicRecord
from kraftpy.protocol.records.topic_record import TopicRecord
from kraftpy.protocol.uuid import random_kafka_uuid

if TYPE_CHECKING:
    from kraftpy.controller.cluster_control import ClusterControlManager

MAX_PARTITIONS_PER_BATCH = 10_000
MAX_RECORDS_PER_USER_OP = 10_000
CLUSTER_METADATA_TOPIC = "__cluster_metadata"
UNASSIGNED = uuid.UUID(int=0)  # DirectoryId.UNASSIGNED
MIGRATING = uuid.UUID(int=2)  # DirectoryId.MIGRATING: a broker registered without log dirs
ZERO_UUID = uuid.UUID(int=0)
# Kafka's Errors default messages, for errors raised without one.
MESSAGES = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.UNKNOWN_TOPIC_ID: "This server does not host this topic ID.",
    ErrorCode.TOPIC_DELETION_DISABLED: "Topic deletion is disabled.",
}
TOO_LARGE = "Unable to perform excessively large batch operation."

Error = tuple[int, str | None]


class TopicError(Exception):
    """A topic the request cannot create or change (Kafka's ApiException for it)."""

    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message if message is not None else MESSAGES.get(code)


class TopicControl:
    def __init__(self, controller: Any, rng: random.Random | None = None,
                 new_topic_id: Callable[[], uuid.UUID] = random_kafka_uuid) -> None:
        self.qc = controller  # the QuorumController whose managers this works over
        self.rng = rng or random.Random()
        self.new_topic_id = new_topic_id

    @property
    def cluster(self) -> ClusterControlManager:
        return self.qc.cluster

    @property
    def configs(self) -> ConfigurationControlManager:
        return self.qc.config_control

    # --- CreateTopics ---------------------------------------------------------------------

    def create_topics(self, request: Any, api_version: int) -> ControllerResult:
        """ControllerApis.createTopics + ReplicationControlManager.createTopics."""
        names = [t.name for t in request.topics]
        duplicates = {n for n in names if names.count(n) > 1}
        topics = [t for t in request.topics
                  if t.name not in duplicates and t.name != CLUSTER_METADATA_TOPIC]
        response = CreateTopicsResponse(throttle_time_ms=0, topics=[])
        total = 0
        for t in topics:
            if t.assignments:
                total += len(t.assignments)
            elif t.num_partitions == -1:
                total += self._default_partitions()
            elif t.num_partitions > 0:
                total += t.num_partitions
        if total > MAX_PARTITIONS_PER_BATCH:
            why = "Excessively large number of partitions per request."
            response.topics = [_create_error(t.name, ErrorCode.POLICY_VIOLATION, why)
                               for t in request.topics]
            return ControllerResult.reply(response)
        errors: dict[str, Error] = {}
        existing = self.qc.replication.topics_by_name
        for t in topics:
            why = topic_name_error(t.name)
            if why is not None:
                errors[t.name] = (ErrorCode.INVALID_TOPIC_EXCEPTION, why)
            if has_collision_chars(t.name):
                colliding = self.qc.replication.colliding(unify_collision_chars(t.name))
                if colliding:
                    errors[t.name] = (ErrorCode.INVALID_TOPIC_EXCEPTION,
                                      f"Topic '{t.name}' collides with existing topic: "
                                      f"{colliding[0]}")
        for t in topics:
            if t.name in existing:
                errors[t.name] = (ErrorCode.TOPIC_ALREADY_EXISTS,
                                  f"Topic '{t.name}' already exists.")
        for t in topics:
            if t.name in errors:
                continue
            nulls = [c.name for c in t.configs if c.value is None]
            if nulls:
                errors[t.name] = (ErrorCode.INVALID_CONFIG,
                                  "Null value not supported for topic configs: "
                                  + ",".join(nulls))
        records: list[tuple[Any, int]] = []
        successes: dict[str, CreatableTopicResult] = {}
        for t in topics:
            if t.name in errors:
                continue
            creation = {c.name: c.value for c in t.configs}  # the last of a repeated key wins
            config_records: list[tuple[Any, int]] = []
            if creation:
                ops = {k: (SET, v) for k, v in creation.items()}
                code, message = self.configs.incremental_alter((TOPIC, t.name), ops, True,
                                                               config_records)
                if code != ErrorCode.NONE:
                    errors[t.name] = (code, message)
                    continue
                config_records += self.configs.clear_elr_records(config_records)
            try:
                successes[t.name] = self._create_topic(t, creation, config_records, records)
            except TopicError as exc:
                errors[t.name] = (exc.code, exc.message)
        if len(records) > MAX_RECORDS_PER_USER_OP:
            response.topics = [_create_error(t.name, ErrorCode.POLICY_VIOLATION, TOO_LARGE)
                               for t in request.topics]
            return ControllerResult.reply(response)
        for t in topics:
            error = errors.get(t.name)
            response.topics.append(successes[t.name] if error is None
                                   else _create_error(t.name, *error))
        for name in sorted(duplicates):
            response.topics.append(_create_error(name, ErrorCode.INVALID_REQUEST,
                                                 "Duplicate topic name."))
        if CLUSTER_METADATA_TOPIC in names and CLUSTER_METADATA_TOPIC not in duplicates:
            response.topics.append(_create_error(
                CLUSTER_METADATA_TOPIC, ErrorCode.INVALID_REQUEST,
                f"Creation of internal topic {CLUSTER_METADATA_TOPIC} is prohibited."))
        if request.validate_only or not records:
            return ControllerResult.reply(response)
        events = [f"Created topic {r.name} with topic id {r.topic_id} and {r.num_partitions} "
                  f"partition(s)" for r in successes.values()]
        return ControllerResult(response, records=records, events=events)

    def _create_topic(self, topic: Any, creation: dict[str, str | None],
                      config_records: list[tuple[Any, int]],
                      records: list[tuple[Any, int]]) -> CreatableTopicResult:
        parts: dict[int, tuple[list[int], list[int]]] = {}  # index -> (replicas, isr)
        if topic.assignments:
            if topic.replication_factor != -1:
                raise TopicError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was "
                                 "specified, but replication factor was not set to -1.")
            if topic.num_partitions != -1:
                raise TopicError(ErrorCode.INVALID_REQUEST, "A manual partition assignment was "
                                 "specified, but numPartitions was not set to -1.")
            factor: int | None = None
            for a in topic.assignments:
                if a.partition_index in parts:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Found multiple "
                                     "manual partition assignments for partition "
                                     f"{a.partition_index}")
                self._check_manual(list(a.broker_ids), factor)
                factor = len(a.broker_ids)
                isr = [b for b in a.broker_ids if self.cluster.usable(b)]
                if not isr:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All brokers "
                                     "specified in the manual partition assignment for partition "
                                     f"{a.partition_index} are fenced or in controlled shutdown.")
                parts[a.partition_index] = (list(a.broker_ids), isr)
            for i in range(len(parts)):
                if i not in parts:
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "partitions should "
                                     "be a consecutive 0-based integer sequence")
        elif topic.replication_factor < -1 or topic.replication_factor == 0:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be "
                             "larger than 0, or -1 to use the default value.")
        elif topic.num_partitions < -1 or topic.num_partitions == 0:
            raise TopicError(ErrorCode.INVALID_PARTITIONS, "Number of partitions was set to an "
                             "invalid non-positive value.")
        else:
            count = self._default_partitions() if topic.num_partitions == -1 \
                else topic.num_partitions
            factor = self._default_replication_factor() if topic.replication_factor == -1 \
                else topic.replication_factor
            for index, replicas in enumerate(self._place(count, factor)):
                isr = [b for b in replicas if self.cluster.usable(b)]
                if not isr:
                    raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, "Unable to replicate "
                                     f"the partition {factor} time(s): All brokers are currently "
                                     "fenced or in controlled shutdown.")
                parts[index] = (replicas, isr)
        topic_id = self.new_topic_id()
        result = CreatableTopicResult(name=topic.name, topic_id=topic_id,
                                      error_code=ErrorCode.NONE, error_message=None,
                                      topic_config_error_code=ErrorCode.NONE,
                                      num_partitions=len(parts),
                                      replication_factor=len(next(iter(parts.values()))[0]))
        result.configs = [
            CreatableTopicConfigs(name=e.name, value=e.value, read_only=False,
                                  config_source=e.source, is_sensitive=e.sensitive)
            for e in self.configs.effective_topic_configs(
                {k: v for k, v in creation.items() if v is not None})]
        records.append((TopicRecord(name=topic.name, topic_id=topic_id), 0))
        records.extend(config_records)
        version = self.qc.features.partition_record_version()
        for index in sorted(parts):
            replicas, isr = parts[index]
            records.append(self._partition(topic_id, index, replicas, isr).record(version))
        return result

    def _partition(self, topic_id: uuid.UUID, index: int, replicas: list[int],
                   isr: list[int]) -> Partition:
        return Partition(topic_id, index, list(replicas), list(isr), isr[0], 0, 0,
                         directories=[self.default_dir(b) for b in replicas])

    def default_dir(self, broker_id: int) -> uuid.UUID:
        """ClusterControlManager.defaultDir: the broker's only log dir, else UNASSIGNED (the
        broker then says where with AssignReplicasToDirs), MIGRATING without any."""
        reg = self.cluster.brokers.get(broker_id)
        if reg is None:
            return UNASSIGNED
        if not reg.log_dirs:
            return MIGRATING
        return reg.log_dirs[0] if len(reg.log_dirs) == 1 else UNASSIGNED

    def _check_manual(self, brokers: list[int], factor: int | None) -> None:
        if not brokers:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition "
                             "assignment includes an empty replica list.")
        previous = None
        for b in sorted(brokers):
            if b not in self.cluster.brokers:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition "
                                 f"assignment includes broker {b}, but no such broker is "
                                 "registered.")
            if b == previous:
                raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition "
                                 f"assignment includes the broker {b} more than once.")
            previous = b
        if factor is not None and len(brokers) != factor:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition "
                             f"assignment includes a partition with {len(brokers)} replica(s), "
                             "but this is not consistent with previous partitions, which have "
                             f"{factor} replica(s).")

    def _place(self, count: int, factor: int) -> list[list[int]]:
        usable = [topic_placement.UsableBroker(b.broker_id, b.rack, b.fenced)
                  for b in self.cluster.brokers.values() if not b.in_controlled_shutdown]
        try:
            return topic_placement.place(usable, count, factor, self.rng)
        except topic_placement.InvalidReplicationFactor as exc:
            raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR,
                             f"Unable to replicate the partition {factor} time(s): {exc}"
                             ) from None

    def _default_partitions(self) -> int:
        return int(self.qc.settings.static_configs.get("num.partitions",
                                                       default("num.partitions")))

    def _default_replication_factor(self) -> int:
        return int(self.qc.settings.static_configs.get("default.replication.factor",
                                                       default("default.replication.factor")))

    # --- DeleteTopics ---------------------------------------------------------------------

    def delete_topics(self, request: Any, api_version: int) -> ControllerResult:
        """ControllerApis.deleteTopics + ReplicationControlManager.deleteTopics."""
        response = DeleteTopicsResponse(throttle_time_ms=0, responses=[])
        out = response.responses

        def answer(name: str | None, topic_id: uuid.UUID, code: int,
                   message: str | None = None) -> None:
            out.append(DeletableTopicResult(name=name, topic_id=topic_id, error_code=code,
                                            error_message=message))

        if self.qc.settings.static_configs.get("delete.topic.enable",
                                               default("delete.topic.enable")).strip().lower() \
                != "true":
            code = ErrorCode.INVALID_REQUEST if api_version < 3 \
                else ErrorCode.TOPIC_DELETION_DISABLED
            message = "This version does not support topic deletion." if api_version < 3 \
                else MESSAGES[ErrorCode.TOPIC_DELETION_DISABLED]
            for name in _requested_names(request, api_version):
                answer(name, ZERO_UUID, code, message)
            return ControllerResult.reply(response)
        names: list[str] = []
        duplicate_names: list[str] = []
        ids: list[uuid.UUID] = []
        duplicate_ids: list[uuid.UUID] = []

        def add_name(name: str) -> None:
            if name in duplicate_names:
                return
            if name in names:
                names.remove(name)
                duplicate_names.append(name)
            else:
                names.append(name)

        if api_version < 6:
            for name in request.topic_names:
                add_name(name)
        for topic in request.topics if api_version >= 6 else []:
            if topic.name is None:
                if topic.topic_id == ZERO_UUID:
                    answer(None, ZERO_UUID, ErrorCode.INVALID_REQUEST,
                           "Neither topic name nor id were specified.")
                elif topic.topic_id in duplicate_ids:
                    pass
                elif topic.topic_id in ids:
                    ids.remove(topic.topic_id)
                    duplicate_ids.append(topic.topic_id)
                else:
                    ids.append(topic.topic_id)
            elif topic.topic_id == ZERO_UUID:
                add_name(topic.name)
            else:
                answer(topic.name, topic.topic_id, ErrorCode.INVALID_REQUEST,
                       "You may not specify both topic name and topic id.")
        for name in duplicate_names:
            answer(name, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
        for topic_id in duplicate_ids:
            answer(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id.")
        topics = self.qc.replication.topics
        to_delete: dict[uuid.UUID, str] = {}
        for topic_id in ids:
            if topic_id in topics:
                to_delete[topic_id] = topics[topic_id].name
            else:
                answer(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID,
                       MESSAGES[ErrorCode.UNKNOWN_TOPIC_ID])
        by_name = self.qc.replication.topics_by_name
        for name in names:
            topic_id = by_name.get(name)
            if topic_id is None:
                answer(name, ZERO_UUID, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                       MESSAGES[ErrorCode.UNKNOWN_TOPIC_OR_PARTITION])
            elif topic_id in duplicate_ids or topic_id in to_delete:
                duplicate_ids.append(topic_id)
                to_delete.pop(topic_id, None)
                answer(name, topic_id, ErrorCode.INVALID_REQUEST,
                       "The provided topic name maps to an ID that was already supplied.")
            else:
                to_delete[topic_id] = name
        records: list[tuple[Any, int]] = []
        for topic_id, name in to_delete.items():
            records.append((RemoveTopicRecord(topic_id=topic_id), 0))
            answer(name, topic_id, ErrorCode.NONE)
        # Kafka shuffles the answers so that their order tells nothing about unseen topics.
        self.rng.shuffle(out)
        if not records:
            return ControllerResult.reply(response)
        return ControllerResult(response, records=records,
                                events=[f"Deleted topic {n} ({i})" for i, n in to_delete.items()])

    # --- CreatePartitions -----------------------------------------------------------------

    def create_partitions(self, request: Any, api_version: int) -> ControllerResult:
        """ControllerApis.createPartitions + ReplicationControlManager.createPartitions."""
        names = [t.name for t in request.topics]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        results = [CreatePartitionsTopicResult(name=n, error_code=ErrorCode.INVALID_REQUEST,
                                               error_message="Duplicate topic name.")
                   for n in duplicates]
        records: list[tuple[Any, int]] = []
        for topic in request.topics:
            if topic.name in duplicates:
                continue
            mine: list[tuple[Any, int]] = []
            try:
                self._create_partitions(topic, mine)
                code, message = ErrorCode.NONE, None
                records += mine
            except TopicError as exc:
                code, message = exc.code, exc.message
            results.append(CreatePartitionsTopicResult(name=topic.name, error_code=code,
                                                       error_message=message))
        response = CreatePartitionsResponse(throttle_time_ms=0, results=results)
        if len(records) > MAX_RECORDS_PER_USER_OP:
            for r in results:
                r.error_code, r.error_message = ErrorCode.POLICY_VIOLATION, TOO_LARGE
            return ControllerResult.reply(response)
        if request.validate_only or not records:
            return ControllerResult.reply(response)
        return ControllerResult(response, records=records)

    def _create_partitions(self, topic: Any, records: list[tuple[Any, int]]) -> None:
        replication = self.qc.replication
        topic_id = replication.topics_by_name.get(topic.name)
        if topic_id is None:
            raise TopicError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        info = replication.topics[topic_id]
        current = len(info.partitions)
        if topic.count == current:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"Topic already has {current} partition(s).")
        if topic.count < current:
            raise TopicError(ErrorCode.INVALID_PARTITIONS,
                             f"The topic {topic.name} currently has {current} partition(s); "
                             f"{topic.count} would not be an increase.")
        additional = topic.count - current
        if topic.assignments is not None and len(topic.assignments) != additional:
            raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                             f"Attempted to add {additional} additional partition(s), but only "
                             f"{len(topic.assignments)} assignment(s) were specified.")
        if not info.partitions:
            raise TopicError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"Invalid state: topic {topic.name} appears to have no partitions.")
        factor = len(next(iter(info.partitions.values())).replicas)
        if topic.assignments is not None:
            placed = []
            for i, a in enumerate(topic.assignments):
                self._check_manual(list(a.broker_ids), factor)
                if not any(self.cluster.usable(b) for b in a.broker_ids):
                    raise TopicError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "All brokers "
                                     "specified in the manual partition assignment for partition "
                                     f"{current + i} are fenced or in controlled shutdown.")
                placed.append(list(a.broker_ids))
        else:
            placed = self._place(additional, factor)
        version = self.qc.features.partition_record_version()
        for i, replicas in enumerate(placed):
            isr = [b for b in replicas if self.cluster.usable(b)]
            if not isr:
                raise TopicError(ErrorCode.INVALID_REPLICATION_FACTOR, "Unable to replicate the "
                                 f"partition {factor} time(s): All brokers are currently fenced "
                                 "or in controlled shutdown.")
            records.append(self._partition(topic_id, current + i, replicas, isr).record(version))

    # --- AssignReplicasToDirs -------------------------------------------------------------

    def assign_replicas_to_dirs(self, request: Any, api_version: int) -> ControllerResult:
        """A broker with several log dirs says which holds each of its replicas: one
        PartitionChangeRecord (directories) per replica whose directory changes; then, for
        replicas put on a directory that is not one of the broker's online ones (LOST, or
        unknown), the broker leaves the ISR and leadership goes to another replica."""
        stale = self.cluster.check_broker_epoch(request.broker_id, request.broker_epoch)
        if stale is not None:
            code = ErrorCode.BROKER_ID_NOT_REGISTERED \
                if request.broker_id not in self.cluster.brokers else ErrorCode.STALE_BROKER_EPOCH
            return ControllerResult.reply(AssignReplicasToDirsResponse(
                throttle_time_ms=0, error_code=code, directories=[]))
        broker = request.broker_id
        topics = self.qc.replication.topics
        version = max(1, self.cluster._partition_change_version())
        records: list[tuple[Any, int]] = []
        response = AssignReplicasToDirsResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                                directories=[])
        # replicas placed on a directory the broker does not have online lose their ISR
        # place and leadership there, as in a fence of the broker for them alone
        on_offline_dir: dict[tuple[int, Any], Any] = {}
        for directory in request.directories:
            res_dir = ResDirectory(id=directory.id, topics=[])
            for t in directory.topics:
                info = topics.get(t.topic_id)
                res_topic = ResTopic(topic_id=t.topic_id, partitions=[])
                for p in t.partitions:
                    part = info.partitions.get(p.partition_index) if info else None
                    if info is None:
                        code = ErrorCode.UNKNOWN_TOPIC_ID
                    elif part is None:
                        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                    elif broker not in part.replicas:
                        code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                    else:
                        code = ErrorCode.NONE
                        dirs = list(part.directories) or [self.default_dir(b)
                                                          for b in part.replicas]
                        new = list(dirs)
                        new[part.replicas.index(broker)] = directory.id
                        if new != dirs:
                            records.append((PartitionChangeRecord(
                                partition_id=part.partition_id, topic_id=part.topic_id,
                                directories=new), version))
                        if not self.cluster.has_online_dir(broker, directory.id):
                            on_offline_dir[part.partition_id, part.topic_id] = part
                    res_topic.partitions.append(ResPartition(partition_index=p.partition_index,
                                                             error_code=code))
                res_dir.topics.append(res_topic)
            response.directories.append(res_dir)
        records += self.qc.replication.generate_leader_and_isr_updates(
            on_offline_dir.values(), remove=broker)
        return ControllerResult(response, records=records) if records \
            else ControllerResult.reply(response)


def _create_error(name: str, code: int, message: str | None) -> CreatableTopicResult:
    return CreatableTopicResult(name=name, error_code=code, error_message=message)


def _requested_names(request: Any, api_version: int) -> list[str | None]:
    if api_version < 6:
        return list(request.topic_names)
    return [t.name for t in request.topics]
