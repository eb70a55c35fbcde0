"""TransactionControlManager: transactional ids and their producer ids and epochs.

Theory of operation (KIP-98, KIP-360). Each transactional id has a TransactionMetadata, kept in
`__transaction_state-0` as Kafka's TransactionLogKey/TransactionLogValue and changed only by
replaying those records. InitProducerId follows Kafka's TransactionCoordinator decision table:
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
from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import IntEnum
from typing import Any

from kraftpy.controller.result import ControllerResult
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
from kraftpy.protocol.records.transaction_log_key import TransactionLogKey
from kraftpy.protocol.records.transaction_log_value import (
    PartitionsSchema,
    TransactionLogValue,
)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
INT16_MAX = 32767
TXN_VALUE_VERSION = 1
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
    offset: int = -1  # txn log offset of the record this state came from

    def value(self) -> TransactionLogValue:
        parts = None if self.state is TxnState.EMPTY else [
            PartitionsSchema(topic=t, partition_ids=list(ids)) for t, ids in self.partitions]
        return TransactionLogValue(
            producer_id=self.producer_id, previous_producer_id=self.previous_producer_id,
            next_producer_id=self.next_producer_id, producer_epoch=self.producer_epoch,
            transaction_timeout_ms=self.timeout_ms, transaction_status=int(self.state),
            transaction_partitions=parts, transaction_last_update_timestamp_ms=self.last_update_ms,
            transaction_start_timestamp_ms=self.start_ms,
            client_transaction_version=self.client_transaction_version)


IdSource = Callable[[], "int | ErrorCode"]


class TransactionControlManager:
    def __init__(self, transaction_max_timeout_ms: int) -> None:
        self.max_timeout_ms = transaction_max_timeout_ms
        self.txns: dict[str, TxnMetadata] = {}
        self.committed_offset = 0  # txn log high watermark: states below it are durable
        # Soft state: the last epoch of a transition handle() produced, applied at its replay.
        self._last_epochs: dict[str, tuple[int, int, int]] = {}

    # --- replay ---------------------------------------------------------------------------

    def replay(self, key: TransactionLogKey, value: TransactionLogValue | None,
               offset: int) -> None:
        tid = key.transactional_id
        if value is None:
            self.txns.pop(tid, None)
            return
        last = NO_PRODUCER_EPOCH
        pending = self._last_epochs.pop(tid, None)
        if pending is not None and pending[:2] == (value.producer_id, value.producer_epoch):
            last = pending[2]
        try:
            state = TxnState(value.transaction_status)
        except ValueError:
            state = TxnState.DEAD  # a status from a newer Kafka: treat the id as gone
        parts = tuple((p.topic, tuple(p.partition_ids))
                      for p in (value.transaction_partitions or []))
        self.txns[tid] = TxnMetadata(
            tid, value.producer_id, value.producer_epoch, value.transaction_timeout_ms, state,
            value.previous_producer_id, value.next_producer_id, last, parts,
            value.transaction_last_update_timestamp_ms, value.transaction_start_timestamp_ms,
            value.client_transaction_version, offset)

    def on_committed(self, txn_hwm: int) -> None:
        self.committed_offset = max(self.committed_offset, txn_hwm)

    def snapshot_records(self) -> list[tuple[TransactionLogKey, TransactionLogValue]]:
        return [(TransactionLogKey(transactional_id=t), m.value())
                for t, m in self.txns.items() if m.state is not TxnState.DEAD]

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
        self._last_epochs[meta.transactional_id] = (
            meta.producer_id, meta.producer_epoch, meta.last_producer_epoch)
        key = TransactionLogKey(transactional_id=meta.transactional_id)
        return ControllerResult(None, txn_records=[(key, meta.value())])

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
