"""Real Kafka 4.1 brokers on kraftpy beside the same brokers on Kafka 4.1's own controller.

    python benchmarks/vs_kafka_brokers.py [--starts 8] [--creates 10] [--topics 1000]
                                          [--partitions 100] [--per-request 10]

Both controllers run on this machine for the whole run: `kraftpy serve` (its default
combined node; brokers use its CONTROLLER listener) and a Kafka 4.1 controller-only node with
a static voter set, each with the same overrides (below). Brokers are Kafka 4.1 itself
(`kafka.Kafka`, `process.roles=broker`, `controller.quorum.voters=1@<controller>`), started by
the test suite's harness with the same configuration on both sides, a fresh node id and data
dir each time. Every JVM (the Kafka controller, brokers) runs with the harness's options
(384 MB heap, serial GC, C1 only).

Latency, rounds alternating between the sides (who goes first alternating too):
- broker start to RUNNING: from the broker's process start to its own log line
  "Transitioning from RECOVERY to RUNNING" (its log timestamp);
- CreateTopics -> visible in the broker's Metadata: a topic of one partition created through
  the broker with kafka-python's admin client (the broker forwards it to its controller in an
  Envelope), then Metadata v12 asked of the broker every millisecond until the topic is there
  with a leader.

Scale, one side after the other: a simulated broker (kraftpy's `BrokerSim`, heartbeating
once a second) registers with the controller, and `--topics` topics of `--partitions`
partitions (one replica, on that broker) are created with CreateTopics v7 sent straight to the
controller listener, `--per-request` topics at a time. Then: the controller's resident memory
(VmRSS), its newest snapshot once it holds every partition (size in bytes), a new real broker's
catch-up while the controller still snapshots every 5 s (process start to RUNNING), a restart
from that snapshot with Kafka's default snapshot interval (1 h) (process start to serving:
kraftpy's listeners answer, Kafka logs "Kafka Server started" and its listener answers; kraftpy
also logs its own recovery time), resident memory after the restart, and another new broker's
catch-up, with whether it fetched the snapshot (FetchSnapshot: a `.checkpoint` in its metadata
directory).

Overrides on both controllers: `metadata.log.max.snapshot.interval.ms=5000` until the restart
(so a snapshot covers the created topics soon after the last one) and `broker.session.timeout.ms=60000` (the
simulated broker stays unfenced across a controller restart).
p99 of a few samples is their maximum; the count is printed with each row.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests")]

from kraftpy.controller.log.snapshots import list_snapshots, read_snapshot  # noqa: E402
from kraftpy.protocol.messages.create_topics_request import (  # noqa: E402
    CreatableTopic,
    CreateTopicsRequest,
)
from kraftpy.protocol.messages.metadata_request import (  # noqa: E402
    MetadataRequest,
    MetadataRequestTopic,
)
from kraftpy.tools.broker_sim import BrokerSim  # noqa: E402
from kraftpy.tools.kafka_connection import ClientError, KafkaConnection  # noqa: E402

OVERRIDES = {"metadata.log.max.snapshot.interval.ms": "5000",
             "broker.session.timeout.ms": "60000"}
PARTITION_RECORD = 3  # metadata record type of PartitionRecord
RUNNING = "Transitioning from RECOVERY to RUNNING"
SIM_BROKER_ID = 1000
DEFAULT_SNAPSHOT_INTERVAL_MS = "3600000"  # Kafka's metadata.log.max.snapshot.interval.ms


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def log_time(line: str) -> float:
    """The epoch time of a Kafka log line (`[yyyy-MM-dd HH:mm:ss,SSS] ...`, local time)."""
    stamp = datetime.datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f")
    return stamp.timestamp()


@dataclass
class Side:
    """One controller under test and what was measured against it."""

    name: str
    controller: str  # host:port of its CONTROLLER listener
    cluster_id: str
    pid: Callable[[], int]
    restart: Callable[[dict[str, str]], None]  # with these properties changed
    metadata_dir: Path
    starts: list[float] = field(default_factory=list)
    creates: list[float] = field(default_factory=list)
    scale: dict[str, object] = field(default_factory=dict)


class Heartbeats(threading.Thread):
    """A simulated broker kept registered and unfenced (reconnecting across restarts)."""

    def __init__(self, side: Side) -> None:
        super().__init__(daemon=True)
        host, port = side.controller.rsplit(":", 1)
        self.sim = BrokerSim((host, int(port)), SIM_BROKER_ID, side.cluster_id, timeout=30)
        self.sim.register()
        self.sim.wait_unfenced(timeout=30)
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(1.0):
            try:
                self.sim.heartbeat()
            except (ClientError, OSError):
                try:
                    self.sim.reconnect()
                except (ClientError, OSError):
                    pass

    def stop(self) -> None:
        self.done.set()
        self.join(10)
        self.sim.close()


def start_broker(side: Side, root: Path, node_id: int) -> tuple[object, float]:
    """A fresh Kafka broker on `side`; (node, seconds from its process start to RUNNING)."""
    from support.kafka import KafkaNode

    broker = KafkaNode(root / f"{side.name}-broker-{node_id}", roles="broker", node_id=node_id,
                       voters=[f"1@{side.controller}"], cluster_id=side.cluster_id)
    broker.format()
    started = time.time()
    broker.start(timeout=300)
    line = next(ln for ln in broker.log_text().splitlines() if RUNNING in ln)
    return broker, log_time(line) - started


def topic_visible(conn: KafkaConnection, topic: str) -> bool:
    answer = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name=topic)],
                                          allow_auto_topic_creation=False), 12)
    (found,) = answer.topics
    return found.error_code == 0 and bool(found.partitions) and all(
        p.leader_id >= 0 for p in found.partitions)


def measure_creates(side: Side, bootstrap: str, prefix: str, count: int) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    host, port = bootstrap.rsplit(":", 1)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=60000)
    conn = KafkaConnection((host, int(port)), timeout=30)
    try:
        for i in range(count):
            topic = f"{prefix}-{i}"
            started = time.perf_counter()
            admin.create_topics([NewTopic(topic, 1, 1)])
            while not topic_visible(conn, topic):
                time.sleep(0.001)
            side.creates.append(time.perf_counter() - started)
    finally:
        conn.close()
        admin.close()


def newest_snapshot(directory: Path) -> tuple[Path, int] | None:
    """(path, PartitionRecords in it) of the newest snapshot, or None."""
    snapshots = list_snapshots(directory)
    if not snapshots:
        return None
    path = snapshots[-1][1]
    try:
        values = read_snapshot(path).values
    except ValueError:  # still being written
        return None
    return path, sum(1 for v in values if v[1] == PARTITION_RECORD)


def measure_scale(side: Side, root: Path, topics: int, partitions: int, per_request: int
                  ) -> None:
    out = side.scale
    beats = Heartbeats(side)
    beats.start()
    host, port = side.controller.rsplit(":", 1)
    conn = KafkaConnection((host, int(port)), timeout=120)
    try:
        out["rss before"] = rss_bytes(side.pid())
        started = time.perf_counter()
        for first in range(0, topics, per_request):
            names = [f"scale-{i:05d}" for i in range(first, min(first + per_request, topics))]
            answer = conn.request(CreateTopicsRequest(
                topics=[CreatableTopic(name=n, num_partitions=partitions, replication_factor=1)
                        for n in names], timeout_ms=120000), 7)
            errors = [(t.name, t.error_code, t.error_message) for t in answer.topics
                      if t.error_code]
            if errors:
                raise RuntimeError(f"{side.name}: CreateTopics: {errors[:3]}")
        out["create s"] = time.perf_counter() - started
        conn.close()
        want = topics * partitions
        deadline = time.monotonic() + 300
        while True:
            found = newest_snapshot(side.metadata_dir)
            if found and found[1] >= want:
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{side.name}: no snapshot with {want} partitions: {found}")
            time.sleep(0.5)
        out["snapshot bytes"] = found[0].stat().st_size
        out["rss"] = rss_bytes(side.pid())
        out["catch-up snapshotting s"], _ = catch_up(side, root, 900)
        started = time.perf_counter()
        side.restart({"metadata.log.max.snapshot.interval.ms": DEFAULT_SNAPSHOT_INTERVAL_MS})
        out["restart s"] = time.perf_counter() - started
        time.sleep(2.0)  # settle: the first heartbeats, a NoOp or two
        out["rss restarted"] = rss_bytes(side.pid())
        out["catch-up s"], out["fetched snapshot"] = catch_up(side, root, 901)
    finally:
        beats.stop()


def catch_up(side: Side, root: Path, node_id: int) -> tuple[float, bool]:
    """A new broker's start to RUNNING, and whether it fetched a snapshot."""
    broker, seconds = start_broker(side, root, node_id)
    try:
        return seconds, bool(list(broker.metadata_dir().glob("*.checkpoint")))
    finally:
        broker.stop()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def row(name: str, ours: float, theirs: float, unit: str, target: float | None) -> str:
    ratio = ours / theirs if theirs else float("inf")
    verdict = "" if target is None else ("met" if ratio <= target else "MISSED")
    fmt = {"ms": lambda v: f"{v * 1000:,.0f} ms", "s": lambda v: f"{v:,.2f} s",
           "MB": lambda v: f"{v / 1e6:,.1f} MB"}[unit]
    goal = "" if target is None else f"<= {target:g}x"
    return f"| {name} | {fmt(ours)} | {fmt(theirs)} | {ratio:.2f}x | {goal} {verdict} |"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=8, help="broker starts per side")
    parser.add_argument("--creates", type=int, default=10, help="timed creates per broker")
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100, help="per topic")
    parser.add_argument("--per-request", type=int, default=10, help="topics per CreateTopics")
    parser.add_argument("--no-scale", action="store_true", help="latency rows only")
    args = parser.parse_args()

    from support.kafka import KafkaNode, kafka_libs
    from support.server import KraftpyServer

    kafka_libs()
    with tempfile.TemporaryDirectory(prefix="kraftpy-vs-kafka-brokers-") as tmp:
        root = Path(tmp)
        kraftpy = KraftpyServer(root / "kraftpy", OVERRIDES, log_level="INFO")
        kafka = KafkaNode(root / "kafka-controller", roles="controller", node_id=1,
                          static_voter=True, overrides=OVERRIDES)
        kraftpy.start()
        kafka.format()
        kafka.start(timeout=120)

        def restart_kraftpy(changes: dict[str, str]) -> None:
            assert kraftpy.stop() == 0
            kraftpy.properties.update(changes)
            kraftpy.config_path.write_text(
                "".join(f"{k}={v}\n" for k, v in kraftpy.properties.items()))
            kraftpy.start(timeout=600)

        def restart_kafka(changes: dict[str, str]) -> None:
            kafka.stop()
            kafka.properties.update(changes)
            kafka._write_config()
            kafka.start(timeout=600)

        sides = [Side("kraftpy", kraftpy.controller, kraftpy.cluster_id(),
                      lambda: kraftpy.pid or 0, restart_kraftpy,
                      kraftpy.data_dir / "__cluster_metadata-0"),
                 Side("kafka", kafka.controller, kafka.cluster_id, lambda: kafka.pid or 0,
                      restart_kafka, kafka.metadata_dir())]
        try:
            print(f"{args.starts} broker starts per side, {args.creates} creates on each "
                  f"broker; {os.cpu_count()} cores", flush=True)
            for r in range(args.starts):
                for side in (sides if r % 2 == 0 else sides[::-1]):
                    broker, seconds = start_broker(side, root, 10 + r)
                    side.starts.append(seconds)
                    try:
                        measure_creates(side, broker.bootstrap, f"lat-{r}", args.creates)
                    finally:
                        broker.stop()
                    print(f"  round {r} {side.name}: RUNNING after {seconds:.2f} s, creates "
                          f"p50 {pct(side.creates[-args.creates:], 0.5) * 1000:.0f} ms",
                          flush=True)
            if not args.no_scale:
                for side in sides:
                    measure_scale(side, root, args.topics, args.partitions, args.per_request)
                    print(f"  scale {side.name}: {side.scale}", flush=True)
        finally:
            kafka.stop()
            kraftpy.stop()
        recovered = [ln for ln in kraftpy.log_text().splitlines() if " recovered " in ln]

    ours, theirs = sides
    n, c = len(ours.starts), len(ours.creates)
    print()
    print("| row | kraftpy | Kafka 4.1 controller | kraftpy / Kafka | target |")
    print("|---|---|---|---|---|")
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        print(row(f"broker start to RUNNING, {label} of {n}", pct(ours.starts, q),
                  pct(theirs.starts, q), "s", 1.0))
    for q, label in ((0.5, "p50"), (0.99, "p99")):
        print(row(f"CreateTopics -> broker Metadata, {label} of {c}", pct(ours.creates, q),
                  pct(theirs.creates, q), "ms", 1.0))
    if not args.no_scale:
        total = args.topics * args.partitions
        a, b = ours.scale, theirs.scale
        print(row(f"create {total:,} partitions ({args.topics:,} topics, "
                  f"{args.per_request} per request)", a["create s"], b["create s"], "s", None))
        print(row("resident memory after creating them", a["rss"], b["rss"], "MB", 1.5))
        print(row("snapshot size", a["snapshot bytes"], b["snapshot bytes"], "MB", 1.5))
        print(row("restart from the snapshot, to serving", a["restart s"], b["restart s"],
                  "s", 1.5))
        print(row("resident memory after the restart", a["rss restarted"],
                  b["rss restarted"], "MB", 1.5))
        print(row("new broker: start to RUNNING (catch-up)", a["catch-up s"], b["catch-up s"],
                  "s", 1.5))
        print(row("... while the controller snapshots every 5 s", a["catch-up snapshotting s"],
                  b["catch-up snapshotting s"], "s", None))
        print(f"\nnew broker fetched the snapshot: kraftpy {a['fetched snapshot']}, "
              f"Kafka {b['fetched snapshot']}; memory before creating: kraftpy "
              f"{a['rss before'] / 1e6:.1f} MB, Kafka {b['rss before'] / 1e6:.1f} MB")
    if recovered:
        print("kraftpy's own log, last start:", recovered[-1].split(" recovered ", 1)[1])
    return 0


if __name__ == "__main__":
    sys.exit(main())
