"""Real Kafka clients get producer ids from a real kraftpy process.

kafka-python, aiokafka, confluent-kafka (librdkafka) and Kafka 4.1's own Java client (a small
program compiled at test time, `tests/apache-kafka/java/KafkaClient.java`), each idempotent
and transactional:
an idempotent producer gets a fresh id at epoch 0; a transactional id initialised twice keeps
its id and bumps its epoch. Many producers at once get distinct ids, and no id handed to a
client falls inside a block given to a broker.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from pathlib import Path

import pytest
from kraftpy.tools.broker_sim import BrokerSim
from support.kafka import run_java_client
from support.producers import confluent_producer_id, kafka_python_producer_id
from support.server import KraftpyServer, running_server

pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::DeprecationWarning")]
WAIT_S = 20.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with running_server(tmp_path_factory.mktemp("clients")) as srv:
        yield srv


def txn_id(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


# --- kafka-python -----------------------------------------------------------------------------

def kafka_python_pid(srv: KraftpyServer, transactional_id: str | None = None) -> tuple[int, int]:
    pid, epoch, _ = kafka_python_producer_id(srv.bootstrap, transactional_id=transactional_id,
                                             wait_s=WAIT_S)
    return pid, epoch


# --- aiokafka ---------------------------------------------------------------------------------

async def _aiokafka_pid(srv: KraftpyServer, transactional_id: str | None) -> tuple[int, int]:
    from aiokafka import AIOKafkaProducer

    kwargs = {"transactional_id": transactional_id} if transactional_id else {
        "enable_idempotence": True}
    producer = AIOKafkaProducer(bootstrap_servers=srv.bootstrap, **kwargs)
    await asyncio.wait_for(producer.start(), WAIT_S)
    try:
        return producer._txn_manager.producer_id, producer._txn_manager.producer_epoch
    finally:
        await producer.stop()


def aiokafka_pid(srv: KraftpyServer, transactional_id: str | None = None) -> tuple[int, int]:
    return asyncio.run(_aiokafka_pid(srv, transactional_id))


# --- confluent-kafka (librdkafka) -------------------------------------------------------------

def confluent_pid(srv: KraftpyServer, transactional_id: str | None = None) -> tuple[int, int]:
    pid, epoch, _ = confluent_producer_id({"bootstrap.servers": srv.bootstrap},
                                          transactional_id=transactional_id, wait_s=WAIT_S)
    return pid, epoch


# --- Kafka's Java client -------------------------------------------------------------------

_JAVA: dict[str, Path] = {}


@pytest.fixture(autouse=True)
def _java_classes(request: pytest.FixtureRequest) -> None:
    """Compile the Java client only for the tests that use it."""
    if "java" in request.node.name and "classes" not in _JAVA:
        _JAVA["classes"] = request.getfixturevalue("java_client")


def java_pid(srv: KraftpyServer, transactional_id: str | None = None) -> tuple[int, int]:
    args = (["init-transactional", srv.bootstrap, transactional_id] if transactional_id
            else ["init-idempotent", srv.bootstrap])
    run = run_java_client(_JAVA["classes"], *args).check()
    (line,) = [line for line in run.stdout.splitlines() if line.startswith("producer ")]
    _, pid, epoch = line.split()
    return int(pid), int(epoch)


CLIENTS = {"kafka-python": kafka_python_pid, "aiokafka": aiokafka_pid,
           "librdkafka": confluent_pid, "java": java_pid}


@pytest.mark.parametrize("client", CLIENTS)
def test_idempotent(server, client: str) -> None:
    pid_of = CLIENTS[client]
    a, b = pid_of(server), pid_of(server)
    assert a[0] >= 0 and b[0] >= 0 and a[0] != b[0]
    assert a[1] == b[1] == 0


@pytest.mark.parametrize("client", CLIENTS)
def test_transactional(server, client: str) -> None:
    pid_of, tid = CLIENTS[client], txn_id(client)
    pid, epoch = pid_of(server, tid)
    assert pid >= 0 and epoch == 0
    assert pid_of(server, tid) == (pid, 1)


def test_one_transactional_id_across_all_four_clients_with_java(server) -> None:
    tid = txn_id("shared")
    pid, _ = kafka_python_pid(server, tid)
    assert aiokafka_pid(server, tid) == (pid, 1)
    assert confluent_pid(server, tid) == (pid, 2)
    assert java_pid(server, tid) == (pid, 3)
    assert kafka_python_pid(server, tid) == (pid, 4)


# --- many at once, and never inside a broker's block --------------------------------------------

def test_many_producers_at_once_get_distinct_ids_outside_every_broker_block(server) -> None:
    brokers = [BrokerSim((server.host, server.controller_port), 500 + i, server.cluster_id())
               for i in range(3)]
    for b in brokers:
        b.register()
        b.wait_unfenced()
    blocks: list[tuple[int, int]] = []
    ids: list[tuple[str, int, int]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def allocate(b: BrokerSim) -> None:
        try:
            while not stop.is_set() and len(blocks) < 60:
                blocks.append(b.allocate())
                time.sleep(0.01)
        except BaseException as exc:
            errors.append(exc)

    def run(kind: str, fn, *args) -> None:
        try:
            pid, epoch = fn(server, *args)
            ids.append((kind, pid, epoch))
        except BaseException as exc:
            errors.append(exc)

    async def aio_many(n: int) -> list[tuple[int, int]]:
        return await asyncio.gather(*(_aiokafka_pid(server, None) for _ in range(n)))

    threads = [threading.Thread(target=allocate, args=(b,)) for b in brokers]
    threads += [threading.Thread(target=run, args=("confluent", confluent_pid))
                for _ in range(8)]
    threads += [threading.Thread(target=run, args=("kafka-python", kafka_python_pid))
                for _ in range(4)]
    threads += [threading.Thread(target=run, args=("confluent-txn", confluent_pid,
                                                   txn_id(f"many{i}"))) for i in range(4)]
    for t in threads:
        t.start()
    for pid, epoch in asyncio.run(aio_many(16)):
        ids.append(("aiokafka", pid, epoch))
    stop.set()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert len(ids) == 32
    pids = [pid for _, pid, _ in ids]
    assert min(pids) >= 0
    assert len(set(pids)) == len(pids), sorted(pids)
    assert len(blocks) >= 3
    for start, length in blocks:
        inside = [p for p in pids if start <= p < start + length]
        assert not inside, (start, length, inside)
    starts = sorted(s for s, _ in blocks)
    assert len(set(starts)) == len(starts)
