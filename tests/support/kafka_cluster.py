"""Three real Kafka 4.1 brokers on one controller, kraftpy's or Kafka's, for the cluster tests.

    cluster = start_cluster(tmp / "c", "kraftpy", CONTROLLER_PROPS, racks={2: "a", 3: "b"})
    describe(cluster.bootstrap(), "topic")   # {partition: (leader, replicas, isr)}
    stop_cluster(cluster)

The same helpers start either controller, so a test runs one scenario on both and compares
the outcomes: what the brokers' metadata says, not how either controller got there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from support.kafka import KafkaNode
from support.server import KraftpyServer

BROKERS = (2, 3, 4)
KINDS = ("kraftpy", "kafka")


@dataclass
class Cluster:
    kind: str
    controller_voter: str
    cluster_id: str
    brokers: dict[int, KafkaNode] = field(default_factory=dict)
    stop_controller: Callable[..., Any] | None = None
    controller_log: Callable[[], str] | None = None
    controller_data: Path | None = None  # the controller's metadata log directory

    def bootstrap(self, *exclude: int) -> str:
        """The listeners of the brokers not excluded (running or not: clients skip the dead)."""
        return ",".join(n.bootstrap for b, n in self.brokers.items() if b not in exclude)

    def live(self) -> list[int]:
        return [b for b, n in self.brokers.items() if n.running]


def start_cluster(root: Path, kind: str, controller_props: Mapping[str, str],
                  broker_props: Mapping[int, Mapping[str, str]] | None = None,
                  brokers: tuple[int, ...] = BROKERS,
                  broker_ports: Mapping[int, int] | None = None) -> Cluster:
    """A controller of `kind` ("kraftpy" or "kafka", node 1, static voter) and brokers, all
    RUNNING. `broker_props` adds properties per broker id (broker.rack, ...); `broker_ports`
    fixes a broker's PLAINTEXT port (for listeners set in `broker_props` that name it)."""
    if kind == "kraftpy":
        srv = KraftpyServer(root / "kraftpy", controller_props)
        srv.start()
        cluster = Cluster(kind, f"1@{srv.controller}", srv.cluster_id())
        cluster.stop_controller = srv.stop
        cluster.controller_log = lambda: srv.log_path.read_text(errors="replace")
        cluster.controller_data = srv.data_dir
    else:
        node = KafkaNode(root / "controller", roles="controller", node_id=1, static_voter=True,
                         overrides=controller_props)
        node.format()
        node.start()
        cluster = Cluster(kind, node.voter, node.cluster_id)
        cluster.stop_controller = node.stop
        cluster.controller_log = node.log_text
        cluster.controller_data = node.data_dir
    for b in brokers:
        broker = KafkaNode(root / f"broker-{b}", roles="broker", node_id=b,
                           voters=[cluster.controller_voter], cluster_id=cluster.cluster_id,
                           broker_port=(broker_ports or {}).get(b),
                           overrides=dict((broker_props or {}).get(b, {})))
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
    if cluster.stop_controller is not None:
        cluster.stop_controller()


def describe(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """partition -> (leader, replicas, isr), as the brokers' metadata has it."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=5000)
    try:
        (found,) = admin.describe_topics([topic])
        assert not found["error_code"], found
        return {p["partition_index"]: (p["leader_id"], list(p["replica_nodes"]),
                                       list(p["isr_nodes"]))
                for p in found["partitions"]}
    finally:
        admin.close()


def wait_for(check: Callable[[], object], timeout: float, what: str,
             step: float = 0.25) -> float:
    """Seconds until `check()` is True (fails the test after `timeout`, with its last answer).
    An exception counts as not yet: a broker going away is asked again."""
    start = time.monotonic()
    last: object = None
    while time.monotonic() - start < timeout:
        try:
            last = check()
            if last is True:
                return time.monotonic() - start
        except Exception as exc:
            last = exc
        time.sleep(step)
    pytest.fail(f"{what} not within {timeout}s (last: {last!r})")


class AckedProducer(threading.Thread):
    """kafka-python, idempotent, acks=all, one record at a time to `topic`; keeps every
    acknowledged value with its partition and time, and every error (an unacknowledged
    record may be lost; an acknowledged one may not)."""

    def __init__(self, bootstrap: str, topic: str, limit_s: float = 600) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.limit_s = bootstrap, topic, limit_s
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
            deadline = time.monotonic() + self.limit_s
            while not self.stop.is_set() and time.monotonic() < deadline:
                value = f"r-{i}"
                try:
                    meta = producer.send(self.topic, value.encode()).get(timeout=60)
                    self.acked.append((value, meta.partition, time.monotonic()))
                except Exception as exc:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                i += 1
                time.sleep(0.005)
        finally:
            producer.close(10)

    def acks_on(self, partition: int, after: float) -> list[float]:
        return [t for _, p, t in self.acked if p == partition and t > after]

    def values(self) -> list[str]:
        return [v for v, _, _ in self.acked]

