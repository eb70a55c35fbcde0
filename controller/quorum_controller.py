"""QuorumController: the sans-IO control logic, request + state -> records + response.

Theory of operation. One caller (the quorum task) feeds events one at a time: `handle` for a
request, `tick` for timers. Neither changes state: each returns a ControllerResult, whose
records the caller appends and then hands back through `apply` (= `replay` of each record).
`replay` is the only way state changes, so live operation, recovery from the log and loading a
snapshot cannot disagree. Time and offsets come in as arguments; nothing here touches a file,
a socket or a clock. The managers each own one part of the state:

  FeatureControlManager      finalized feature levels (metadata.version decides record versions)
  ClusterControlManager      broker registrations and epochs; heartbeats and fencing
  ReplicationControlManager  topics and partitions (from Kafka-written logs) and leader moves
  ProducerIdControlManager   the cluster-wide producer-id counter (KIP-730)
  ProducerIdManager          this node's own blocks for InitProducerId (volatile use)
  TransactionControlManager  transactional ids in __transaction_state (KIP-98/360)
  AclControlManager          ACLs (controller/acl_control.py)
  ConfigurationControlManager dynamic topic, broker and cluster configs (config_control.py)
  TopicControl               CreateTopics, DeleteTopics, CreatePartitions (topic_control.py)
  PartitionCommands          AlterPartition, ElectLeaders, reassignments, the periodic
                             preferred and unclean elections (partition_commands.py)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kraftpy.controller import config_commands, image
from kraftpy.controller.acl_control import AclControlManager
from kraftpy.controller.cluster_control import ClusterControlManager, ReplayError
from kraftpy.controller.config_control import ConfigurationControlManager
from kraftpy.controller.config_schema import BROKER as BROKER_RESOURCE
from kraftpy.controller.config_schema import TOPIC as TOPIC_RESOURCE
from kraftpy.controller.feature_control import (
    FeatureControlManager,
    bootstrap_records,
)
from kraftpy.controller.feature_updates import FeatureUpdater
from kraftpy.controller.leader_moves import BUILD_COST
from kraftpy.controller.partition_commands import PartitionCommands
from kraftpy.controller.partition_values import TopicPartitions, topic_runs
from kraftpy.controller.producer_id_control import (
    ProducerIdControlManager,
    ProducerIdsExhausted,
)
from kraftpy.controller.producer_id_manager import NOT_READY, ProducerIdManager
from kraftpy.controller.replication_control import ElectionSchedule, ReplicationControlManager
from kraftpy.controller.result import ControllerResult
from kraftpy.controller.retained_records import RECORD_TYPES as RETAINED_RECORD_TYPES
from kraftpy.controller.retained_records import RetainedRecords
from kraftpy.controller.settings import ControllerSettings
from kraftpy.controller.topic_control import TopicControl
from kraftpy.controller.transaction_control import TransactionControlManager
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.broker_registration_response import BrokerRegistrationResponse
from kraftpy.protocol.messages.init_producer_id_response import InitProducerIdResponse
from kraftpy.protocol.metadata_frame import encode_metadata_record
from kraftpy.protocol.records.no_op_record import NoOpRecord

__all__ = ["QuorumController", "ReplayError", "UnsupportedRequest"]

# Metadata record types (Kafka's MetadataRecordType ids).
REGISTER_BROKER = 0
UNREGISTER_BROKER = 1
TOPIC = 2
PARTITION = 3
CONFIG = 4
PARTITION_CHANGE = 5
FENCE_BROKER = 7
UNFENCE_BROKER = 8
REMOVE_TOPIC = 9
FEATURE_LEVEL = 12
PRODUCER_IDS = 15
BROKER_REGISTRATION_CHANGE = 17
ACCESS_CONTROL_ENTRY = 18
REMOVE_ACCESS_CONTROL_ENTRY = 19
BEGIN_TRANSACTION, END_TRANSACTION, ABORT_TRANSACTION = 23, 24, 25
REGISTER_CONTROLLER = 27
CLEAR_ELR = 28

# API keys answered here.
INIT_PRODUCER_ID = 22
CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS = 19, 20, 37
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 33, 44
LIST_PARTITION_REASSIGNMENTS, ASSIGN_REPLICAS_TO_DIRS = 46, 73
ELECT_LEADERS, ALTER_PARTITION_REASSIGNMENTS, ALTER_PARTITION = 43, 45, 56
CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS = 30, 31, 29
UPDATE_FEATURES = 57
DESCRIBE_CLUSTER = 60
DESCRIBE_PRODUCERS = 61
BROKER_REGISTRATION = 62
BROKER_HEARTBEAT = 63
UNREGISTER_BROKER_API = 64
DESCRIBE_TRANSACTIONS = 65
LIST_TRANSACTIONS = 66
ALLOCATE_PRODUCER_IDS = 67
CONTROLLER_REGISTRATION = 70


_NONE = ErrorCode.NONE
_LOAD_IN_PROGRESS = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
_answer = ControllerResult.answer


class UnsupportedRequest(ValueError):
    """An API key the controller does not answer (the handlers should never send one)."""


class QuorumController:
    SERVED_API_KEYS = frozenset({
        INIT_PRODUCER_ID, DESCRIBE_CLUSTER, DESCRIBE_PRODUCERS,
        BROKER_REGISTRATION, BROKER_HEARTBEAT, UNREGISTER_BROKER_API, DESCRIBE_TRANSACTIONS,
        LIST_TRANSACTIONS, ALLOCATE_PRODUCER_IDS, CREATE_ACLS, DELETE_ACLS, DESCRIBE_ACLS,
        UPDATE_FEATURES,
        CREATE_TOPICS, DELETE_TOPICS, CREATE_PARTITIONS, DESCRIBE_CONFIGS, ALTER_CONFIGS,
        INCREMENTAL_ALTER_CONFIGS, LIST_PARTITION_REASSIGNMENTS, ASSIGN_REPLICAS_TO_DIRS,
        ALTER_PARTITION, ELECT_LEADERS, ALTER_PARTITION_REASSIGNMENTS, CONTROLLER_REGISTRATION,
    })

    def __init__(self, settings: ControllerSettings) -> None:
        self.settings = settings
        self.features = FeatureControlManager(node_id=settings.node_id,
                                              min_insync_replicas=settings.min_insync_replicas)
        self.replication = ReplicationControlManager()
        self.cluster = ClusterControlManager(settings, self.features, self.replication)
        self.producer_ids = ProducerIdControlManager(settings, self.cluster)
        self.own_ids = ProducerIdManager(settings.node_id, settings.producer_id_block_size,
                                         settings.producer_id_prefetch_ratio,
                                         enabled=settings.serves_clients)
        self.transactions = TransactionControlManager(
            settings.transaction_max_timeout_ms, features=self.features,
            replication=self.replication, node_id=settings.node_id,
            log_directory_id=settings.log_directory_id, topic_settings=settings.txn_topic)
        self.acls = AclControlManager()
        self.config_control = ConfigurationControlManager(
            settings.node_id, settings.static_configs, self.features.elr_enabled,
            self._missing_config_resource)
        self.topic_control = TopicControl(self)
        self.replication.bind(self.cluster, self.features, self.config_control)
        self.partition_commands = PartitionCommands(self.replication)
        self.elections = ElectionSchedule.of(settings.static_configs)
        self.retained = RetainedRecords()  # quotas, SCRAM, tokens: kept, not acted on
        self.leader_epoch = 0
        self.active = False
        self.high_watermark = 0
        self.txn_high_watermark = 0
        self.log_end_offset = 0  # one past the last record replayed
        self.last_now_ms = 0
        self._next_noop_ms = 0  # when the next NoOpRecord is due (see `tick`)
        self._commands = self._command_table()

    # --- lifecycle ------------------------------------------------------------------------

    def activate(self, *, leader_epoch: int, now_ms: int) -> None:
        """Become the active controller: every unfenced broker gets a fresh session."""
        self.leader_epoch = leader_epoch
        self.active = True
        self._clock(now_ms)
        heartbeats = self.cluster.heartbeats
        for broker_id in self.cluster.unfenced():
            heartbeats.register(broker_id, now_ms)
            heartbeats.track(broker_id, self.cluster.brokers[broker_id].epoch, now_ms)
        self.elections.start(now_ms)

    def _clock(self, now_ms: int) -> None:
        self.last_now_ms = max(self.last_now_ms, now_ms)
        self.cluster.now_ms = self.last_now_ms
        if not self.active:
            self.activate(leader_epoch=self.leader_epoch, now_ms=now_ms)

    # --- commands -------------------------------------------------------------------------

    def handle(self, request: Any, api_version: int, *, now_ms: int, next_offset: int,
               listener: str | None = None) -> ControllerResult:
        if now_ms > self.last_now_ms or not self.active:  # else _clock would change nothing
            self._clock(now_ms)
        try:
            command = self._commands[request.API_KEY]
        except (AttributeError, KeyError, TypeError):
            raise UnsupportedRequest(
                f"the controller does not answer {type(request).__name__}") from None
        return command(request, api_version, now_ms, next_offset, listener)

    def _command_table(self) -> dict[int, Callable[..., ControllerResult]]:
        """API key -> the command answering it, all called (request, version, now_ms,
        next_offset, listener)."""
        table: dict[int, Callable[..., ControllerResult]] = {
            INIT_PRODUCER_ID: self._init_producer_id,
            ALLOCATE_PRODUCER_IDS: self.producer_ids.allocate,
            BROKER_REGISTRATION: self._register_broker,
            BROKER_HEARTBEAT: lambda r, v, now, off, lis: self.cluster.heartbeat(r, now),
            UNREGISTER_BROKER_API: lambda r, v, now, off, lis: self.cluster.unregister_broker(r),
            CONTROLLER_REGISTRATION: lambda r, v, now, off, lis:
                self.cluster.register_controller(r),
            DESCRIBE_CLUSTER: lambda r, v, now, off, lis: ControllerResult.reply(
                image.describe_cluster(self, r, v, lis)),
            DESCRIBE_PRODUCERS: lambda r, v, now, off, lis: ControllerResult.reply(
                image.describe_producers(self, r)),
            DESCRIBE_TRANSACTIONS: lambda r, v, now, off, lis:
                self.transactions.describe_transactions(r),
            LIST_TRANSACTIONS: lambda r, v, now, off, lis:
                self.transactions.list_transactions(r, v, now),
            CREATE_ACLS: lambda r, v, now, off, lis: self.acls.create_acls(r, v),
            DELETE_ACLS: lambda r, v, now, off, lis: self.acls.delete_acls(r, v),
            DESCRIBE_ACLS: lambda r, v, now, off, lis: self.acls.describe_acls(r, v),
            UPDATE_FEATURES: lambda r, v, now, off, lis: self._feature_updater().handle(r, v),
            CREATE_TOPICS: lambda r, v, now, off, lis: self.topic_control.create_topics(r, v),
            DELETE_TOPICS: lambda r, v, now, off, lis: self.topic_control.delete_topics(r, v),
            CREATE_PARTITIONS: lambda r, v, now, off, lis:
                self.topic_control.create_partitions(r, v),
            LIST_PARTITION_REASSIGNMENTS: lambda r, v, now, off, lis:
                self.partition_commands.list_partition_reassignments(r, v),
            ALTER_PARTITION_REASSIGNMENTS: lambda r, v, now, off, lis:
                self.partition_commands.alter_partition_reassignments(r, v),
            ALTER_PARTITION: lambda r, v, now, off, lis:
                self.partition_commands.alter_partition(r, v),
            ELECT_LEADERS: lambda r, v, now, off, lis:
                self.partition_commands.elect_leaders(r, v),
            ASSIGN_REPLICAS_TO_DIRS: lambda r, v, now, off, lis:
                self.topic_control.assign_replicas_to_dirs(r, v),
            DESCRIBE_CONFIGS: lambda r, v, now, off, lis: config_commands.describe_configs(
                self, r, v, lis),
            ALTER_CONFIGS: lambda r, v, now, off, lis: config_commands.alter_configs(
                self, r, v, lis),
            INCREMENTAL_ALTER_CONFIGS: lambda r, v, now, off, lis:
                config_commands.incremental_alter_configs(self, r, v, lis),
        }
        assert table.keys() == self.SERVED_API_KEYS
        return table

    def _register_broker(self, request: Any, api_version: int, now_ms: int, next_offset: int,
                         listener: str | None) -> ControllerResult:
        if not self.features.metadata_version:  # not bootstrapped yet: retry shortly
            return ControllerResult.reply(BrokerRegistrationResponse(
                error_code=ErrorCode.NOT_CONTROLLER, broker_epoch=-1))
        return self.cluster.register_broker(request, now_ms, next_offset, api_version)

    def _feature_updater(self) -> FeatureUpdater:
        return FeatureUpdater(
            self.features,
            brokers={b.broker_id: {n: (lo, hi) for n, lo, hi in b.features}
                     for b in self.cluster.brokers.values()},
            controllers={c.controller_id: {f.name: (f.min_supported_version,
                                                    f.max_supported_version)
                                           for f in c.features}
                         for c in self.cluster.controllers.values()},
            configs=self.configs, min_insync_replicas=self.settings.min_insync_replicas)

    def tick(self, *, now_ms: int, next_offset: int) -> ControllerResult:
        """Timers: the bootstrap of an empty log, session fencing, this node's id prefetch."""
        self._clock(now_ms)
        if not self.features.metadata_version:
            return ControllerResult(None, records=bootstrap_records(
                self.settings.metadata_version, self.settings.bootstrap_features,
                min_insync_replicas=self.settings.min_insync_replicas),
                events=[f"Bootstrapping metadata.version {self.settings.metadata_version}"])
        if self.cluster.moves:  # a broker event's leader moves, the next part of them
            result = self.cluster.continue_moves()
        else:
            result = self.cluster.fence_one_stale_broker(now_ms)
            if not self.cluster.moves:
                result = result.merge(self._maybe_elect(now_ms))
        result = result.merge(self._maybe_claim_block(next_offset + len(result.records)))
        return result.merge(self._maybe_noop(now_ms))

    def has_pending_work(self) -> bool:
        """Whether a timer's work is under way in parts (leader moves of a broker event, a
        periodic election's walk): the next `tick` should come as soon as what waits has
        been answered, not at the timer's next round."""
        return bool(self.cluster.moves) or self.partition_commands.walking()

    def _maybe_elect(self, now_ms: int) -> ControllerResult:
        """Kafka's periodic electPreferred (when auto.leader.rebalance.enable) and
        electUnclean tasks: due one interval after activation, again at once while a run
        hit its limit, else one interval later. A run walks its index a part per tick (as
        much work as a part of leader moves: a change built for each), the preferred one
        first."""
        schedule, commands = self.elections, self.partition_commands
        limit = self.cluster.moves.limit // BUILD_COST  # each a change built
        result = ControllerResult(None)
        if commands.balancing() or (not commands.uncleaning()
                                    and schedule.balance_due(now_ms)):
            records, more = commands.balance_step(schedule.max_elections, limit)
            if more is not None:
                schedule.balanced(now_ms, more)
            result.records += records
            if records:
                result.events.append(f"Preferred leader election for {len(records)} "
                                     "imbalanced partition(s)")
            return result
        if commands.uncleaning() or schedule.unclean_due(now_ms):
            records, more, events = commands.unclean_step(schedule.max_elections, limit)
            if more is not None:
                schedule.uncleaned(now_ms, more)
            result.records += records
            result.events += events
        return result

    def _maybe_noop(self, now_ms: int) -> ControllerResult:
        """A NoOpRecord every `max_idle_interval_ms`, as Kafka's periodic writeNoOpRecord task:
        brokers fetching the log see it move at least that often."""
        interval = self.settings.max_idle_interval_ms
        if interval <= 0 or now_ms < self._next_noop_ms:
            return ControllerResult(None)
        first = self._next_noop_ms == 0
        self._next_noop_ms = now_ms + interval
        if first:  # the first is due one interval after activation
            return ControllerResult(None)
        return ControllerResult(None, records=[(NoOpRecord(), 0)])

    @staticmethod
    def idempotent(request: Any, api_version: int) -> bool:
        """An InitProducerId that asks for a fresh idempotent id (no transactional id; from v3
        producer id and epoch both -1 or both set): the requests `take_idempotent_ids` answers."""
        return request.transactional_id is None and (
            api_version < 3 or (request.producer_id == -1) == (request.producer_epoch == -1))

    def take_idempotent_ids(self, count: int, now_ms: int) -> tuple[int, int] | None:
        """Fresh ids for `count` idempotent InitProducerIds handled one after another: what
        `handle` gives each of them first (`ProducerIdManager.take`: (first, how many), or
        (NOT_READY, count)), or None when the controller must decide more (a claim due, a
        block switch): then `handle` them. The ids are this node's own volatile use of its
        committed blocks, as a Kafka broker's ProducerIdManager hands out its blocks: no
        record, no metadata state."""
        if now_ms > self.last_now_ms or not self.active:
            self._clock(now_ms)
        return self.own_ids.take(count)

    def _init_producer_id(self, request: Any, api_version: int, now_ms: int,
                          next_offset: int, listener: str | None = None) -> ControllerResult:
        if self.idempotent(request, api_version):
            # Idempotent, the usual case: a fresh id at epoch 0, no record. While the id leaves
            # no prefetch claim due (nearly always), nothing else is looked at.
            run = self.own_ids.take(1)
            if run is not None:
                if run[0] == NOT_READY:  # retriable: the next block's record awaits its fsync
                    return _answer(InitProducerIdResponse(error_code=_LOAD_IN_PROGRESS,
                                                          producer_id=-1, producer_epoch=-1))
                return _answer(InitProducerIdResponse(error_code=_NONE, producer_id=run[0],
                                                      producer_epoch=0))
        if api_version >= 3 and (request.producer_id == -1) != (request.producer_epoch == -1):
            return ControllerResult.reply(InitProducerIdResponse(
                error_code=ErrorCode.INVALID_REQUEST, producer_id=-1, producer_epoch=-1))
        if request.transactional_id is None:  # idempotent: a fresh id, epoch 0, no record
            pid = self._new_id()
            if isinstance(pid, ErrorCode):
                result = ControllerResult.reply(InitProducerIdResponse(
                    error_code=pid, producer_id=-1, producer_epoch=-1))
            else:
                result = ControllerResult.reply(InitProducerIdResponse(
                    error_code=ErrorCode.NONE, producer_id=pid, producer_epoch=0))
        else:
            result = self.transactions.init_producer_id(request, api_version, now_ms,
                                                        self._new_id)
        if not self.own_ids.wants_block():
            return result
        # The prefetch claim rides along; the answer itself never waits for it.
        claim = self._maybe_claim_block(next_offset + len(result.records))
        if claim.records and not result.records and not result.txn_records:
            result.respond_before_commit = True
        return result.merge(claim)

    def _new_id(self) -> int | ErrorCode:
        pid = self.own_ids.next_id()
        if pid is not None:
            return pid
        if self.own_ids.exhausted:
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS

    def _maybe_claim_block(self, offset: int) -> ControllerResult:
        """As many blocks as this node's reserve asks for, one ProducerIdsRecord each."""
        if not self.own_ids.wants_block() or not self.features.metadata_version:
            return ControllerResult(None)
        result = ControllerResult(None, records=[], events=[])
        size = self.producer_ids.block_size
        first = self.producer_ids.next_producer_id  # then past each block claimed here
        while self.own_ids.wants_block():
            try:
                first, record = self.producer_ids.generate(self.settings.node_id, -1, first)
            except ProducerIdsExhausted as exc:
                self.own_ids.exhausted = True
                result.events.append(f"No producer id block for this node: {exc}")
                break
            self.own_ids.claimed(offset + len(result.records))
            result.records.append((record, 0))
            result.events.append(f"Producer ids [{first}, {first + size - 1}] claimed for "
                                 f"this node's InitProducerId answers")
            first += size
        return result

    # --- state ----------------------------------------------------------------------------

    def replay(self, record: Any, version: int, offset: int) -> None:
        """Apply one metadata record; unknown and unused record types are skipped."""
        kind = getattr(record, "API_KEY", None)
        if kind == PRODUCER_IDS:
            self.producer_ids.replay(record)
            if record.broker_id == self.own_ids.node_id:  # a block this node claimed
                self.own_ids.on_replay(record, offset)
        elif kind == REGISTER_BROKER:
            self.cluster.replay_register(record, offset)
        elif kind == BROKER_REGISTRATION_CHANGE:
            self.cluster.replay_change(record)
        elif kind == UNREGISTER_BROKER:
            self.cluster.replay_unregister(record)
        elif kind in (FENCE_BROKER, UNFENCE_BROKER):
            self.cluster.replay_fence(record, kind == FENCE_BROKER)
        elif kind == FEATURE_LEVEL:
            self.features.replay(record, offset)
        elif kind in (BEGIN_TRANSACTION, END_TRANSACTION, ABORT_TRANSACTION):
            self.features.replay_transaction_marker(kind == BEGIN_TRANSACTION, offset)
        elif kind == TOPIC:
            self.replication.replay_topic(record)
            self.transactions.replay_topic(record)
        elif kind == PARTITION:
            self.replication.replay_partition(record)
        elif kind == PARTITION_CHANGE:
            self.replication.replay_partition_change(record)
        elif kind == REMOVE_TOPIC:
            topic = self.replication.replay_remove_topic(record)
            if topic is not None:
                self.config_control.delete_topic_configs(topic.name)
            self.transactions.replay_remove_topic(record.topic_id)
        elif kind == CONFIG:
            self.config_control.replay(record)
        elif kind == CLEAR_ELR:
            self.replication.replay_clear_elr(record)
        elif kind == REGISTER_CONTROLLER:
            self.cluster.controllers[record.controller_id] = record
        elif kind in (ACCESS_CONTROL_ENTRY, REMOVE_ACCESS_CONTROL_ENTRY):
            self.acls.replay(record, version, offset)
        elif kind in RETAINED_RECORD_TYPES:
            self.retained.replay(record)
        if offset >= self.log_end_offset:
            self.log_end_offset = offset + 1

    @property
    def configs(self) -> Any:
        """The ConfigRecords in force, keyed (resource type, resource name, key)."""
        return self.config_control.records

    def _missing_config_resource(self, resource: tuple[int, str]) -> tuple[int, str] | None:
        """Kafka's ConfigResourceExistenceChecker: why a config resource is not there."""
        kind, name = resource
        if kind == TOPIC_RESOURCE and name not in self.replication.topics_by_name:
            return (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        if kind == BROKER_RESOURCE and name:
            node = int(name)
            if node not in self.cluster.brokers and node != self.settings.node_id:
                return (ErrorCode.BROKER_ID_NOT_REGISTERED, f"No node with id {node} found.")
        return None

    def replay_txn(self, key: Any, value: Any, offset: int, partition: int | None = None
                   ) -> None:
        """One __transaction_state record, read from `partition` (None: its id's own)."""
        self.transactions.replay(key, value, offset, partition)

    def apply(self, result: ControllerResult, *, offset: int, txn_offset: int) -> None:
        """Replay a result's records at the offsets they were appended at."""
        records = result.records
        if len(records) == 1 and not result.txn_records:  # most results: no loop to set up
            record, version = records[0]
            self.replay(record, version, offset)
            if record.API_KEY == BROKER_REGISTRATION_CHANGE:
                self._note_shutdown(record, offset)
            return
        for i, (record, version) in enumerate(records):
            self.replay(record, version, offset + i)
        for i, txn in enumerate(result.txn_records):
            self.replay_txn(txn.key, txn.value, txn_offset + i, txn.partition.index)
        for record, _ in records:
            self._note_shutdown(record, offset + len(records) - 1)

    def _note_shutdown(self, record: Any, last_offset: int) -> None:
        """A registration change into controlled shutdown is seen once the whole batch asking
        for it is: from `last_offset`, its result's last record."""
        if record.API_KEY == BROKER_REGISTRATION_CHANGE and record.in_controlled_shutdown == 1:
            beat = self.cluster.heartbeats.state(record.broker_id, self.last_now_ms)
            beat.controlled_shutdown_offset = last_offset

    def on_committed(self, metadata_hwm: int, txn_hwm: int) -> None:
        self.high_watermark = max(self.high_watermark, metadata_hwm)
        self.txn_high_watermark = max(self.txn_high_watermark, txn_hwm)
        self.own_ids.on_committed(metadata_hwm)
        self.transactions.on_committed(txn_hwm)

    def snapshot_records(self) -> list[tuple[Any, int]]:
        """Records that rebuild the metadata state, in Kafka's image order."""
        before, after = self._snapshot_sections()
        return before + self.replication.snapshot_records(
            self.features.partition_record_version()) + after

    def snapshot_values(self) -> Iterator[bytes | TopicPartitions]:
        """`snapshot_records`, encoded by `partition_values`: values, and each topic's
        partitions as a run that a snapshot writer appends to its batches (`record_values`
        gives the run's values)."""
        before, after = self._snapshot_sections()
        return self._values(before, list(self.replication.topics.values()), after,
                            self.features.partition_record_version())

    def snapshot_value_parts(
            self, count: int) -> list[tuple[int, Iterator[bytes | TopicPartitions]]]:
        """`snapshot_values` in at most `count` runs of about as many records, split between
        topics: (records in the run, its values, encoded as they are read)."""
        before, after = self._snapshot_sections()
        version = self.features.partition_record_version()
        topics = list(self.replication.topics.values())
        sizes = [1 + len(topic.partitions) for topic in topics]
        share = max(1, -(-sum(sizes) // max(1, count)))
        runs: list[list[Any]] = [[]]
        filled = 0
        for topic, size in zip(topics, sizes, strict=True):
            if filled >= share and len(runs) < count:
                runs.append([])
                filled = 0
            runs[-1].append(topic)
            filled += size
        parts = []
        for i, run in enumerate(runs):
            head = before if i == 0 else []
            tail = after if i == len(runs) - 1 else []
            records = len(head) + sum(1 + len(t.partitions) for t in run) + len(tail)
            parts.append((records, self._values(head, run, tail, version)))
        return parts

    @staticmethod
    def _values(head: list[tuple[Any, int]], topics: list[Any], tail: list[tuple[Any, int]],
                version: int) -> Iterator[bytes | TopicPartitions]:
        for record, v in head:
            yield encode_metadata_record(record, v)
        yield from topic_runs(topics, version)
        for record, v in tail:
            yield encode_metadata_record(record, v)

    def _snapshot_sections(self) -> tuple[list[tuple[Any, int]], list[tuple[Any, int]]]:
        """The records before the topics' and after them."""
        before = self.features.snapshot_records()
        before += self.retained.feature_records()
        before += self.cluster.snapshot_records()
        after = self.config_control.snapshot_records()
        after += self.retained.quota_records()
        after += self.producer_ids.snapshot_records()
        after += self.acls.snapshot_records()
        after += self.retained.credential_records()
        return before, after

    def txn_snapshot_records(self) -> list[tuple[Any, Any]]:
        return self.transactions.snapshot_records()

    def describe(self) -> dict[str, Any]:
        return image.describe(self)
