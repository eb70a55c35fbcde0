"""Transactional state in Kafka's layout: `__transaction_state` as a topic in the metadata log,
each id in the partition Kafka's partitionFor picks, and kraftpy's former one-partition layout
moved there at startup, safely across a crash between any two steps."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from kraftpy.controller.config import build_config
from kraftpy.controller.log import files
from kraftpy.controller.log.partition_log import PartitionLog
from kraftpy.controller.quorum import Quorum
from kraftpy.controller.recovery import RecoveryError, open_storage, recover_lone_voter
from kraftpy.controller.transaction_control import TransactionControlManager
from kraftpy.protocol import txn_log
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.record_batch import iter_record_batches
from kraftpy.protocol.records.transaction_log_key import TransactionLogKey
from kraftpy.protocol.records.transaction_log_value import TransactionLogValue
from kraftpy.protocol.uuid import kafka_uuid_str, parse_kafka_uuid
from support.controller_harness import Harness, settings
from support.lone_quorum import ask, lone_config, settle, stepped_lone

IDS = ["a", "b", "golden-txn", "orders-1", "orders-2", "payments", "x" * 40, "émoji-✓"]


# --- which partition ----------------------------------------------------------------------------

@pytest.mark.parametrize("text, java_hash", [
    ("hello", 99162322), ("", 0), ("polygenelubricants", -(1 << 31)),
    ("\U0001F600", 1772899),  # a surrogate pair: two UTF-16 units, as Java counts them
])
def test_the_hash_is_javas_string_hash(text: str, java_hash: int) -> None:
    assert txn_log.java_string_hash(text) == java_hash


def test_partition_for_is_kafkas() -> None:
    # A real Kafka 4.1 node keeps "golden-txn" in __transaction_state-10 (the reference data
    # directory of the suite); Integer.MIN_VALUE's Utils.abs is 0.
    assert txn_log.partition_for("golden-txn", 50) == 10
    assert txn_log.partition_for("polygenelubricants", 50) == 0
    assert txn_log.partition_for("hello", 50) == 99162322 % 50
    assert txn_log.partition_for("hello", 7) == 99162322 % 7


# --- the topic's records ------------------------------------------------------------------------

def test_the_topic_is_written_as_kafkas_auto_creation_has_it_written() -> None:
    """The records of the real 4.1 controller's metadata log for the broker's CreateTopics of
    __transaction_state (TopicRecord, five ConfigRecords in that order, ClearElrRecord, 50
    PartitionRecords v2), for this node and its log directory."""
    directory = uuid.UUID(int=0x1234)
    h = Harness(settings(bootstrap_features={"transaction.version": 2, "group.version": 1,
                                             "eligible.leader.replicas.version": 1},
                         log_directory_id=directory))
    h.ready_ids()
    start = h.end
    h.init("t")
    records = [r for r, _ in h.records[start - h.snapshot_end:]]
    from kraftpy.protocol.metadata_frame import decode_metadata_record

    decoded = [decode_metadata_record(v) for v in records]
    topic, version = decoded[0]
    assert (type(topic).__name__, version, topic.name) == ("TopicRecord", 0,
                                                           "__transaction_state")
    topic_id = kafka_uuid_str(topic.topic_id)
    configs = [(type(r).__name__, v, r.to_json(v)) for r, v in decoded[1:7]]
    assert configs == [("ConfigRecord", 0, {"resourceType": 2,
                                            "resourceName": "__transaction_state",
                                            "name": name, "value": value})
                       for name, value in (("compression.type", "uncompressed"),
                                           ("cleanup.policy", "compact"),
                                           ("min.insync.replicas", "1"),
                                           ("segment.bytes", "104857600"),
                                           ("unclean.leader.election.enable", "false"))] + [
        ("ClearElrRecord", 0, {"topicName": "__transaction_state"})]
    partitions = decoded[7:57]
    assert [(type(r).__name__, v, r.to_json(v)) for r, v in partitions] == [
        ("PartitionRecord", 2, {
            "partitionId": i, "topicId": topic_id, "replicas": [1], "isr": [1],
            "removingReplicas": [], "addingReplicas": [], "leader": 1, "leaderEpoch": 0,
            "partitionEpoch": 0, "directories": [kafka_uuid_str(directory)]})
        for i in range(50)]
    # then the id's record, in its partition of that topic
    (_key, _value, partition), = h.txn
    assert (partition.topic_id, partition.index) == (topic.topic_id,
                                                     txn_log.partition_for("t", 50))
    # a second id needs no second topic
    before = h.end
    h.init("u")
    assert h.end == before


def test_a_metadata_version_without_directories_or_elr_writes_partition_record_v0() -> None:
    h = Harness(settings(metadata_version=14))  # 3.6-IV2
    h.ready_ids()
    start = h.end
    h.init("t")
    from kraftpy.protocol.metadata_frame import decode_metadata_record

    decoded = [decode_metadata_record(v) for v, _ in h.records[start - h.snapshot_end:]]
    names = [type(r).__name__ for r, _ in decoded]
    assert "ClearElrRecord" not in names
    assert {v for r, v in decoded if type(r).__name__ == "PartitionRecord"} == {0}
    assert h.txn[0][1][:2] == b"\x00\x00"  # transaction.version 0: value version 0


def test_misplaced_states_count_until_their_own_partition_has_a_record() -> None:
    txns = TransactionControlManager(60000)
    home = txn_log.partition_for("b", 50)
    key = TransactionLogKey(transactional_id="b")
    txns.replay(key, _value(7, 2), 0, partition=(home + 1) % 50)
    assert txns.txns["b"].producer_epoch == 2 and "b" in txns.misplaced
    txns.replay(key, _value(7, 3), 1, partition=home)
    txns.replay(key, _value(7, 9), 2, partition=(home + 1) % 50)  # never wins again
    assert txns.txns["b"].producer_epoch == 3
    txns.replay(key, None, 3, partition=(home + 1) % 50)
    assert not txns.misplaced and txns.txns["b"].producer_epoch == 3


# --- a node on disk -----------------------------------------------------------------------------

def _config(data: Path, **extra: str):  # type: ignore[no-untyped-def]
    return build_config({"process.roles": "broker,controller", "node.id": "1",
                         "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
                         "controller.listener.names": "CONTROLLER",
                         "metadata.log.dir": str(data), **extra})


def _now() -> int:
    return time.time_ns() // 1_000_000


def _start(data: Path, **extra: str) -> Quorum:
    """The node as `kraftpy serve` opens it (a lone voter), moved by the test: elected, its
    former transaction-log layout moved if it had one, and its first producer-id block."""
    node = stepped_lone(data, extra)
    settle(node, tick=True)
    settle(node)
    return node


def _init(node: Quorum, tid: str) -> tuple[int, int]:
    response = ask(node, InitProducerIdRequest(transactional_id=tid,
                                               transaction_timeout_ms=60000), 4)
    assert response.error_code == 0, response
    return response.producer_id, response.producer_epoch


def _state(node: Quorum) -> dict[str, tuple[int, int]]:
    return {t: (m.producer_id, m.producer_epoch)
            for t, m in node.controller.transactions.txns.items()}


def _records(partition_dir: Path) -> list[tuple[str, bool]]:
    """(transactional id, is a tombstone) of every record of one partition."""
    out = []
    for segment in sorted(partition_dir.glob("*.log")):
        for batch in iter_record_batches(segment.read_bytes()):
            for record in batch.records():
                out.append((txn_log.decode_key(record.key)[0].transactional_id,
                            record.value is None))
    return out


def _value(pid: int, epoch: int) -> TransactionLogValue:
    return TransactionLogValue(producer_id=pid, producer_epoch=epoch,
                               transaction_timeout_ms=60000, transaction_status=0,
                               transaction_last_update_timestamp_ms=1,
                               transaction_start_timestamp_ms=-1)


def test_ids_live_in_their_own_partitions_and_survive_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    node = _start(data)
    try:
        for tid in IDS:
            _init(node, tid)
        _init(node, "a")
        state = _state(node)
        topic_id = node.controller.transactions.topic_id
    finally:
        node.storage.close()
    assert state["a"][1] == 1
    homes = {txn_log.partition_for(t, 50) for t in IDS}
    assert {p.name for p in data.glob("__transaction_state-*")} == {
        f"__transaction_state-{p}" for p in homes}
    for tid in IDS:
        home = data / f"__transaction_state-{txn_log.partition_for(tid, 50)}"
        assert (tid, False) in _records(home)
        assert files.read_partition_metadata(home) == kafka_uuid_str(topic_id)
    node = _start(data)
    try:
        assert _state(node) == state
        assert node.controller.transactions.topic_id == topic_id
        assert node.controller.transactions.migration_step() is None
    finally:
        node.storage.close()


def _former_layout(data: Path, ids: dict[str, tuple[int, int]], *, epoch: int = 3) -> str:
    """A kraftpy directory of before: every id in `__transaction_state-0` (its own topic id,
    batches at the raft leader epoch), no topic in the metadata log."""
    _start(data).storage.close()
    topic_id = kafka_uuid_str(uuid.UUID(int=0xABCDEF))
    part = PartitionLog.open(data / "__transaction_state-0", topic_id=topic_id,
                             contiguous=False)
    for tid, (pid, producer_epoch) in ids.items():
        part.append([txn_log.encode_value(_value(pid, producer_epoch))],
                    keys=[txn_log.encode_key(tid)], leader_epoch=epoch, timestamp=_now())
    part.close()
    return topic_id


OLD = {tid: (i, 3 + i) for i, tid in enumerate(IDS)}


def _check_migrated(data: Path, topic_id: str) -> None:
    node = _start(data)
    try:
        assert _state(node) == OLD
        txns = node.controller.transactions
        assert kafka_uuid_str(txns.topic_id) == topic_id and not txns.misplaced
        assert txns.migration_step() is None and not txns.migration_due()
        topic = node.controller.replication.topics[txns.topic_id]
        assert sorted(topic.partitions) == list(range(50))
        assert topic.partitions[0].leader_epoch == 3  # the old batches' epoch: Kafka's reads on
        ends = (node.storage.metadata.log_end_offset, node.txn.end)
        pid, epoch = _init(node, "orders-2")  # and the ids go on as before
        assert (pid, epoch) == (OLD["orders-2"][0], OLD["orders-2"][1] + 1)
    finally:
        node.storage.close()
    for tid in IDS:
        home = txn_log.partition_for(tid, 50)
        assert (tid, False) in _records(data / f"__transaction_state-{home}")
        if home != 0:
            assert _records(data / "__transaction_state-0").count((tid, True)) == 1
    node = _start(data)  # nothing left to move: nothing is written
    try:
        assert node.txn.end == ends[1] + 1
        assert _state(node)["orders-2"] == (OLD["orders-2"][0], OLD["orders-2"][1] + 1)
    finally:
        node.storage.close()


def test_the_former_one_partition_layout_is_moved_into_kafkas(tmp_path: Path) -> None:
    data = tmp_path / "data"
    topic_id = _former_layout(data, OLD)
    storage = open_storage(lone_config(data))  # as a lone voter opens it: a move is due
    try:
        state = recover_lone_voter(lone_config(data), storage)
        assert state.controller.transactions.migration_due()
    finally:
        storage.close()
    _check_migrated(data, topic_id)


@pytest.mark.parametrize("crash_after", [0, 1, 2])
def test_the_move_survives_a_crash_between_any_two_steps(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, crash_after: int) -> None:
    data = tmp_path / "data"
    topic_id = _former_layout(data, OLD)
    real = TransactionControlManager.migration_step
    steps: list[object] = []

    def crashing(self: TransactionControlManager):  # type: ignore[no-untyped-def]
        if len(steps) == crash_after:
            raise KeyboardInterrupt("crash")
        step = real(self)
        steps.append(step)
        return step

    monkeypatch.setattr(TransactionControlManager, "migration_step", crashing)
    with pytest.raises(KeyboardInterrupt):
        _start(data)
    (data / ".kafka_cleanshutdown").unlink(missing_ok=True)  # as a crash leaves it
    monkeypatch.setattr(TransactionControlManager, "migration_step", real)
    _check_migrated(data, topic_id)


def test_a_partition_of_another_topic_is_refused_and_left_alone(tmp_path: Path) -> None:
    data = tmp_path / "data"
    node = _start(data)
    try:
        _init(node, "golden-txn")
    finally:
        node.storage.close()
    stranger = data / "__transaction_state-3"
    PartitionLog.open(stranger, topic_id=kafka_uuid_str(uuid.UUID(int=99))).close()
    before = sorted((p.name, p.stat().st_size) for p in data.rglob("*") if p.is_file())
    with pytest.raises(RecoveryError, match=r"__transaction_state-3/partition.metadata: "
                                            r"topic id AAAAAAAAAAAAAAAAAAAAYw"):
        _start(data)
    assert sorted((p.name, p.stat().st_size) for p in data.rglob("*")
                  if p.is_file() and p.name != ".lock") == [b for b in before if b[0] != ".lock"]


def test_transaction_state_settings_are_read_and_checked(tmp_path: Path) -> None:
    cfg = _config(tmp_path, **{"transaction.state.log.num.partitions": "7",
                               "transaction.state.log.min.isr": "1"})
    assert (cfg.txn_topic.num_partitions, cfg.txn_topic.min_isr) == (7, 1)
    assert "transaction.state.log.num.partitions" not in cfg.extra
    from kraftpy.controller.config import ConfigError

    with pytest.raises(ConfigError, match="transaction.state.log.num.partitions"):
        _config(tmp_path, **{"transaction.state.log.num.partitions": "0"})
    node = _start(tmp_path / "data", **{"transaction.state.log.num.partitions": "7"})
    try:
        _init(node, "hello")
        part = txn_log.partition_for("hello", 7)
        assert (tmp_path / "data" / f"__transaction_state-{part}").is_dir()
        topic = node.controller.replication.topics[node.controller.transactions.topic_id]
        assert len(topic.partitions) == 7
        assert parse_kafka_uuid(files.read_meta_properties(tmp_path / "data")["directory.id"]
                                ) in topic.partitions[0].directories
    finally:
        node.storage.close()
