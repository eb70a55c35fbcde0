"""aiokafka, kcat and kafkajs through a real Kafka 4.1 broker whose controller is kraftpy.

One `kraftpy serve` and one broker (`process.roles=broker`, `controller.quorum.voters=1@<kraftpy>`)
serve the whole module; each client has a topic of its own, created through the broker. Each
client produces idempotently, then transactionally (a transaction it aborts and one it commits,
where the client can abort), and its own read_committed consumer, in a consumer group, reads the
topic back and commits the group's offsets. What must hold:

- the consumer reads exactly the idempotent and committed records, each once, in order within a
  partition; never an aborted one;
- the aborted records were written all the same (kafka-python reading read_uncommitted sees
  them), so the read_committed result is a real filter and not an empty transaction;
- the group's offsets, as the broker's group coordinator returns them to another client, are
  past every record the consumer read and not past the partition's end;
- every producer id the client used comes from a block that kraftpy's log grants to the broker
  (`kraftpy pid-audit`, under broker 2), each id once.

kafka-python, librdkafka (confluent-kafka) and the Java client are covered by
test_broker_on_kraftpy.py. kcat (Debian's, librdkafka 2.0) commits but cannot abort: it aborts
only on a signal, and one that arrives while it reads its input makes it exit without aborting
(the transaction then stays open until its timeout), so it gets no abort case here. kcat and
kafkajs skip cleanly where they are not installed (`.ci/run` installs both).
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.kafka import KafkaNode
from support.server import KraftpyServer

pytestmark = pytest.mark.slow

JS = Path(__file__).resolve().parents[1] / "clients" / "js"
COUNT = 6  # records per phase (idempotent, aborted, committed)
WAIT_S = 60.0
BROKER_ID = 2
PID_LINE = re.compile(r"Acquired PID\{Id:(-?\d+),Epoch:(-?\d+)\}")


@dataclass
class ClientRun:
    """What one client did and saw through the broker."""

    topic: str
    partitions: int
    group: str
    idempotent: list[str]
    committed: list[str]
    aborted: list[str]
    producer_ids: list[tuple[int, int]] = field(default_factory=list)
    consumed: list[tuple[int, int, str]] = field(default_factory=list)  # partition, offset, value
    client_committed: dict[int, int] = field(default_factory=dict)  # partition -> offset


def _values(prefix: str) -> list[str]:
    return [f"{prefix}-{i}" for i in range(COUNT)]


def _new_run(client: str, partitions: int, *, aborts: bool = True) -> ClientRun:
    return ClientRun(topic=f"{client}-through-broker", partitions=partitions,
                     group=f"{client}-group", idempotent=_values(f"{client}-idempotent"),
                     committed=_values(f"{client}-committed"),
                     aborted=_values(f"{client}-aborted") if aborts else [])


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, kafka_jars: Path
            ) -> Iterator[tuple[KraftpyServer, KafkaNode]]:
    root = tmp_path_factory.mktemp("clients-through-broker")
    srv = KraftpyServer(root / "kraftpy")
    srv.start()
    broker = None
    try:
        broker = KafkaNode(root / "broker", roles="broker", node_id=BROKER_ID,
                           voters=[f"1@{srv.controller}"], cluster_id=srv.cluster_id())
        broker.format()
        broker.start(timeout=90)
        yield srv, broker
    finally:
        if broker is not None:
            broker.stop()
        srv.stop()


def _create_topic(bootstrap: str, run: ClientRun) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(run.topic, run.partitions, 1)], wait_for_metadata=True)
    finally:
        admin.close()


# --- aiokafka -----------------------------------------------------------------------------------

async def _aiokafka(bootstrap: str, run: ClientRun) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def produce(producer: AIOKafkaProducer, values: list[str]) -> None:
        for i, value in enumerate(values):
            await producer.send_and_wait(run.topic, value.encode(), partition=i % run.partitions)

    idempotent = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True)
    await idempotent.start()
    try:
        await produce(idempotent, run.idempotent)
        txn = idempotent._txn_manager
        run.producer_ids.append((txn.producer_id, txn.producer_epoch))
    finally:
        await idempotent.stop()
    transactional = AIOKafkaProducer(bootstrap_servers=bootstrap,
                                     transactional_id="aiokafka-through-broker")
    await transactional.start()
    try:
        await transactional.begin_transaction()
        await produce(transactional, run.aborted)
        await transactional.abort_transaction()
        async with transactional.transaction():
            await produce(transactional, run.committed)
        txn = transactional._txn_manager
        run.producer_ids.append((txn.producer_id, txn.producer_epoch))
    finally:
        await transactional.stop()

    consumer = AIOKafkaConsumer(run.topic, bootstrap_servers=bootstrap, group_id=run.group,
                                isolation_level="read_committed", auto_offset_reset="earliest",
                                enable_auto_commit=False)
    await consumer.start()
    try:
        tps = [TopicPartition(run.topic, p) for p in range(run.partitions)]
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=500)
            for tp, records in batches.items():
                run.consumed += [(tp.partition, r.offset, r.value.decode()) for r in records]
            if set(consumer.assignment()) == set(tps):
                # read_committed: the end is the last stable offset
                ends = await consumer.end_offsets(tps)
                positions = [await consumer.position(tp) for tp in tps]
                if all(pos >= ends[tp] for pos, tp in zip(positions, tps, strict=True)):
                    break
        await consumer.commit()
        for tp in tps:
            run.client_committed[tp.partition] = await consumer.committed(tp)
    finally:
        await consumer.stop()


@pytest.fixture(scope="module")
def aiokafka_run(cluster: tuple[KraftpyServer, KafkaNode]) -> ClientRun:
    _, broker = cluster
    run = _new_run("aiokafka", 2)
    _create_topic(broker.bootstrap, run)
    asyncio.run(asyncio.wait_for(_aiokafka(broker.bootstrap, run), 3 * WAIT_S))
    return run


# --- kcat ---------------------------------------------------------------------------------------

def _kcat(*args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    try:
        done = subprocess.run(["kcat", *args], input=stdin, capture_output=True,
                              timeout=WAIT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"kcat {' '.join(args)} ran past {WAIT_S} s:\n"
                    f"{(exc.stderr or b'').decode(errors='replace')[-3000:]}")
    assert done.returncode == 0, f"kcat {' '.join(args)}:\n{done.stderr.decode()[-3000:]}"
    return done


def _kcat_produce(bootstrap: str, run: ClientRun, values: list[str], *config: str) -> None:
    """One kcat producer for `values` (one transaction when `config` names an id)."""
    done = _kcat("-b", bootstrap, "-P", "-t", run.topic, "-p", "0", "-X", "debug=eos",
                 *config, stdin="".join(v + "\n" for v in values).encode())
    pid = PID_LINE.search(done.stderr.decode(errors="replace"))
    assert pid, done.stderr.decode()[-3000:]
    run.producer_ids.append((int(pid.group(1)), int(pid.group(2))))


@pytest.fixture(scope="module")
def kcat_run(cluster: tuple[KraftpyServer, KafkaNode]) -> ClientRun:
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (.ci/run installs Debian's kcat)")
    _, broker = cluster
    run = _new_run("kcat", 1, aborts=False)
    _create_topic(broker.bootstrap, run)
    _kcat_produce(broker.bootstrap, run, run.idempotent, "-X", "enable.idempotence=true")
    _kcat_produce(broker.bootstrap, run, run.committed,
                  "-X", "transactional.id=kcat-through-broker")
    # A balanced consumer (-G) reads read_committed and exits after the records expected;
    # closing it commits the offsets it consumed (librdkafka's auto commit).
    done = _kcat("-b", broker.bootstrap, "-G", run.group, "-X", "isolation.level=read_committed",
                 "-X", "auto.offset.reset=earliest", "-c", str(2 * COUNT),
                 "-f", "%p %o %s\\n", run.topic)
    for line in done.stdout.decode().splitlines():
        partition, offset, value = line.split(" ", 2)
        run.consumed.append((int(partition), int(offset), value))
    return run


# --- kafkajs ------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def kafkajs_run(cluster: tuple[KraftpyServer, KafkaNode]) -> ClientRun:
    if shutil.which("node") is None or not (JS / "node_modules" / "kafkajs").is_dir():
        pytest.skip("kafkajs is not installed (.ci/run runs `npm ci` in tests/clients/js)")
    _, broker = cluster
    run = _new_run("kafkajs", 2)
    _create_topic(broker.bootstrap, run)
    cmd = ["node", str(JS / "through_broker.js"), broker.bootstrap, run.topic,
           str(run.partitions), run.group, "kafkajs-through-broker", str(COUNT)]
    try:
        done = subprocess.run(cmd, capture_output=True, timeout=3 * WAIT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"kafkajs ran past {3 * WAIT_S} s:\n{(exc.stderr or b'').decode()[-3000:]}")
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    seen = json.loads(done.stdout)
    run.producer_ids = [(p["producerId"], p["producerEpoch"]) for p in seen["producerIds"]]
    run.consumed = [(r["partition"], r["offset"], r["value"]) for r in seen["consumed"]]
    run.client_committed = {c["partition"]: c["offset"] for c in seen["committed"]}
    return run


RUNS = ["aiokafka_run", "kcat_run", "kafkajs_run"]


# --- what the broker holds, seen by another client ----------------------------------------------

def _read_uncommitted(bootstrap: str, run: ClientRun) -> tuple[list[str], dict[int, int]]:
    """Every record in the topic, aborted ones too (kafka-python, read_uncommitted), and each
    partition's end offset."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             isolation_level="read_uncommitted")
    try:
        tps = [TopicPartition(run.topic, p) for p in range(run.partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        ends = consumer.end_offsets(tps)
        expected = len(run.idempotent) + len(run.committed) + len(run.aborted)
        values: list[str] = []
        deadline = time.monotonic() + WAIT_S
        while len(values) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values += [r.value.decode() for r in records]
        return values, {tp.partition: end for tp, end in ends.items()}
    finally:
        consumer.close()


def _group_offsets(bootstrap: str, group: str) -> dict[int, int]:
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        offsets = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items()}


# --- the tests ----------------------------------------------------------------------------------

@pytest.mark.parametrize("client", RUNS)
def test_read_committed_reads_exactly_the_committed_records(client: str,
                                                            request: pytest.FixtureRequest
                                                            ) -> None:
    run: ClientRun = request.getfixturevalue(client)
    values = [value for _, _, value in run.consumed]
    assert sorted(values) == sorted(run.idempotent + run.committed)
    assert len(values) == len(set(values))
    for partition in range(run.partitions):
        offsets = [o for p, o, _ in run.consumed if p == partition]
        assert offsets == sorted(offsets) and offsets
        in_partition = [v for p, _, v in run.consumed if p == partition]
        # produced order survives within a partition: idempotent records before committed ones
        assert in_partition == sorted(in_partition, key=lambda v: ("committed" in v,
                                                                   int(v.rsplit("-", 1)[1])))


@pytest.mark.parametrize("client", RUNS)
def test_aborted_records_are_in_the_log_but_never_read(client: str, cluster,
                                                       request: pytest.FixtureRequest) -> None:
    run: ClientRun = request.getfixturevalue(client)
    _, broker = cluster
    everything, ends = _read_uncommitted(broker.bootstrap, run)
    assert sorted(everything) == sorted(run.idempotent + run.aborted + run.committed)
    assert not {v for _, _, v in run.consumed} & set(run.aborted)
    # every write was one record with its own offset, plus one marker per transaction
    transactions = 2 if run.aborted else 1
    assert sum(ends.values()) == len(everything) + transactions * run.partitions


@pytest.mark.parametrize("client", RUNS)
def test_the_consumer_group_committed_its_offsets(client: str, cluster,
                                                  request: pytest.FixtureRequest) -> None:
    run: ClientRun = request.getfixturevalue(client)
    _, broker = cluster
    committed = _group_offsets(broker.bootstrap, run.group)
    _, ends = _read_uncommitted(broker.bootstrap, run)
    assert set(committed) == set(range(run.partitions))
    for partition, offset in committed.items():
        last = max(o for p, o, _ in run.consumed if p == partition)
        assert last + 1 <= offset <= ends[partition], (partition, offset, last, ends)
        if run.client_committed:
            assert run.client_committed[partition] == offset


def test_producer_ids_come_from_the_brokers_blocks_in_kraftpys_log(
        cluster, request: pytest.FixtureRequest) -> None:
    srv, _ = cluster
    ids: list[int] = []
    for name in RUNS:
        try:
            run: ClientRun = request.getfixturevalue(name)
        except pytest.skip.Exception:
            continue
        assert run.producer_ids and all(pid >= 0 and epoch >= 0
                                        for pid, epoch in run.producer_ids), name
        ids += [pid for pid, _ in run.producer_ids]
    audit = subprocess.run([sys.executable, "-m", "kraftpy.tools", "pid-audit", "--json",
                            str(srv.data_dir)], capture_output=True, text=True, timeout=60)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    blocks = [b for b in json.loads(audit.stdout)["blocks"] if b["broker_id"] == BROKER_ID]
    for pid in ids:
        assert any(b["first_id"] <= pid <= b["last_id"] for b in blocks), (pid, blocks)
    # a transactional producer keeps one id per transactional id; kafkajs also initialises an
    # idempotent id when its transactional producer connects, so distinct ids only per producer
    assert len(ids) == len(set(ids))
