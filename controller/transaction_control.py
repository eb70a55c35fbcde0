"""TransactionControlManager: transactional ids and their producer ids and epochs.

Theory of operation (KIP-98, KIP-360). Each transactional id has a TransactionMetadata, kept in
Kafka's `__transaction_state` topic as Kafka's TransactionLogKey/TransactionLogValue and
changed only by replaying those records. The topic is Kafka's: its TopicRecord, ConfigRecords
and PartitionRecords in the metadata log (written as a Kafka broker's auto-creation has its
controller write them, the first time a transactional id needs it), its partitions
`__transaction_state-<n>` in the log dir, and each id in partition `partition_for(id, count)`,
so a Kafka node started on the same directory loads every id from the partition it looks in.

A record read from any other partition is misplaced: only kraftpy's former one-partition
layout (`__transaction_state-0`) leaves those. Such a state counts until its id's own
partition has a record; `migration_step` copies it there, creates the topic with the old
partition's topic id, then writes tombstones where it was (each step made durable before the
next, see controller/recovery.py), so a Kafka node never loads an id twice.

The value is written as Kafka 4.1 writes it (TransactionLog.valueToBytes): version 0 below
transaction.version 1, else 1; PreviousProducerId, NextProducerId and NextProducerEpoch are
not written (Kafka keeps the previous id in memory only, and so does this manager).

InitProducerId follows Kafka's TransactionCoordinator decision table:
a new id starts at epoch 0; a re-init bumps the epoch; a retry of a bump that succeeded gets
the current epoch back; any other expected (producer id, epoch) is fenced; an epoch at 32766
rotates to a new producer id at epoch 0, remembering the old one as PreviousProducerId.

kraftpy hosts no partitions, so a transaction it finds unfinished (Ongoing or Prepare*, from a
log written elsewhere) is completed here: an Ongoing one is fenced and aborted, a prepared one
completed, and the caller is told CONCURRENT_TRANSACTIONS to retry, which then succeeds.

The last epoch before a bump (KIP-360's "retry of a successful bump") is not a field of the
value, so it lives in memory, as in Kafka: it is lost on restart and a retry across a restart
is fenced.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NamedTuple

from kraftpy.controller.result import ControllerResult
from kraftpy.controller.settings import TxnTopicSettings
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.describe_transactions_response import (
    DescribeTransactionsResponse,
)
from kraftpy.protocol.messages.describe_transactions_response import (
    TopicData as DescribeTopicData,
)
from kraftpy.protocol.messages.describe_transactions_response import (
    TransactionState as DescribedTransaction,
)
from kraftpy.protocol.messages.init_producer_id_response import InitProducerIdResponse
from kraftpy.protocol.messages.list_transactions_response import ListTransactionsResponse
from kraftpy.protocol.messages.list_transactions_response import (
    TransactionState as ListedTransaction,
)
from kraftpy.protocol.records.clear_elr_record import ClearElrRecord
from kraftpy.protocol.records.config_record import ConfigRecord
from kraftpy.protocol.records.partition_record import PartitionRecord
from kraftpy.protocol.records.topic_record import TopicRecord
from kraftpy.protocol.records.transaction_log_key import TransactionLogKey
from kraftpy.protocol.records.transaction_log_value import (
    PartitionsSchema,
    TransactionLogValue,
)
from kraftpy.protocol.txn_log import TOPIC, partition_for
from kraftpy.protocol.uuid import random_kafka_uuid

if TYPE_CHECKING:
    from kraftpy.controller.feature_control import FeatureControlManager
    from kraftpy.controller.replication_control import ReplicationControlManager

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
INT16_MAX = 32767
TXN_VALUE_VERSION = 1
TOPIC_CONFIG_RESOURCE = 2  # ConfigResource.Type.TOPIC
UNASSIGNED_DIR = uuid.UUID(int=0)  # Kafka's DirectoryId.UNASSIGNED
INVALID_REGULAR_EXPRESSION = getattr(ErrorCode, "INVALID_REGULAR_EXPRESSION", 128)


class TxnState(IntEnum):
    """Kafka's TransactionState ids (persisted as TransactionStatus)."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(w.capitalize() for w in self.name.split("_"))


def is_epoch_exhausted(epoch: int) -> bool:
    return epoch >= INT16_MAX - 1


@dataclass(frozen=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # in memory only
    partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()
    last_update_ms: int = -1
    start_ms: int = -1
    client_transaction_version: int = 0
    offset: int = -1  # txn log offset (kraftpy's count, see TxnRecord) of its record
    partition: int = -1  # the __transaction_state partition its record was read from

    def value(self) -> TransactionLogValue:
        """The record Kafka's TransactionLog.valueToBytes writes for this state (previous and
        next producer ids stay at their defaults: Kafka does not write them)."""
        parts = None if self.state is TxnState.EMPTY else [
            PartitionsSchema(topic=t, partition_ids=list(ids)) for t, ids in self.partitions]
        return TransactionLogValue(
            producer_id=self.producer_id, producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms, transaction_status=int(self.state),
            transaction_partitions=parts, transaction_last_update_timestamp_ms=self.last_update_ms,
            transaction_start_timestamp_ms=self.start_ms,
            client_transaction_version=self.client_transaction_version)


@dataclass(frozen=True)
class TxnPartition:
    """A `__transaction_state` partition a record goes to: the topic id its directory's
    partition.metadata names, and the partition's leader epoch (its batches carry it)."""

    topic_id: uuid.UUID
    index: int
    leader_epoch: int = 0


class TxnRecord(NamedTuple):
    """One `__transaction_state` record of a ControllerResult. The value is written at
    `value_version`; None is a tombstone. Records of one result are counted from the
    `txn_offset` the storage gives (one count over all partitions, not a file offset)."""

    partition: TxnPartition
    key: TransactionLogKey
    value: TransactionLogValue | None
    value_version: int = TXN_VALUE_VERSION


IdSource = Callable[[], "int | ErrorCode"]


class TransactionControlManager:
    def __init__(self, transaction_max_timeout_ms: int, *,
                 features: FeatureControlManager | None = None,
                 replication: ReplicationControlManager | None = None,
                 node_id: int = 1, log_directory_id: uuid.UUID = UNASSIGNED_DIR,
                 topic_settings: TxnTopicSettings | None = None) -> None:
        self.max_timeout_ms = transaction_max_timeout_ms
        self.features = features
        self.replication = replication
        self.node_id = node_id
        self.log_directory_id = log_directory_id
        self.topic_settings = topic_settings or TxnTopicSettings()
        self.txns: dict[str, TxnMetadata] = {}  # each id's state, from its own partition
        # States read from a partition that is not their id's (the former one-partition
        # layout), by id and partition; `_home` holds the ids their own partition has a say on.
        self.misplaced: dict[str, dict[int, TxnMetadata]] = {}
        self._home: set[str] = set()
        self.committed_offset = 0  # txn log high watermark: states below it are durable
        self.topic_id: uuid.UUID | None = None  # the __transaction_state TopicRecord's
        # Where the partition directories found on disk point when the metadata log has no
        # topic yet (the former layout): the topic is created with their id and epochs.
        self.adopted_topic_id: uuid.UUID | None = None
        self.adopted_epochs: dict[int, int] = {}
        self._creating: uuid.UUID | None = None  # created by a result not yet replayed
        # Soft state: the last epoch and previous producer id of a transition handle()
        # produced, applied at its replay (Kafka keeps both in memory only).
        self._last_epochs: dict[str, tuple[int, int, int, int]] = {}

    # --- the topic ------------------------------------------------------------------------

    def replay_topic(self, record: TopicRecord) -> None:
        if record.name == TOPIC:
            self.topic_id = record.topic_id
            self._creating = None

    def replay_remove_topic(self, topic_id: uuid.UUID) -> None:
        if topic_id == self.topic_id:
            self.topic_id = None

    def partition_count(self) -> int:
        """The topic's partition count once it exists (Kafka's coordinator uses the topic's,
        whatever the setting says now), else transaction.state.log.num.partitions."""
        if self.topic_id is not None and self.replication is not None:
            topic = self.replication.topics.get(self.topic_id)
            if topic is not None and topic.partitions:
                return max(topic.partitions) + 1
        return self.topic_settings.num_partitions

    def adopt(self, topic_id: uuid.UUID | None, epochs: Mapping[int, int]) -> None:
        """The partition directories on disk (their topic id, each one's last leader epoch),
        for a topic the metadata log does not have yet."""
        self.adopted_topic_id = topic_id
        self.adopted_epochs = dict(epochs)

    def _partition(self, index: int) -> TxnPartition:
        topic_id = self.topic_id or self._creating
        assert topic_id is not None
        epoch = self.adopted_epochs.get(index, 0)
        if self.topic_id is not None and self.replication is not None:
            topic = self.replication.topics.get(self.topic_id)
            part = topic.partitions.get(index) if topic is not None else None
            if part is not None:
                epoch = part.leader_epoch
        return TxnPartition(topic_id, index, epoch)

    def _value_version(self) -> int:
        if self.features is None:
            return TXN_VALUE_VERSION
        return self.features.transaction_log_value_version()

    def topic_records(self, topic_id: uuid.UUID) -> list[tuple[Any, int]]:
        """What Kafka's controller writes for the broker's CreateTopics of
        `__transaction_state` (TopicRecord, the ConfigRecords in Kafka's order, ClearElrRecord
        when ELR is on, a PartitionRecord per partition), placed on this node, the one replica:
        min.insync.replicas is transaction.state.log.min.isr but never above that one."""
        ts, one_replica = self.topic_settings, 1
        records: list[tuple[Any, int]] = [(TopicRecord(name=TOPIC, topic_id=topic_id), 0)]
        for name, value in (("compression.type", "uncompressed"), ("cleanup.policy", "compact"),
                            ("min.insync.replicas", str(min(ts.min_isr, one_replica))),
                            ("segment.bytes", str(ts.segment_bytes)),
                            ("unclean.leader.election.enable", "false")):
            records.append((ConfigRecord(resource_type=TOPIC_CONFIG_RESOURCE,
                                         resource_name=TOPIC, name=name, value=value), 0))
        elr = self.features is not None and self.features.elr_enabled()
        if elr:
            records.append((ClearElrRecord(topic_name=TOPIC), 0))
        version = self.features.partition_record_version() if self.features else 0
        replicas = [self.node_id]
        for index in range(self.topic_settings.num_partitions):
            records.append((PartitionRecord(
                partition_id=index, topic_id=topic_id, replicas=replicas, isr=replicas,
                removing_replicas=[], adding_replicas=[], leader=self.node_id,
                leader_epoch=self.adopted_epochs.get(index, 0), partition_epoch=0,
                directories=[self.log_directory_id] if version >= 1 else []), version))
        return records

    def _can_create_topic(self) -> bool:
        return self.features is None or bool(self.features.metadata_version)

    def _topic_for_write(self) -> list[tuple[Any, int]]:
        """The records that create the topic if a write needs it first (else none)."""
        if self.topic_id is not None or self._creating is not None \
                or not self._can_create_topic():
            return []
        self._creating = self.adopted_topic_id or random_kafka_uuid()
        return self.topic_records(self._creating)

    # --- replay ---------------------------------------------------------------------------

    def replay(self, key: TransactionLogKey, value: TransactionLogValue | None,
               offset: int, partition: int | None = None) -> None:
        """One record of `partition` (None: the id's own, as for records without one)."""
        tid = key.transactional_id
        if partition is not None and partition != partition_for(tid, self.partition_count()):
            self._replay_misplaced(tid, value, offset, partition)
            return
        self._home.add(tid)
        if value is None:
            self.txns.pop(tid, None)
            return
        self.txns[tid] = self._state(tid, value, offset,
                                     -1 if partition is None else partition)

    def _state(self, tid: str, value: TransactionLogValue, offset: int,
               partition: int) -> TxnMetadata:
        last, previous = NO_PRODUCER_EPOCH, value.previous_producer_id
        pending = self._last_epochs.pop(tid, None)
        if pending is not None and pending[:2] == (value.producer_id, value.producer_epoch):
            last, previous = pending[2], pending[3]
        try:
            state = TxnState(value.transaction_status)
        except ValueError:
            state = TxnState.DEAD  # a status from a newer Kafka: treat the id as gone
        parts = tuple((p.topic, tuple(p.partition_ids))
                      for p in (value.transaction_partitions or []))
        return TxnMetadata(
            tid, value.producer_id, value.producer_epoch, value.transaction_timeout_ms, state,
            previous, value.next_producer_id, last, parts,
            value.transaction_last_update_timestamp_ms, value.transaction_start_timestamp_ms,
            value.client_transaction_version, offset, partition)

    def _replay_misplaced(self, tid: str, value: TransactionLogValue | None, offset: int,
                          partition: int) -> None:
        where = self.misplaced.setdefault(tid, {})
        if value is None:
            where.pop(partition, None)
            if not where:
                del self.misplaced[tid]
        else:
            where[partition] = self._state(tid, value, offset, partition)
        if tid in self._home:  # its own partition decides
            return
        if where:
            self.txns[tid] = max(where.values(), key=lambda m: m.offset)
        else:
            self.txns.pop(tid, None)

    def on_committed(self, txn_hwm: int) -> None:
        self.committed_offset = max(self.committed_offset, txn_hwm)

    def snapshot_records(self) -> list[TxnRecord]:
        """Every live id's state as a record of its own partition (needs the topic)."""
        count, version = self.partition_count(), self._value_version()
        return [TxnRecord(self._partition(partition_for(t, count)),
                          TransactionLogKey(transactional_id=t), m.value(), version)
                for t, m in self.txns.items() if m.state is not TxnState.DEAD]

    # --- the former one-partition layout --------------------------------------------------

    def migration_due(self) -> bool:
        """Whether `migration_step` has a step to give (this changes nothing)."""
        if self.topic_id is None and self.adopted_topic_id is None:
            return False
        return self._can_create_topic() and (self.topic_id is None or bool(self.misplaced))

    def migration_step(self) -> ControllerResult | None:
        """The next step that moves misplaced states where Kafka looks for them, or None when
        there is nothing (left) to move. The caller makes each step durable before asking
        for the next: (1) each misplaced id without a record in its own partition gets its
        state copied there; (2) the topic is created (with the adopted topic id and leader
        epochs, so the directories on disk are its partitions); (3) the misplaced records
        get tombstones, in the partitions they are in."""
        if self.topic_id is None and self.adopted_topic_id is None:
            return None
        if not self._can_create_topic():
            return None
        if self.topic_id is None and self._creating is None:
            self._creating = self.adopted_topic_id
        count, version = self.partition_count(), self._value_version()
        copies = sorted(tid for tid in self.misplaced if tid not in self._home)
        if copies:
            return ControllerResult(None, txn_records=[
                TxnRecord(self._partition(partition_for(tid, count)),
                          TransactionLogKey(transactional_id=tid), self.txns[tid].value(),
                          version) for tid in copies],
                events=[f"{len(copies)} transactional id(s) copied from the former "
                        f"{TOPIC}-0 layout into their own partitions"])
        if self.topic_id is None:
            assert self._creating is not None
            return ControllerResult(None, records=self.topic_records(self._creating), events=[
                f"Created {TOPIC} ({count} partitions) over the transaction log found on disk"])
        if self.misplaced:
            stale = sorted((p, tid) for tid, where in self.misplaced.items() for p in where)
            return ControllerResult(None, txn_records=[
                TxnRecord(self._partition(p), TransactionLogKey(transactional_id=tid), None,
                          version) for p, tid in stale],
                events=[f"{len(stale)} misplaced transactional id record(s) tombstoned where "
                        f"the former layout kept them"])
        return None

    # --- InitProducerId -------------------------------------------------------------------

    def init_producer_id(self, request: Any, api_version: int, now_ms: int,
                         new_id: IdSource) -> ControllerResult:
        """The transactional branch (a non-null TransactionalId) of InitProducerId."""
        tid = request.transactional_id
        if tid == "":
            return _error(ErrorCode.INVALID_REQUEST, api_version)
        if not 0 < request.transaction_timeout_ms <= self.max_timeout_ms:
            return _error(ErrorCode.INVALID_TRANSACTION_TIMEOUT, api_version)
        expected = None
        if api_version >= 3 and (request.producer_id, request.producer_epoch) != (-1, -1):
            expected = (request.producer_id, request.producer_epoch)
        meta = self.txns.get(tid)
        if meta is not None and meta.offset >= self.committed_offset:
            return _error(ErrorCode.CONCURRENT_TRANSACTIONS, api_version)
        if meta is None or meta.state is TxnState.DEAD:
            pid = new_id()
            if isinstance(pid, ErrorCode):
                return _error(pid, api_version)
            meta = TxnMetadata(tid, pid, NO_PRODUCER_EPOCH, request.transaction_timeout_ms,
                               TxnState.EMPTY)
        if expected is not None and not (
                meta.producer_epoch == NO_PRODUCER_EPOCH or expected[0] == meta.producer_id
                or (expected[0] == meta.previous_producer_id
                    and is_epoch_exhausted(expected[1]))):
            return _error(ErrorCode.PRODUCER_FENCED, api_version)

        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT,
                          TxnState.PREPARE_EPOCH_FENCE, TxnState.ONGOING):
            return self._finish_pending(meta, api_version, now_ms)

        timeout = request.transaction_timeout_ms
        if is_epoch_exhausted(meta.producer_epoch) and (
                expected is None or expected[1] == meta.producer_epoch):
            pid = new_id()
            if isinstance(pid, ErrorCode):
                return _error(pid, api_version)
            last = meta.producer_epoch if expected is not None else NO_PRODUCER_EPOCH
            epoch, previous = 0, meta.producer_id
            event = (f"Transactional id {tid!r}: epoch exhausted, producer id "
                     f"{meta.producer_id} -> {pid}")
        else:
            bumped = _bump(meta, expected)
            if bumped is None:
                return _error(ErrorCode.PRODUCER_FENCED, api_version)
            pid, (epoch, last), previous = meta.producer_id, bumped, meta.previous_producer_id
            event = ""
        new = TxnMetadata(tid, pid, epoch, timeout, TxnState.EMPTY, previous, NO_PRODUCER_ID,
                          last, (), now_ms, -1, meta.client_transaction_version)
        result = self._write(new)
        result.response = InitProducerIdResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, producer_id=new.producer_id,
            producer_epoch=new.producer_epoch)
        if event:
            result.events.append(event)
        return result

    def _finish_pending(self, meta: TxnMetadata, api_version: int,
                        now_ms: int) -> ControllerResult:
        """Complete an unfinished transaction; the client retries and then succeeds."""
        result = ControllerResult(None)
        if meta.state is TxnState.ONGOING:  # fence the old producer, then abort
            epoch = min(meta.producer_epoch + 1, INT16_MAX)
            meta = replace(meta, producer_epoch=epoch, state=TxnState.PREPARE_ABORT,
                           last_update_ms=now_ms)
            result.merge(self._write(meta))
        done = (TxnState.COMPLETE_COMMIT if meta.state is TxnState.PREPARE_COMMIT
                else TxnState.COMPLETE_ABORT)
        result.merge(self._write(replace(meta, state=done, partitions=(),
                                         last_update_ms=now_ms)))
        result.events.append(f"Transactional id {meta.transactional_id!r}: completed a "
                             f"pending transaction as {done.kafka_name}")
        result.response = _error(ErrorCode.CONCURRENT_TRANSACTIONS, api_version).response
        result.respond_before_commit = False
        return result

    def _write(self, meta: TxnMetadata) -> ControllerResult:
        """The record of a new state, in the id's own partition; the topic's records first
        when it does not exist yet (as a Kafka broker has it created before its first write)."""
        tid = meta.transactional_id
        self._last_epochs[tid] = (meta.producer_id, meta.producer_epoch,
                                  meta.last_producer_epoch, meta.previous_producer_id)
        created = self._topic_for_write()
        if self.topic_id is None and self._creating is None:  # no metadata.version yet
            raise RuntimeError(f"{TOPIC} cannot be created before the metadata log has a "
                               "metadata.version")
        partition = self._partition(partition_for(tid, self.partition_count()))
        return ControllerResult(None, records=created, txn_records=[TxnRecord(
            partition, TransactionLogKey(transactional_id=tid), meta.value(),
            self._value_version())])

    # --- reads ----------------------------------------------------------------------------

    def describe_transactions(self, request: Any) -> ControllerResult:
        states = []
        for tid in request.transactional_ids:
            meta = self.txns.get(tid)
            if meta is None or meta.state is TxnState.DEAD:
                states.append(DescribedTransaction(
                    error_code=ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, transactional_id=tid))
                continue
            states.append(DescribedTransaction(
                error_code=ErrorCode.NONE, transactional_id=tid,
                transaction_state=meta.state.kafka_name,
                transaction_timeout_ms=meta.timeout_ms,
                transaction_start_time_ms=meta.start_ms, producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch,
                topics=[DescribeTopicData(topic=t, partitions=list(p))
                        for t, p in meta.partitions]))
        return ControllerResult.reply(DescribeTransactionsResponse(
            throttle_time_ms=0, transaction_states=states))

    def list_transactions(self, request: Any, api_version: int,
                          now_ms: int) -> ControllerResult:
        names = {s.kafka_name: s for s in TxnState}
        wanted = {names[f] for f in request.state_filters if f in names}
        unknown = [f for f in request.state_filters if f not in names]
        pids = set(request.producer_id_filters)
        duration = getattr(request, "duration_filter", -1) if api_version >= 1 else -1
        pattern_text = getattr(request, "transactional_id_pattern", None) \
            if api_version >= 2 else None
        pattern = None
        if pattern_text:
            try:
                pattern = re.compile(pattern_text)
            except re.error:
                return ControllerResult.reply(ListTransactionsResponse(
                    throttle_time_ms=0, error_code=INVALID_REGULAR_EXPRESSION))
        listed = []
        for tid, meta in sorted(self.txns.items()):
            if meta.state is TxnState.DEAD:
                continue
            if (request.state_filters and meta.state not in wanted) or (
                    pids and meta.producer_id not in pids):
                continue
            if duration >= 0 and now_ms - meta.start_ms < duration:
                continue
            if pattern is not None and not pattern.fullmatch(tid):
                continue
            listed.append(ListedTransaction(transactional_id=tid, producer_id=meta.producer_id,
                                            transaction_state=meta.state.kafka_name))
        return ControllerResult.reply(ListTransactionsResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, unknown_state_filters=unknown,
            transaction_states=listed))

    def describe(self) -> list[dict[str, Any]]:
        return [{"transactional_id": t, "producer_id": m.producer_id,
                 "producer_epoch": m.producer_epoch, "state": m.state.kafka_name,
                 "timeout_ms": m.timeout_ms, "previous_producer_id": m.previous_producer_id}
                for t, m in sorted(self.txns.items())]


def _bump(meta: TxnMetadata, expected: tuple[int, int] | None) -> tuple[int, int] | None:
    """(new epoch, last epoch) per Kafka's prepareIncrementProducerEpoch; None if fenced."""
    current = meta.producer_epoch
    if expected is None:
        return current + 1, NO_PRODUCER_EPOCH
    if current == NO_PRODUCER_EPOCH or expected[1] == current:
        return current + 1, current
    if expected[1] == meta.last_producer_epoch:
        return current, meta.last_producer_epoch  # a retry of a bump that succeeded
    return None


def _error(code: ErrorCode, api_version: int) -> ControllerResult:
    if code is ErrorCode.PRODUCER_FENCED and api_version < 4:
        code = ErrorCode.INVALID_PRODUCER_EPOCH
    return ControllerResult.reply(InitProducerIdResponse(
        throttle_time_ms=0, error_code=code, producer_id=-1, producer_epoch=-1))
