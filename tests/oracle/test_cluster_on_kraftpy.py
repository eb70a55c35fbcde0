"""Three real Kafka 4.1 brokers on kraftpy: replication, failover, controlled shutdown.

Brokers 2, 3 and 4 run on one controller; a topic has 6 partitions, replication factor 3 and
min.insync.replicas=2; a kafka-python idempotent producer (acks=all) sends the whole time.
The broker leading partition 0 is killed with SIGKILL: every partition has a live leader
again within broker.session.timeout.ms + 2 s and the producer keeps being acknowledged; the
broker restarts and every ISR is back to three (AlterPartition); another broker stopped with
SIGTERM has its leaderships moved away before it exits (its log: the controller let it go,
no time-out; exit 143). A read_committed consumer then finds every acknowledged record.

The same scenario runs on a Kafka 4.1 controller, and the test asserts the same outcome
for both. Kafka's partition tools on such a cluster: `test_cluster_tools_on_kraftpy.py`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.kafka import run_tool
from support.kafka_cluster import (
    BROKERS,
    AckedProducer,
    Cluster,
    start_cluster,
    stop_cluster,
    wait_for,
)
from support.kafka_cluster import describe as describe_topic
from support.producers import read_committed

pytestmark = pytest.mark.slow

SESSION_MS = 6000
TOPIC = "replicated"
CONTROLLER_PROPS = {"broker.session.timeout.ms": str(SESSION_MS),
                    "leader.imbalance.check.interval.seconds": "5"}


def describe(bootstrap: str) -> dict[int, tuple[int, list[int], list[int]]]:
    return describe_topic(bootstrap, TOPIC)


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
    producer = AckedProducer(bootstrap, TOPIC)
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
        cluster = start_cluster(tmp_path_factory.mktemp(f"cluster-{kind}"), kind,
                                CONTROLLER_PROPS, {b: {"broker.rack": f"rack-{b % 2}"}
                                                   for b in BROKERS})
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
