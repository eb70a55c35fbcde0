"""One data directory passed between a Kafka 4.1 combined node and kraftpy keeps every
transactional id.

The Kafka node is node 1 with a static voter set (`controller.quorum.voters`), on kraftpy's
ports and directory: its broker listener is kraftpy's client listener, so one address serves
the ids whichever runs. Each side bumps every id with InitProducerId; the other must then see
the same producer id at that epoch (the next InitProducerId gives epoch + 1), list each id once
(`kafka-transactions list`, which asks every `__transaction_state` partition's coordinator
state: an id in two partitions would be listed twice), and no producer-id block may be granted
twice (`kraftpy pid-audit`). One JVM at a time.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from kraftpy.controller.log.partition_log import PartitionLog
from kraftpy.protocol import txn_log
from kraftpy.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.records.transaction_log_value import TransactionLogValue
from kraftpy.protocol.txn_log import partition_for
from kraftpy.tools.kafka_connection import KafkaConnection
from support.kafka import KafkaNode, run_tool
from support.server import KraftpyServer

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("kafka_jars")]

TXN_SETTINGS = {"transaction.state.log.replication.factor": "1",
                "transaction.state.log.min.isr": "1"}
# Ids over several partitions (and two in one: 'a' and 'golden-txn' both hash to 10 of 50).
IDS = ["a", "b", "golden-txn", "orders-1", "orders-2", "payments", "x" * 40, "émoji-✓"]
RETRIABLE = {14, 15, 16, 51}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR,
# CONCURRENT_TRANSACTIONS


def _retry(conn: KafkaConnection, request: object, version: int) -> object:
    deadline = time.monotonic() + 60
    while True:
        answer = conn.request(request, version)
        if answer.error_code not in RETRIABLE or time.monotonic() > deadline:  # type: ignore[attr-defined]
            return answer
        time.sleep(0.2)


def _init(address: str, tid: str) -> tuple[int, int]:
    """FindCoordinator (a Kafka node creates __transaction_state on it), then InitProducerId."""
    conn = KafkaConnection(address, timeout=30)
    try:
        found = _retry(conn, FindCoordinatorRequest(key=tid, key_type=1), 3)
        assert found.error_code == 0, found  # type: ignore[attr-defined]
        answer = _retry(conn, InitProducerIdRequest(transactional_id=tid,
                                                    transaction_timeout_ms=60000), 4)
    finally:
        conn.close()
    assert answer.error_code == 0, (tid, answer)  # type: ignore[attr-defined]
    return answer.producer_id, answer.producer_epoch  # type: ignore[attr-defined]


def _listed(address: str) -> list[tuple[str, int]]:
    """`kafka-transactions list`: (transactional id, producer id) per line, as listed."""
    out = run_tool("TransactionsCommand", "--bootstrap-server", address, "list").check().stdout
    rows = [line.split() for line in out.splitlines()[1:] if line.strip()]
    return [(row[0], int(row[2])) for row in rows]


def _bump_all(address: str, before: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
    """Every id's next InitProducerId: the same producer id, the epoch one up."""
    after = {tid: _init(address, tid) for tid in IDS}
    for tid in IDS:
        if tid in before:
            assert after[tid] == (before[tid][0], before[tid][1] + 1), tid
    return after


def _check_listed(address: str, state: dict[str, tuple[int, int]]) -> None:
    listed = _listed(address)
    assert sorted(listed) == sorted((tid, pid) for tid, (pid, _) in state.items()), listed


def _pid_audit(data_dir: Path) -> None:
    audit = subprocess.run([sys.executable, "-m", "kraftpy.tools", "pid-audit",
                            str(data_dir / "__cluster_metadata-0")],
                           capture_output=True, text=True, timeout=120)
    assert audit.returncode == 0, audit.stdout + audit.stderr


def _pair(root: Path, *, kafka_first: bool) -> tuple[KafkaNode, KraftpyServer]:
    if kafka_first:
        kafka = KafkaNode(root / "kafka", node_id=1, static_voter=True, overrides=TXN_SETTINGS)
        kraftpy = KraftpyServer(root / "kraftpy", {"metadata.log.dir": str(kafka.data_dir),
                                                   **TXN_SETTINGS},
                                client_port=kafka.broker_port,
                                controller_port=kafka.controller_port)
        return kafka, kraftpy
    kraftpy = KraftpyServer(root / "kraftpy", TXN_SETTINGS)
    kafka = KafkaNode(root / "kafka", node_id=1, static_voter=True,
                      broker_port=kraftpy.client_port, controller_port=kraftpy.controller_port,
                      overrides={"log.dirs": str(kraftpy.data_dir), **TXN_SETTINGS})
    kafka.data_dir = kraftpy.data_dir
    return kafka, kraftpy


def _kafka_turn(kafka: KafkaNode, before: dict[str, tuple[int, int]]
                ) -> dict[str, tuple[int, int]]:
    kafka.start()
    try:
        state = _bump_all(kafka.bootstrap, before)
        _check_listed(kafka.bootstrap, state)
    finally:
        assert kafka.stop() in (0, 143), kafka.log_tail()
    assert not list(kafka.data_dir.glob("__transaction_state-*-stray")), \
        "Kafka set kraftpy's transaction log aside"
    return state


def _kraftpy_turn(kraftpy: KraftpyServer, before: dict[str, tuple[int, int]]
                  ) -> dict[str, tuple[int, int]]:
    kraftpy.start()
    try:
        state = _bump_all(kraftpy.bootstrap, before)
        _check_listed(kraftpy.bootstrap, state)
    finally:
        assert kraftpy.stop() == 0, kraftpy.log_tail()
    return state


def test_kafka_then_kraftpy_then_kafka_keep_every_transactional_id(tmp_path: Path) -> None:
    kafka, kraftpy = _pair(tmp_path, kafka_first=True)
    kafka.format()
    state = _kafka_turn(kafka, {})
    homes = {partition_for(tid, 50) for tid in IDS}
    assert {int(p.name.rsplit("-", 1)[1]) for p in kafka.data_dir.glob(
        "__transaction_state-*")} == set(range(50))  # Kafka made all 50
    assert len(homes) > 4
    state = _kraftpy_turn(kraftpy, state)
    state = _kafka_turn(kafka, state)
    _pid_audit(kafka.data_dir)


def test_a_former_layout_directory_keeps_its_ids_through_kraftpy_and_then_kafka(
        tmp_path: Path) -> None:
    """kraftpy's former `__transaction_state-0` (every id there, its own topic id, no topic
    in the metadata log) is moved into Kafka's layout at startup; Kafka then finds every id."""
    kafka, kraftpy = _pair(tmp_path, kafka_first=False)
    kraftpy.start()  # formats, bootstraps, claims ids [0, 999] for this node
    assert kraftpy.stop() == 0
    old = {tid: (i, 3 + i) for i, tid in enumerate(IDS)}  # ids from that block
    part = PartitionLog.open(kraftpy.data_dir / "__transaction_state-0",
                             topic_id="q4TP1fhDS92H5wTJ8TFmVA", contiguous=False)
    for tid, (pid, epoch) in old.items():
        part.append([txn_log.encode_value(TransactionLogValue(
            producer_id=pid, producer_epoch=epoch, transaction_timeout_ms=60000,
            transaction_status=0, transaction_last_update_timestamp_ms=1,
            transaction_start_timestamp_ms=-1))], keys=[txn_log.encode_key(tid)],
            leader_epoch=1, timestamp=int(time.time() * 1000))
    part.close()
    state = _kraftpy_turn(kraftpy, old)
    state = _kafka_turn(kafka, state)
    _pid_audit(kraftpy.data_dir)


def test_kraftpy_then_kafka_then_kraftpy_keep_every_transactional_id(tmp_path: Path) -> None:
    kafka, kraftpy = _pair(tmp_path, kafka_first=False)
    state = _kraftpy_turn(kraftpy, {})
    # kraftpy wrote each id into the partition Kafka looks in, and nowhere else
    assert {int(p.name.rsplit("-", 1)[1]) for p in kraftpy.data_dir.glob(
        "__transaction_state-*")} == {partition_for(tid, 50) for tid in IDS}
    state = _kafka_turn(kafka, state)
    state = _kraftpy_turn(kraftpy, state)
    _pid_audit(kraftpy.data_dir)
