"""Real exactly-once data, written by real Kafka 4.1 brokers running on kraftpy, for the
exactly-once audit's tests (`kraftpy eos-audit`, `kraftpy pipeline eos-audit`).

    logs = run_eos_workload(tmp_path_factory.mktemp("eos"))
    logs.dirs            # every node's log directory, copied after a clean stop
    logs.acked           # values VerifiableProducer had acknowledged
    logs.committed       # values a read_committed consumer read from the output topic

The workload is the one Kafka's own system tests run for transactions (transactions_test.py),
scaled down: VerifiableProducer writes `RECORDS` values idempotently into `input`;
TransactionalMessageCopier copies them into `output` in transactions, aborting one in three at
random, committing its consumer offsets in each. One broker is killed with SIGKILL while
VerifiableProducer runs and another while the copier runs; each comes back at once. One
transaction is left hanging on purpose (`hanging`): a transactional batch produced with a
transactional id's producer id into a partition that id never added to a transaction (the
brokers skip that check for clients older than transactions v2 when
`transaction.partition.verification.enable` is false). `kafka-transactions find-hanging` is
asked on every broker while the cluster is up, then the brokers stop cleanly (each partition
writes its producer-state snapshot), and the directories are copied.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from support.kafka import _tool_log4j, java_command, run_tool
from support.kafka_cluster import Cluster, start_cluster, stop_cluster, wait_for

RECORDS = 2000
TOPICS = {"input": 2, "output": 2, "hanging": 1}
COPIER_TXN_ID = "eos-copier"
HANGING_TXN_ID = "eos-hanging"
SESSION_MS = 3000
BROKER_PROPS = {
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    "transaction.state.log.num.partitions": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.partition.verification.enable": "false",
    "broker.heartbeat.interval.ms": "500",
    "log.flush.interval.messages": "9223372036854775807",
}
# Small segments: each partition rolls a few times, and Kafka writes a producer-state snapshot
# at every roll (topic config for tests only; the public segment.bytes floor is 1 MiB).
TOPIC_CONFIGS = ("min.insync.replicas=2", "internal.segment.bytes=16384")


@dataclass
class EosLogs:
    """What the workload left: directories, and what Kafka's own tools said of it."""

    dirs: list[Path]  # the controller's and each broker's log directory (copies)
    brokers: dict[int, Path]  # broker id -> its log directory (copy)
    acked: list[str] = field(default_factory=list)
    committed: list[str] = field(default_factory=list)  # read_committed, output topic
    copier: dict = field(default_factory=dict)  # the copier's last status line
    hanging: dict[int, list[dict[str, str]]] = field(default_factory=dict)  # find-hanging rows
    hanging_txn: dict = field(default_factory=dict)  # the transaction left hanging
    kills: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)


def _partitions(cluster: Cluster) -> dict[tuple[str, int], tuple[int, list[int], list[int]]]:
    """(topic, partition) -> (leader, replicas, isr) of every topic, in one request."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap(), request_timeout_ms=5000)
    try:
        found = admin.describe_topics([*TOPICS, "__transaction_state"])
    finally:
        admin.close()
    return {(t["name"], p["partition_index"]): (p["leader_id"], list(p["replica_nodes"]),
                                                 list(p["isr_nodes"]))
            for t in found if not t["error_code"] for p in t["partitions"]}


def _leader(cluster: Cluster, topic: str, partition: int) -> int:
    return _partitions(cluster)[(topic, partition)][0]


def _whole(cluster: Cluster) -> bool:
    parts = _partitions(cluster)
    return all((t, p) in parts for t, n in TOPICS.items() for p in range(n)) and all(
        leader >= 0 and sorted(isr) == sorted(replicas)
        for leader, replicas, isr in parts.values())


def _kill_and_restart(cluster: Cluster, broker: int, log: list[str], why: str) -> None:
    node = cluster.brokers[broker]
    node.kill()
    log.append(f"kill -9 broker {broker} {why}")
    node.start(timeout=120)


def _java(main_class: str, *args: str, stderr: Path) -> subprocess.Popen[str]:
    """A Kafka tool's JVM: its results on stdout (a pipe), its log on stderr (a file, so that
    a chatty tool never blocks on a full pipe)."""
    command = java_command(main_class, *args, log4j_config=_tool_log4j())
    with stderr.open("ab") as err:
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)


def _wait_running(proc: subprocess.Popen[str], stderr: Path, check: Callable[[], bool],
                  timeout: float, what: str) -> None:
    """Until `check()`, failing at once with the tool's log if it exits first."""
    deadline = time.monotonic() + timeout
    while not check():
        if proc.poll() is not None:
            raise AssertionError(f"{what}: the tool exited {proc.returncode} first:\n"
                                 f"{stderr.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.1)


def _verifiable_producer(cluster: Cluster, root: Path, logs: EosLogs) -> None:
    victim = _leader(cluster, "input", 0)
    config = root / "producer.properties"
    config.write_text("enable.idempotence=true\nlinger.ms=2\nbatch.size=1024\n"
                      "max.in.flight.requests.per.connection=5\ndelivery.timeout.ms=120000\n"
                      "retries=2147483647\n")
    proc = _java("org.apache.kafka.tools.VerifiableProducer", "--topic", "input",
                 "--bootstrap-server", cluster.bootstrap(), "--max-messages", str(RECORDS),
                 "--throughput", "400", "--acks", "-1", "--producer.config", str(config),
                 "--value-prefix", "1", stderr=root / "verifiable-producer.err")
    acked: list[str] = []
    errors: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("name") == "producer_send_success":
                acked.append(event["value"])
            elif event.get("name") == "producer_send_error":
                errors.append(line.strip())

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    _wait_running(proc, root / "verifiable-producer.err", lambda: len(acked) >= RECORDS // 3,
                  90, "a third of the input acknowledged")
    _kill_and_restart(cluster, victim, logs.kills,
                      f"(leader of input-0, after {len(acked)} of {RECORDS} acks)")
    try:
        proc.wait(180)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("VerifiableProducer ran past 180 s") from None
    reader.join(10)
    assert proc.returncode == 0 and not errors, (proc.returncode, errors[:3])
    logs.acked = acked


def _copier(cluster: Cluster, root: Path, logs: EosLogs) -> None:
    proc = _java("org.apache.kafka.tools.TransactionalMessageCopier",
                 "--broker-list", cluster.bootstrap(), "--input-topic", "input",
                 "--input-partition", "0", "--output-topic", "output", "--group-mode", "--consumer-group", "eos-copier",
                 "--transactional-id", COPIER_TXN_ID, "--transaction-size", "40",
                 "--transaction-timeout", "30000", "--enable-random-aborts",
                 "--use-group-metadata", "--max-messages", "-1",
                 stderr=root / "copier.err")
    victim = _leader(cluster, "output", 0)
    status: list[dict] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                status.append(json.loads(line))
            except ValueError:
                continue

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    _wait_running(proc, root / "copier.err",
                  lambda: any(s.get("totalProcessed", 0) >= RECORDS // 3 for s in status), 120,
                  "the copier past a third of the input")
    done = max(s.get("totalProcessed", 0) for s in status)
    _kill_and_restart(cluster, victim, logs.kills,
                      f"(leader of output-0, the copier at {done} of {RECORDS})")
    try:
        proc.wait(180)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError(f"the copier ran past 180 s: {status[-1:]}") from None
    reader.join(10)
    assert proc.returncode == 0, (proc.returncode, (root / "copier.err").read_text()[-3000:])
    logs.copier = status[-1]


def _create_topics(bootstrap: str) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    configs = dict(c.split("=", 1) for c in TOPIC_CONFIGS)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(topic, partitions, 3, topic_configs=configs)
                             for topic, partitions in TOPICS.items()], timeout_ms=30000)
    finally:
        admin.close()


def _hanging_transaction(cluster: Cluster, logs: EosLogs) -> None:
    """A transactional batch in `hanging-0` from a producer id whose transaction never had
    that partition: no coordinator will ever write its marker."""
    from kraftpy.protocol.messages.find_coordinator_request import FindCoordinatorRequest
    from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
    from kraftpy.protocol.messages.produce_request import (
        PartitionProduceData,
        ProduceRequest,
        TopicProduceData,
    )
    from kraftpy.protocol.record_batch import build_record_batch
    from kraftpy.tools.kafka_connection import KafkaConnection

    def retry(conn: KafkaConnection, request: object, version: int) -> object:
        deadline = time.monotonic() + 60
        while True:
            answer = conn.request(request, version)
            if answer.error_code not in (14, 15, 16, 51) or time.monotonic() > deadline:
                return answer
            time.sleep(0.2)

    with KafkaConnection(cluster.bootstrap().split(",")[0], timeout=30) as conn:
        found = retry(conn, FindCoordinatorRequest(key=HANGING_TXN_ID, key_type=1), 3)
        assert found.error_code == 0, found
        coordinator = f"{found.host}:{found.port}"
    with KafkaConnection(coordinator, timeout=30) as conn:
        init = retry(conn, InitProducerIdRequest(transactional_id=HANGING_TXN_ID,
                                                 transaction_timeout_ms=60000), 4)
        assert init.error_code == 0, init
    leader = _leader(cluster, "hanging", 0)
    now = int(time.time() * 1000)
    batch = build_record_batch([b"left open"], keys=[b"h"], timestamp=now, transactional=True,
                               producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                               base_sequence=0)
    request = ProduceRequest(transactional_id=HANGING_TXN_ID, acks=-1, timeout_ms=30000,
                             topic_data=[TopicProduceData(name="hanging", partition_data=[
                                 PartitionProduceData(index=0, records=batch)])])
    with KafkaConnection(cluster.brokers[leader].bootstrap, timeout=30) as conn:
        answer = conn.request(request, 11)
    part = answer.responses[0].partition_responses[0]
    assert part.error_code == 0, answer
    logs.hanging_txn = {"topic": "hanging", "partition": 0, "producer_id": init.producer_id,
                        "producer_epoch": init.producer_epoch, "offset": part.base_offset,
                        "timestamp": now}


def _find_hanging(cluster: Cluster, logs: EosLogs) -> None:
    """`kafka-transactions find-hanging --broker-id B --max-transaction-timeout 0` on every
    broker at once: each open transaction older than now that its coordinator does not know."""
    runs: dict[int, object] = {}

    def ask(broker: int) -> None:
        runs[broker] = run_tool("TransactionsCommand", "--bootstrap-server", cluster.bootstrap(),
                                "find-hanging", "--broker-id", str(broker),
                                "--max-transaction-timeout", "0")

    threads = [threading.Thread(target=ask, args=(b,)) for b in cluster.brokers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    for broker, run in runs.items():
        run.check()  # type: ignore[attr-defined]
        lines = [line.split() for line in run.stdout.splitlines() if line.strip()]  # type: ignore[attr-defined]
        header = lines[0]
        logs.hanging[broker] = [dict(zip(header, row, strict=True)) for row in lines[1:]]


def _consume(bootstrap: str, topic: str, isolation: str, expected: int) -> list[str]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             isolation_level=isolation, consumer_timeout_ms=15_000,
                             enable_auto_commit=False)
    try:
        values = []
        deadline = time.monotonic() + 60
        for message in consumer:
            values.append(message.value.decode())
            if len(values) >= expected or time.monotonic() > deadline:
                break
        return values
    finally:
        consumer.close()


def run_eos_workload(root: Path) -> EosLogs:
    started = time.monotonic()
    seconds: dict[str, float] = {}

    def lap(name: str) -> None:
        seconds[name] = round(time.monotonic() - started - sum(seconds.values()), 1)

    cluster = start_cluster(root / "cluster", "kraftpy",
                            {"broker.session.timeout.ms": str(SESSION_MS)},
                            broker_props={b: BROKER_PROPS for b in (2, 3, 4)})
    lap("cluster")
    logs = EosLogs(dirs=[], brokers={})
    try:
        bootstrap = cluster.bootstrap()
        _create_topics(bootstrap)
        wait_for(lambda: _whole(cluster), 60, "every partition led with its ISR whole")
        lap("topics")
        _verifiable_producer(cluster, root, logs)
        lap("verifiable producer")
        wait_for(lambda: _whole(cluster), 90, "every ISR whole after the first kill")
        _copier(cluster, root, logs)
        lap("copier")
        wait_for(lambda: _whole(cluster), 90, "every ISR whole after the second kill")
        _hanging_transaction(cluster, logs)
        _find_hanging(cluster, logs)
        lap("find-hanging")
        logs.committed = _consume(bootstrap, "output", "read_committed", len(logs.acked))
        lap("consumer")
    finally:
        for node in cluster.brokers.values():
            node.stop(timeout=60)
        stop_cluster(cluster)
    lap("stop")
    copies = root / "logs"
    assert cluster.controller_data is not None
    shutil.copytree(cluster.controller_data, copies / "controller-1")
    logs.dirs.append(copies / "controller-1")
    for broker, node in cluster.brokers.items():
        target = copies / f"broker-{broker}"
        shutil.copytree(node.data_dir, target)
        logs.dirs.append(target)
        logs.brokers[broker] = target
    lap("copy")
    logs.seconds = seconds
    return logs


@pytest.fixture(scope="session")
def eos_logs(tmp_path_factory: pytest.TempPathFactory, kafka_jars: Path) -> EosLogs:
    """The workload's logs, written once per session; tests work on copies
    (`copy_logs`) or read them only."""
    return run_eos_workload(tmp_path_factory.mktemp("eos-workload"))


def copy_logs(logs: EosLogs, target: Path) -> Path:
    """A copy of every node's log directory under `target` (one folder per node)."""
    root = logs.dirs[0].parent
    shutil.copytree(root, target)
    return target
