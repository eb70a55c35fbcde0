"""InitProducerId (KIP-98/360): Kafka's decision table, case by case, against the control logic.

The expected answers of the first cases are those a real Kafka 4.1 gave (wire-4.1.jsonl), with
ids relative to the first one handed out.
"""

from __future__ import annotations

import uuid

import pytest
from kraftpy.controller.result import ControllerResult
from kraftpy.controller.transaction_control import (
    TxnMetadata,
    TxnPartition,
    TxnRecord,
    TxnState,
)
from kraftpy.protocol import txn_log
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.messages.list_transactions_request import ListTransactionsRequest
from kraftpy.protocol.record_batch import iter_record_batches
from kraftpy.protocol.records.transaction_log_key import TransactionLogKey
from kraftpy.protocol.records.transaction_log_value import (
    PartitionsSchema,
    TransactionLogValue,
)
from support.controller_harness import Harness, settings
from support.paths import reference


@pytest.fixture
def h() -> Harness:
    harness = Harness()
    harness.ready_ids()
    return harness


def ok(reply) -> tuple[int, int]:
    assert reply.error_code == ErrorCode.NONE, reply
    return reply.producer_id, reply.producer_epoch


def err(reply) -> int:
    assert (reply.producer_id, reply.producer_epoch) == (-1, -1), reply
    return reply.error_code


# --- idempotent producers -------------------------------------------------------------------

def test_idempotent_gets_fresh_ids_at_epoch_zero_and_writes_nothing(h):
    end, txn = h.end, len(h.txn)
    assert [ok(h.init(version=v)) for v in (0, 3, 4, 5)] == [(0, 0), (1, 0), (2, 0), (3, 0)]
    assert ok(h.init(pid=1, epoch=0)) == (4, 0)  # an expected id is ignored
    assert ok(h.init(timeout_ms=900_001)) == (5, 0)  # as Kafka: the timeout is not checked
    assert (h.end, len(h.txn)) == (end, txn)


@pytest.mark.parametrize("tid", [None, "t"])
@pytest.mark.parametrize("pid,epoch", [(5, -1), (-1, 0)])
def test_only_one_of_id_and_epoch_is_invalid_request(h, tid, pid, epoch):
    assert err(h.init(tid, pid=pid, epoch=epoch)) == ErrorCode.INVALID_REQUEST


# --- the transactional table as Kafka 4.1 answered it ---------------------------------------

def test_kafka_41_recorded_sequence(h):
    h.init()  # take an id first, so the transactional id is not the first one
    pid, epoch = ok(h.init("golden-txn"))
    assert epoch == 0
    assert ok(h.init("golden-txn", pid=pid, epoch=0)) == (pid, 1)
    assert ok(h.init("golden-txn", pid=pid, epoch=1)) == (pid, 2)
    assert ok(h.init("golden-txn", pid=pid, epoch=1)) == (pid, 2)  # retry of the last bump
    assert err(h.init("golden-txn", pid=pid, epoch=0)) == ErrorCode.PRODUCER_FENCED
    assert err(h.init("golden-txn", pid=pid, epoch=7)) == ErrorCode.PRODUCER_FENCED
    assert err(h.init("golden-txn", pid=12347, epoch=2)) == ErrorCode.PRODUCER_FENCED
    assert err(h.init("golden-txn", pid=pid, epoch=-1)) == ErrorCode.INVALID_REQUEST
    assert err(h.init("golden-txn", timeout_ms=900_001)) == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert err(h.init("golden-txn", timeout_ms=0)) == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert ok(h.init("golden-txn", pid=pid, epoch=2)) == (pid, 3)  # nothing above changed it


def test_empty_transactional_id_is_invalid_request(h):
    assert err(h.init("")) == ErrorCode.INVALID_REQUEST


def test_a_new_producer_instance_bumps_and_forgets_the_last_epoch(h):
    pid, _ = ok(h.init("t"))
    assert ok(h.init("t")) == (pid, 1)  # no expected id: a new instance
    assert err(h.init("t", pid=pid, epoch=0)) == ErrorCode.PRODUCER_FENCED


def test_first_init_with_an_expected_id_is_accepted(h):
    # No state yet (epoch -1): KIP-360 accepts whatever the client remembers.
    pid, epoch = ok(h.init("t", pid=424242, epoch=3))
    assert epoch == 0 and pid != 424242


@pytest.mark.parametrize("version,code", [(0, ErrorCode.INVALID_PRODUCER_EPOCH),
                                          (3, ErrorCode.INVALID_PRODUCER_EPOCH),
                                          (4, ErrorCode.PRODUCER_FENCED),
                                          (5, ErrorCode.PRODUCER_FENCED)])
def test_fenced_before_v4_is_invalid_producer_epoch(h, version, code):
    pid, _ = ok(h.init("t"))
    ok(h.init("t", pid=pid, epoch=0))
    ok(h.init("t", pid=pid, epoch=1))
    if version < 3:  # no expected id before v3: check the mapping on a direct fence instead
        from kraftpy.controller.transaction_control import _error
        assert _error(ErrorCode.PRODUCER_FENCED, version).response.error_code == code
        return
    assert err(h.init("t", pid=pid, epoch=0, version=version)) == code


def test_timeout_bounds(h):
    assert ok(h.init("t", timeout_ms=1))[1] == 0
    assert ok(h.init("u", timeout_ms=900_000))[1] == 0
    assert err(h.init("v", timeout_ms=-5)) == ErrorCode.INVALID_TRANSACTION_TIMEOUT


@pytest.mark.parametrize("tv, value_version", [(0, 0), (1, 1), (2, 1)])
def test_the_record_is_kafkas_transaction_log_value(tv, value_version):
    # transaction.version decides the value's version, as TransactionVersion's
    # transactionLogValueVersion does: 0 (not flexible) below level 1.
    h = Harness(settings(bootstrap_features={"transaction.version": tv}))
    h.ready_ids()
    pid, epoch = ok(h.init("golden-txn", timeout_ms=60000))
    key, value, partition = h.txn[-1]
    assert key == bytes.fromhex("0000000a") + b"golden-txn"
    assert partition.index == txn_log.partition_for("golden-txn", 50)
    decoded, version = txn_log.decode_value(value)
    assert version == value_version
    assert (decoded.producer_id, decoded.producer_epoch, decoded.transaction_timeout_ms,
            decoded.transaction_status, decoded.transaction_partitions,
            decoded.transaction_start_timestamp_ms) == (pid, epoch, 60000, 0, None, -1)
    assert decoded.transaction_last_update_timestamp_ms == h.now_ms


def test_value_bytes_match_a_real_kafka_41_record():
    path = reference("real-metadata-logs", "kafka-4.1-generated", "data",
                     "__transaction_state-10", "00000000000000000000.log")
    batch = next(iter_record_batches(path.read_bytes()))
    record = batch.records()[0]
    real, version = txn_log.decode_value(record.value)
    meta = TxnMetadata("golden-txn", real.producer_id, real.producer_epoch,
                       real.transaction_timeout_ms, TxnState(real.transaction_status),
                       last_update_ms=real.transaction_last_update_timestamp_ms,
                       start_ms=real.transaction_start_timestamp_ms)
    assert version == 1
    assert txn_log.encode_value(meta.value()) == record.value
    assert txn_log.encode_key(TransactionLogKey(transactional_id="golden-txn")) == record.key


# --- epoch exhaustion -----------------------------------------------------------------------

def _at_epoch(h: Harness, tid: str, pid: int, epoch: int, state: int = 0) -> None:
    h.qc.replay_txn(TransactionLogKey(transactional_id=tid), TransactionLogValue(
        producer_id=pid, producer_epoch=epoch, transaction_timeout_ms=60000,
        transaction_status=state, transaction_last_update_timestamp_ms=1,
        transaction_start_timestamp_ms=-1,
        transaction_partitions=None if state == 0 else [
            PartitionsSchema(topic="out", partition_ids=[0, 1])]), -1)


def test_epoch_32766_rotates_to_a_new_producer_id_and_remembers_the_old(h):
    _at_epoch(h, "t", 5000, 32765)
    assert ok(h.init("t", pid=5000, epoch=32765)) == (5000, 32766)
    new_pid, epoch = ok(h.init("t", pid=5000, epoch=32766))
    assert epoch == 0 and new_pid not in (5000, -1)
    value, _ = txn_log.decode_value(h.txn[-1][1])
    # As Kafka's TransactionLog.valueToBytes: the previous id is not written, only kept
    assert (value.producer_id, value.previous_producer_id, value.producer_epoch) == \
        (new_pid, -1, 0)
    assert h.qc.transactions.txns["t"].previous_producer_id == 5000
    # the client retries with what it held: the old id at the exhausted epoch
    assert ok(h.init("t", pid=5000, epoch=32766)) == (new_pid, 0)
    # and carries on with the new one
    assert ok(h.init("t", pid=new_pid, epoch=0)) == (new_pid, 1)


def test_exhausted_epoch_without_expected_id_rotates(h):
    _at_epoch(h, "t", 5000, 32766)
    new_pid, epoch = ok(h.init("t"))
    assert epoch == 0 and new_pid != 5000
    assert err(h.init("t", pid=5000, epoch=32766)) == ErrorCode.PRODUCER_FENCED  # no last epoch


def test_exhausted_epoch_never_wraps(h):
    _at_epoch(h, "t", 5000, 32767)
    pid, epoch = ok(h.init("t", pid=5000, epoch=32767))
    assert (epoch, pid != 5000) == (0, True)


def test_rotation_retry_across_a_restart_is_fenced_as_in_kafka():
    h = Harness()
    h.ready_ids()
    _at_epoch(h, "t", 5000, 32766)
    # persist the starting state through the harness log
    home = TxnPartition(uuid.UUID(int=1), txn_log.partition_for("t", 50))
    h.write(ControllerResult(None, txn_records=[TxnRecord(
        home, TransactionLogKey(transactional_id="t"), h.qc.transactions.txns["t"].value())]))
    new_pid, _ = ok(h.init("t", pid=5000, epoch=32766))
    h.restart()
    h.ready_ids()
    assert err(h.init("t", pid=5000, epoch=32766)) == ErrorCode.PRODUCER_FENCED
    assert ok(h.init("t", pid=new_pid, epoch=0)) == (new_pid, 1)


# --- durability and concurrency -------------------------------------------------------------

def test_transactional_ids_keep_their_epochs_across_restarts(h):
    pid, _ = ok(h.init("a"))
    ok(h.init("a", pid=pid, epoch=0))
    other, _ = ok(h.init("b"))
    h.restart()
    h.ready_ids()
    assert ok(h.init("a", pid=pid, epoch=1)) == (pid, 2)
    assert ok(h.init("b")) == (other, 1)
    fresh, _ = ok(h.init("c"))
    assert fresh not in (pid, other) and fresh >= 1000  # a new block after the restart


def test_uncommitted_state_answers_concurrent_transactions():
    h = Harness()
    h.ready_ids()
    h.auto_commit = False
    result = h.result(InitProducerIdRequest(transactional_id="t",
                                            transaction_timeout_ms=1000), 4)
    assert result.response.error_code == ErrorCode.NONE and not result.respond_before_commit
    assert err(h.init("t")) == ErrorCode.CONCURRENT_TRANSACTIONS
    h.commit()
    assert ok(h.init("t"))[1] == 1


def test_lost_uncommitted_bump_is_not_remembered():
    h = Harness()
    h.ready_ids()
    pid, _ = ok(h.init("t"))
    h.auto_commit = False
    ok(h.init("t", pid=pid, epoch=0))  # epoch 1, never fsynced
    h.restart()
    h.auto_commit = True
    h.ready_ids()
    assert ok(h.init("t", pid=pid, epoch=0)) == (pid, 1)


def test_no_block_yet_for_a_new_transactional_id():
    h = Harness()
    assert err(h.init("t")) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


@pytest.mark.parametrize("state,done", [(TxnState.ONGOING, TxnState.COMPLETE_ABORT),
                                        (TxnState.PREPARE_ABORT, TxnState.COMPLETE_ABORT),
                                        (TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT)])
def test_unfinished_transactions_are_completed_then_the_retry_succeeds(h, state, done):
    _at_epoch(h, "t", 5000, 7, state)
    start = len(h.txn)
    assert err(h.init("t", pid=5000, epoch=7)) == ErrorCode.CONCURRENT_TRANSACTIONS
    values = [txn_log.decode_value(v)[0] for _, v, _ in h.txn[start:]]
    assert values[-1].transaction_status == done
    fenced = 8 if state is TxnState.ONGOING else 7
    assert [v.producer_epoch for v in values][-1] == fenced
    if state is TxnState.ONGOING:
        assert [v.transaction_status for v in values] == [TxnState.PREPARE_ABORT, done]
    # an old instance holding epoch 7 is fenced after an Ongoing fence; a new one bumps
    assert ok(h.init("t")) == (5000, fenced + 1)


# --- reads ----------------------------------------------------------------------------------

def test_describe_and_list_transactions(h):
    pid, _ = ok(h.init("alpha"))
    _at_epoch(h, "beta", 7000, 3, TxnState.ONGOING)
    d = h.handle(DescribeTransactionsRequest(transactional_ids=["alpha", "beta", "nope"]), 0)
    a, b, n = d.transaction_states
    assert (a.error_code, a.transaction_state, a.producer_id, a.producer_epoch) == \
        (0, "Empty", pid, 0)
    assert (b.transaction_state, [(t.topic, t.partitions) for t in b.topics]) == \
        ("Ongoing", [("out", [0, 1])])
    assert n.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    listed = h.handle(ListTransactionsRequest(state_filters=["Ongoing", "Bogus"]), 0)
    assert [t.transactional_id for t in listed.transaction_states] == ["beta"]
    assert listed.unknown_state_filters == ["Bogus"]
    by_pid = h.handle(ListTransactionsRequest(producer_id_filters=[pid]), 0)
    assert [t.transactional_id for t in by_pid.transaction_states] == ["alpha"]
    everything = h.handle(ListTransactionsRequest(), 0)
    assert [t.transaction_state for t in everything.transaction_states] == ["Empty", "Ongoing"]
    pattern = h.handle(ListTransactionsRequest(transactional_id_pattern="al.*"), 2)
    assert [t.transactional_id for t in pattern.transaction_states] == ["alpha"]
    bad = h.handle(ListTransactionsRequest(transactional_id_pattern="("), 2)
    assert bad.error_code != 0 and not bad.transaction_states
