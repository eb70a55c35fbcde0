"""kraftpy beside Kafka 4.1's controller at 100,000 and 1,000,000 partitions, in one run.

    python benchmarks/vs_kafka_scale.py [--partitions 100000,1000000] [--skip-quorum]
                                        [--kafka-heap auto] [--per-request 10]

Each side is one controller on this machine, up for the whole of a size: `kraftpy serve`
(its default combined node; everything goes to its CONTROLLER listener) and a Kafka 4.1
controller-only node with a static voter set (the test suite's harness; serial GC, its heap
printed with the table: `--kafka-heap auto` gives it 1 GB per 200,000 partitions, at least 1
GB). Both run with the same overrides (snapshots off while the partitions are created, so
that the creation and the restart from the log measure the log alone; then on, see below).

Each side has six simulated brokers (ids 101-106) in a process of their own
(`--probe` mode of this script, so the measuring client never shares a GIL with the load):
each registers (BrokerRegistration v4, Kafka 4.1's features), heartbeats every 2 s
(broker.heartbeat.interval.ms) and reports itself caught up; and one client sends ApiVersions
v4 every 50 ms on one connection. Every round trip is timestamped; the rows give p50 / p99 over
the window of each step.

The steps, one side after the other (who goes first alternating step by step):
- create the partitions: topics of `--partitions-per-topic` (100) partitions, RF 3 over the six
  brokers, `--per-request` (10) topics per CreateTopics v7 sent to the CONTROLLER listener, one
  request in flight; partitions per second, and the round trips meanwhile;
- the round trips for 20 s after the creation, both sides idle; resident memory (VmRSS);
- restart from the log: SIGTERM, start, until a CreateTopics (validate only) of an existing
  topic is answered TOPIC_ALREADY_EXISTS: the controller is active and holds the image;
- snapshot: restarted with `metadata.log.max.snapshot.interval.ms=5000`, the snapshot of the
  whole image (size; write time: from its `.checkpoint.part` appearing to its `.checkpoint`,
  polled every 10 ms; the round trips meanwhile);
- restart from the snapshot (the interval back to one hour), resident memory after it;
- a real Kafka 4.1 broker (process.roles=broker, a heap as large as the controller's, the JVM
  options of Kafka's own scripts) from its process start to its own "Transitioning from
  RECOVERY to RUNNING": once untimed on
  each side (a warm machine), then four times, each side first twice, the mean of the four;
- fence: broker 101 (the first replica, so the leader, of a sixth of the partitions) stops
  heartbeating; from its last answered heartbeat to the fence record (its
  BrokerRegistrationChangeRecord, written after every leader move) in the controller's log
  on disk (its bytes, found in the segments as they grow), and the round trips meanwhile;
  then it heartbeats again.

Then, unless `--skip-quorum`, the largest size again on three voters per side (static
`controller.quorum.voters`, same overrides, Kafka's retention of the metadata log set to
1 MB so that a snapshot trims it): the creation, a rolling restart with snapshots after 1 MB of
records (no time trigger), 10,000 more partitions so that every voter of both sides writes one,
then a follower stopped, its data wiped and
started again, until the leader's DescribeQuorum shows it caught up (and whether it fetched a
snapshot), and, 20 s later (that follower has loaded what it fetched), kill -9 of the leader
until a heartbeat is answered by a new leader.

Targets: every time and memory row at or below Kafka's (kraftpy / Kafka <= 1.0), resident
memory at one million partitions at most half of Kafka's, every p99 round trip <= 50 ms.
The machine's load average is printed with the table: a shared machine moves every number.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

HOST = "127.0.0.1"
FIRST_BROKER = 101
BROKERS = 6
HEARTBEAT_INTERVAL_S = 2.0  # broker.heartbeat.interval.ms
API_VERSIONS_INTERVAL_S = 0.05
TOPIC_ALREADY_EXISTS = 36
RUNNING = "Transitioning from RECOVERY to RUNNING"
NO_SNAPSHOTS = {"metadata.log.max.record.bytes.between.snapshots": str(1 << 50),
                "metadata.log.max.snapshot.interval.ms": "3600000"}
SNAPSHOT_SOON = {"metadata.log.max.snapshot.interval.ms": "5000"}
# One snapshot of the whole image after a restart, then none for hours (NoOps every 500 ms
# take hours to add a MB): a quorum of three does not write a million partitions every 5 s.
SNAPSHOT_ONCE = {"metadata.log.max.record.bytes.between.snapshots": str(1 << 20),
                 "metadata.log.max.snapshot.interval.ms": "0"}
BROKER_REGISTRATION_CHANGE = 17


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0-100); nan when there are none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered), max(1, math.ceil(q / 100 * len(ordered)))) - 1]


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def wait_until(check: Callable[[], Any], timeout: float, what: str, step: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout:.0f} s")
        time.sleep(step)


# --- the probe process: six brokers and an ApiVersions client -------------------------------

def probe_main(spec: dict[str, Any]) -> None:
    """Runs in its own process (`--probe`): writes one JSON line per round trip to
    spec["samples"] and reads commands ("pause <id>", "resume <id>") from stdin."""
    import trio
    from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
    from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
    from kraftpy.protocol.messages.broker_registration_request import (
        BrokerRegistrationRequest,
        Feature,
        Listener,
    )
    from vs_kafka import FEATURES
    from vs_kafka_quorum import FAILURES, Channel, Finder, Link

    voters = {int(k): (h, p) for k, (h, p) in spec["voters"].items()}
    cluster_id = spec["cluster_id"]
    out = open(spec["samples"], "a", buffering=1)  # noqa: SIM115 - open for the process
    paused: set[int] = set()
    unfenced: set[int] = set()
    leader = [min(voters)]

    def note(**fields: Any) -> None:
        out.write(json.dumps(fields) + "\n")

    async def broker(broker_id: int) -> None:
        finder = Finder(voters, cluster_id, broker_id)
        channel = Channel(finder, f"broker-{broker_id}-heartbeat-channel-manager")
        reg = await channel.call(BrokerRegistrationRequest(
            broker_id=broker_id, cluster_id=cluster_id, incarnation_id=uuid.uuid4(),
            listeners=[Listener(name="PLAINTEXT", host=HOST, port=20000 + broker_id,
                                security_protocol=0)],
            features=[Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                      for n, lo, hi in FEATURES],
            log_dirs=[uuid.uuid4()]), 4)
        if reg.error_code:
            note(kind="error", what=f"broker {broker_id} registration {reg.error_code}")
            return
        while True:
            if broker_id in paused:
                await trio.sleep(0.05)
                continue
            sent = time.time()
            beat = await channel.call(BrokerHeartbeatRequest(
                broker_id=broker_id, broker_epoch=reg.broker_epoch, want_fence=False,
                current_metadata_offset=1 << 40), 1)
            done = time.time()
            leader[0] = channel.node
            note(kind="hb", t=done, ms=(done - sent) * 1000, e=beat.error_code, b=broker_id,
                 n=channel.node, fenced=beat.is_fenced)
            if not beat.error_code and not beat.is_fenced and broker_id not in unfenced:
                unfenced.add(broker_id)
                if len(unfenced) == BROKERS:
                    note(kind="ready", t=done)
            await trio.sleep(0.1 if beat.is_fenced or beat.error_code
                             else HEARTBEAT_INTERVAL_S)

    async def api_versions() -> None:
        link: Link | None = None
        node = -1
        request = ApiVersionsRequest(client_software_name="kraftpy-bench",
                                     client_software_version="1.0")
        while True:
            await trio.sleep(API_VERSIONS_INTERVAL_S)
            try:
                if link is None or node != leader[0]:
                    if link is not None:
                        await link.aclose()
                    node = leader[0]
                    link = await Link.open(voters[node], "kraftpy-bench-api-versions")
                sent = time.time()
                answer = await link.call(request, 4, 30.0)
                done = time.time()
                note(kind="av", t=done, ms=(done - sent) * 1000, e=answer.error_code, n=node)
            except FAILURES:
                if link is not None:
                    await link.aclose()
                link = None

    async def commands(token: Any) -> None:
        def read() -> None:
            for line in sys.stdin:
                word, _, arg = line.strip().partition(" ")
                if word == "pause":
                    trio.from_thread.run_sync(paused.add, int(arg), trio_token=token)
                elif word == "resume":
                    trio.from_thread.run_sync(paused.discard, int(arg), trio_token=token)
            trio.from_thread.run_sync(scope.cancel, trio_token=token)

        await trio.to_thread.run_sync(read, abandon_on_cancel=True)

    async def run() -> None:
        nonlocal scope
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:
                for i in range(BROKERS):
                    nursery.start_soon(broker, FIRST_BROKER + i)
                nursery.start_soon(api_versions)
                nursery.start_soon(commands, trio.lowlevel.current_trio_token())

    scope: Any = None
    trio.run(run)


class Probe:
    """The probe process of one side, from the main process."""

    def __init__(self, name: str, voters: dict[int, tuple[str, int]], cluster_id: str,
                 root: Path) -> None:
        self.name = name
        self.path = root / f"{name}-samples.jsonl"
        self.path.touch()
        spec = {"voters": {str(k): v for k, v in voters.items()}, "cluster_id": cluster_id,
                "samples": str(self.path)}
        self.proc = subprocess.Popen([sys.executable, __file__, "--probe", json.dumps(spec)],
                                     stdin=subprocess.PIPE, text=True)
        self._read = 0
        self.samples: list[dict[str, Any]] = []
        wait_until(lambda: self._ready(), 300, f"{name}: six unfenced brokers", 0.1)

    def _ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"{self.name}: the probe process exited {self.proc.returncode}")
        return any(s["kind"] == "ready" for s in self.poll())

    def poll(self) -> list[dict[str, Any]]:
        """New samples since the last poll (all of them are kept in `samples`)."""
        with self.path.open() as f:
            f.seek(self._read)
            data = f.read()
        complete = data[:data.rfind("\n") + 1]
        self._read += len(complete.encode())
        new = [json.loads(line) for line in complete.splitlines() if line]
        self.samples += new
        errors = [s for s in new if s["kind"] == "error"]
        if errors:
            raise RuntimeError(f"{self.name}: {errors[0]['what']}")
        return new

    def command(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def window(self, kind: str, start: float, end: float) -> list[float]:
        """Round trips (ms) of `kind` answered within [start, end] without an error."""
        self.poll()
        return [s["ms"] for s in self.samples
                if s["kind"] == kind and start <= s["t"] <= end and not s.get("e")]

    def last_heartbeat(self, broker: int) -> float:
        self.poll()
        return max(s["t"] for s in self.samples
                   if s["kind"] == "hb" and s["b"] == broker and not s["e"])

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


# --- the controllers -------------------------------------------------------------------------

class Node:
    """One controller process of either side."""

    name: str
    node_id: int
    controller_port: int
    properties: dict[str, str]

    @property
    def pid(self) -> int:
        raise NotImplementedError

    def launch(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def kill(self) -> None:
        raise NotImplementedError

    def metadata_dir(self) -> Path:
        raise NotImplementedError

    def wipe(self) -> None:
        raise NotImplementedError

    def cluster_id(self) -> str:
        raise NotImplementedError


class KraftpyNode(Node):
    def __init__(self, root: Path, overrides: dict[str, str], **kwargs: Any) -> None:
        from support.server import KraftpyServer

        self.name = "kraftpy"
        self.server = kwargs.pop("server", None) or KraftpyServer(root, overrides,
                                                                 log_level="INFO", **kwargs)
        self.node_id = int(self.server.properties["node.id"])
        self.controller_port = self.server.controller_port
        self.properties = self.server.properties

    @property
    def pid(self) -> int:
        return self.server.pid or 0

    @property
    def running(self) -> bool:
        return self.server.running

    def launch(self) -> None:
        self.server.config_path.write_text("".join(f"{k}={v}\n"
                                                   for k, v in self.properties.items()))
        self.server.launch()

    def stop(self) -> None:
        if self.server.running:
            self.server.stop(600)

    def kill(self) -> None:
        self.server.kill()

    def metadata_dir(self) -> Path:
        return self.server.data_dir / "__cluster_metadata-0"

    def wipe(self) -> None:
        shutil.rmtree(self.server.data_dir, ignore_errors=True)

    def cluster_id(self) -> str:
        return self.server.cluster_id()


class KafkaController(Node):
    def __init__(self, root: Path, overrides: dict[str, str], heap: str, **kwargs: Any
                 ) -> None:
        from support.kafka import KafkaNode

        self.name = "Kafka"
        self.node = KafkaNode(root, roles="controller", overrides=overrides,
                              jvm_opts=jvm_opts(heap), **kwargs)
        self.node_id = self.node.node_id
        self.controller_port = self.node.controller_port or 0
        self.properties = self.node.properties

    @property
    def pid(self) -> int:
        return self.node.pid or 0

    @property
    def running(self) -> bool:
        return self.node.running

    def launch(self) -> None:
        self.node._write_config()
        self.node.start(wait=False)

    def stop(self) -> None:
        self.node.stop(120)

    def kill(self) -> None:
        self.node.kill()

    def metadata_dir(self) -> Path:
        return self.node.metadata_dir()

    def wipe(self) -> None:
        shutil.rmtree(self.node.data_dir, ignore_errors=True)
        self.node.format()

    def cluster_id(self) -> str:
        return self.node.cluster_id


def jvm_opts(heap: str) -> tuple[str, ...]:
    """The suite's node options with another heap."""
    from support.kafka import NODE_JVM_OPTS

    return (f"-Xms{heap}", f"-Xmx{heap}", *(o for o in NODE_JVM_OPTS
                                          if not o.startswith(("-Xms", "-Xmx"))))


# A real broker runs as Kafka's scripts start one (kafka-run-class.sh's performance options:
# G1, full JIT). Under the suite's serial collector a full collection of the broker's heap
# landed in some starts and not others, on either side (its metadata publishing took 0.8 s
# or 1.8 s at a million partitions), and decided the row.
BROKER_JVM_OPTS = ("-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
                   "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
                   "-Djava.awt.headless=true")


def kafka_heap(arg: str, partitions: int) -> str:
    if arg != "auto":
        return arg
    return f"{max(1, math.ceil(partitions / 200_000))}g"


def connection(port: int, timeout: float = 600.0) -> Any:
    from kraftpy.tools.kafka_connection import KafkaConnection

    return KafkaConnection((HOST, port), timeout=timeout)


def create_request(names: Sequence[str], partitions: int, *, validate_only: bool = False
                   ) -> Any:
    from kraftpy.protocol.messages.create_topics_request import (
        CreatableTopic,
        CreateTopicsRequest,
    )

    return CreateTopicsRequest(topics=[CreatableTopic(name=n, num_partitions=partitions,
                                                      replication_factor=3) for n in names],
                               timeout_ms=600_000, validate_only=validate_only)


def active_with_image(port: int) -> bool:
    """The controller at `port` is active and knows the first topic."""
    from kraftpy.tools.kafka_connection import ClientError

    try:
        with connection(port, 5.0) as conn:
            answer = conn.request(create_request(["scale-00000"], 1, validate_only=True), 7)
            return answer.topics[0].error_code == TOPIC_ALREADY_EXISTS
    except (ClientError, OSError):
        return False


def restart(node: Node, changes: dict[str, str] | None = None, timeout: float = 1800.0
            ) -> float:
    """Stop, change properties, start; seconds from the launch until active with the image."""
    node.stop()
    node.properties.update(changes or {})
    started = time.monotonic()
    node.launch()
    wait_until(lambda: active_with_image(node.controller_port), timeout,
               f"{node.name} active after the restart", 0.05)
    return time.monotonic() - started


class SnapshotWatch(threading.Thread):
    """When each snapshot's `.checkpoint.part` and `.checkpoint` first appear (polled)."""

    def __init__(self, directory: Path) -> None:
        super().__init__(daemon=True)
        self.directory = directory
        self.parts: dict[str, float] = {}  # snapshot id (offset-epoch) -> first seen
        self.finals: dict[str, float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.01):
            now = time.time()
            try:
                names = os.listdir(self.directory)
            except OSError:
                continue
            for name in names:
                sid = name[:31]
                if name.endswith(".checkpoint.part"):
                    self.parts.setdefault(sid, now)
                elif name.endswith(".checkpoint") and len(name) == 42:
                    self.finals.setdefault(sid, now)

    def stop(self) -> None:
        self.done.set()
        self.join(5)


class LogTail:
    """Bytes appended to a node's metadata log segments since `start()`."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.positions: dict[Path, int] = {}
        self.tail = b""  # the last bytes read, so that a record cut by a read is still seen

    def start(self) -> None:
        for path in self.directory.glob("*.log"):
            self.positions[path] = path.stat().st_size

    def appended(self) -> bytes:
        data = [self.tail]
        for path in sorted(self.directory.glob("*.log")):
            at = self.positions.get(path, 0)
            with path.open("rb") as f:
                f.seek(at)
                chunk = f.read()
            self.positions[path] = at + len(chunk)
            data.append(chunk)
        joined = b"".join(data)
        self.tail = joined[-64:]
        return joined


def fenced_in_log(tail: LogTail, broker: int) -> bool:
    """The broker's fence record is in what was appended: found in the raw bytes (metadata
    batches are not compressed), so that following half a million records costs this
    process next to nothing. A BrokerRegistrationChangeRecord v0's value: frame version 1,
    type 17, version 0, BrokerId, BrokerEpoch (8 bytes), then its tagged fields, Fenced
    (tag 0, one byte) first: 1 for a fence."""
    pattern = re.compile(re.escape(b"\x01\x11\x00" + struct.pack(">i", broker))
                         + b".{8}[\x01-\x03]\x00\x01\x01", re.DOTALL)
    return pattern.search(tail.appended()) is not None


# --- one side at one size ----------------------------------------------------------------------

@dataclass
class Side:
    name: str
    node: Node
    probe: Probe | None = None
    rows: dict[str, Any] = field(default_factory=dict)


def p(values: list[float]) -> tuple[float, float, int]:
    return percentile(values, 50), percentile(values, 99), len(values)


def round_trips(side: Side, key: str, start: float, end: float) -> None:
    assert side.probe is not None
    side.rows[f"{key} av"] = p(side.probe.window("av", start, end))
    side.rows[f"{key} hb"] = p(side.probe.window("hb", start, end))


def create(side: Side, topics: int, per_topic: int, per_request: int,
           find_leader: Callable[[], Node] | None = None, *, prefix: str = "scale",
           timed: bool = True) -> None:
    """CreateTopics in requests of `per_request` topics. With `find_leader` (a quorum), a
    request answered NOT_CONTROLLER goes again to the leader found then, as a broker's
    forwarding would: a leader change during the creation is counted, not fatal."""
    from kraftpy.protocol.error_codes import ErrorCode
    from vs_kafka import tree_cpu

    cpu = tree_cpu(side.node.pid)
    start = time.time()
    changes = 0
    conn = connection(side.node.controller_port)
    try:
        first = 0
        while first < topics:
            names = [f"{prefix}-{i:05d}" for i in range(first, min(first + per_request, topics))]
            try:
                answer = conn.request(create_request(names, per_topic), 7)
                bad = [(t.name, t.error_code) for t in answer.topics
                       if t.error_code not in (ErrorCode.NONE, TOPIC_ALREADY_EXISTS)]
            except (OSError, EOFError) as exc:
                if find_leader is None:
                    raise
                bad = [("*", str(exc))]
            if bad and find_leader is not None and changes < 20 and all(
                    code == ErrorCode.NOT_CONTROLLER or isinstance(code, str)
                    for _, code in bad):
                changes += 1
                conn.close()
                time.sleep(0.5)
                side.node = wait_until(find_leader, 120, f"{side.name}: a leader", 0.2)
                conn = connection(side.node.controller_port)
                continue  # the same topics again (those created already answer EXISTS)
            if bad:
                raise RuntimeError(f"{side.name}: CreateTopics: {bad[:3]}")
            first += per_request
    finally:
        conn.close()
    if not timed:
        return
    side.rows["create leader changes"] = changes
    end = time.time()
    side.rows["create s"] = end - start
    side.rows["create cpu s"] = tree_cpu(side.node.pid) - cpu
    round_trips(side, "during creation", start, end)


def snapshot(side: Side, partitions: int) -> None:
    watch = SnapshotWatch(side.node.metadata_dir())
    watch.start()
    try:
        restart(side.node, SNAPSHOT_SOON)

        def whole() -> tuple[str, float] | None:
            for sid, seen in sorted(watch.finals.items()):
                path = side.node.metadata_dir() / f"{sid}.checkpoint"
                if sid in watch.parts and path.exists() and path.stat().st_size > partitions * 30:
                    return sid, seen
            return None

        sid, seen = wait_until(whole, 1800, f"{side.name}: a snapshot of the image", 0.1)
    finally:
        watch.stop()
    side.rows["snapshot bytes"] = (side.node.metadata_dir() / f"{sid}.checkpoint").stat().st_size
    began = watch.parts[sid]
    side.rows["snapshot s"] = seen - began
    round_trips(side, "during the snapshot", began, seen)


def broker_start(side: Side, root: Path, heap: str, node_id: int, timed: bool = True) -> None:
    from support.kafka import KafkaNode
    from vs_kafka_brokers import log_time

    broker = KafkaNode(root / f"{side.name}-broker-{node_id}", roles="broker", node_id=node_id,
                       voters=[f"{side.node.node_id}@{HOST}:{side.node.controller_port}"],
                       cluster_id=side.node.cluster_id(),
                       jvm_opts=(f"-Xms{heap}", f"-Xmx{heap}", *BROKER_JVM_OPTS))
    broker.format()
    started = time.time()
    broker.start(wait=False)
    try:
        broker.wait_for_log(RUNNING, 1800)
        if not timed:
            return
        line = next(ln for ln in broker.log_text().splitlines() if RUNNING in ln)
        runs = side.rows.setdefault("broker runs", [])
        runs.append(log_time(line) - started)
        side.rows["broker s"] = sum(runs) / len(runs)
    finally:
        broker.stop()


def fence(side: Side) -> None:
    assert side.probe is not None
    tail = LogTail(side.node.metadata_dir())
    tail.start()
    side.probe.command(f"pause {FIRST_BROKER}")
    time.sleep(0.5)
    last = side.probe.last_heartbeat(FIRST_BROKER)
    wait_until(lambda: fenced_in_log(tail, FIRST_BROKER), 600,
               f"{side.name}: broker {FIRST_BROKER} fenced", 0.02)
    seen = time.time()
    side.rows["fence s"] = seen - last
    round_trips(side, "during the fence", last, seen)
    side.probe.command(f"resume {FIRST_BROKER}")
    probe = side.probe

    def unfenced() -> bool:
        probe.poll()
        return any(s["kind"] == "hb" and s["b"] == FIRST_BROKER and not s["e"]
                   and not s["fenced"] and s["t"] > seen for s in probe.samples[-200:])

    wait_until(unfenced, 600, f"{side.name}: broker {FIRST_BROKER} unfenced again", 0.1)


def settle(sides: list[Side], quiet: float = 0.15, timeout: float = 120.0) -> None:
    """Wait (at most `timeout` s) until the nodes together use at most `quiet` of a core over
    a second: a JVM just restarted with a large image goes on compiling and collecting for a
    while after it answers, and a step timed then on the other side would share the machine
    with it."""
    from server import cpu_seconds

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = [pid for pid in (side.node.pid for side in sides) if pid]
        try:
            before = sum(cpu_seconds(pid) for pid in pids)
            time.sleep(1.0)
            used = sum(cpu_seconds(pid) for pid in pids) - before
        except (FileNotFoundError, ProcessLookupError):
            return
        if used <= quiet:
            return


def both(sides: list[Side], step: int, what: Callable[[Side], None], label: str) -> None:
    """`what` on each side, the first alternating with `step`. A step that times out on one
    side is reported (`timed out`) and the run goes on."""
    for side in (sides if step % 2 == 0 else sides[::-1]):
        settle(sides)
        began = time.monotonic()
        try:
            what(side)
        except TimeoutError as exc:
            side.rows.setdefault("timed out", []).append(f"{label}: {exc}")
            print(f"  {label} {side.name}: TIMED OUT ({exc})", flush=True)
            continue
        print(f"  {label} {side.name}: {time.monotonic() - began:.1f} s "
              f"(load {load_average()})", flush=True)


def single_node(root: Path, partitions: int, args: argparse.Namespace) -> list[Side]:
    from support.server import free_port

    heap = kafka_heap(args.kafka_heap, partitions)
    per_topic = args.partitions_per_topic
    topics = partitions // per_topic
    overrides = dict(NO_SNAPSHOTS)
    sides = [Side("kraftpy", KraftpyNode(root / "kraftpy", overrides)),
             Side("Kafka", KafkaController(root / "kafka", overrides, heap, static_voter=True,
                                           controller_port=free_port()))]
    try:
        kafka = sides[1].node
        assert isinstance(kafka, KafkaController)
        kafka.node.format()
        for side in sides:
            side.node.launch()
        for side in sides:
            wait_until(lambda s=side: _answers(s.node.controller_port), 300,
                       f"{side.name} listening", 0.1)
            side.probe = Probe(side.name, {side.node.node_id: (HOST, side.node.controller_port)},
                               side.node.cluster_id(), root)
        print(f"{partitions:,} partitions: both up, brokers registered (Kafka heap {heap})",
              flush=True)
        both(sides, 0, lambda s: create(s, topics, per_topic, args.per_request), "created")
        time.sleep(5)
        quiet = time.time()
        time.sleep(20)
        for side in sides:
            round_trips(side, "after creation", quiet, time.time())
            side.rows["rss"] = rss_bytes(side.node.pid)
        both(sides, 1, lambda s: s.rows.__setitem__("restart log s", restart(s.node)),
             "restarted from the log")
        both(sides, 2, lambda s: snapshot(s, partitions), "snapshot")
        both(sides, 3, lambda s: s.rows.__setitem__("restart snapshot s", restart(
            s.node, {"metadata.log.max.snapshot.interval.ms": "3600000"})),
             "restarted from the snapshot")
        time.sleep(3)
        for side in sides:
            side.rows["rss restarted"] = rss_bytes(side.node.pid)
        # Once untimed on each side (the first broker JVM of a run meets a colder machine),
        # then four times, each side first twice: one start varies by seconds (a JVM loading
        # a million partitions), so two were too few to tell the sides apart.
        # (A node id of its own each: both controllers refuse another incarnation of a
        # broker id for a session timeout after that broker's last heartbeat.)
        both(sides, 4, lambda s: broker_start(s, root / "warm", heap, 900, timed=False),
             "broker (warm-up)")
        for i, name in enumerate(("first", "second", "third", "fourth")):
            both(sides, 5 + i, lambda s, n=name, i=i: broker_start(s, root / n, heap, 901 + i),
                 "broker")
        both(sides, 5, fence, "fence")
    finally:
        for side in sides:
            if side.probe is not None:
                side.probe.close()
            side.node.stop()
    sides[1].rows["heap"] = heap
    return sides


def _answers(port: int) -> bool:
    from support.server import probe

    return probe(HOST, port)


# --- three voters ------------------------------------------------------------------------------

def leader_of(side: Side) -> int:
    """The node that answers heartbeats now (the probe's newest answers)."""
    assert side.probe is not None
    side.probe.poll()
    answered = [s for s in side.probe.samples if s["kind"] == "hb" and not s["e"]]
    return int(answered[-1]["n"])


def describe_quorum(port: int) -> Any:
    from kraftpy.protocol.messages.describe_quorum_request import (
        DescribeQuorumRequest,
        PartitionData,
        TopicData,
    )

    with connection(port, 10.0) as conn:
        return conn.request(DescribeQuorumRequest(topics=[TopicData(
            topic_name="__cluster_metadata", partitions=[PartitionData()])]), 2
        ).topics[0].partitions[0]


def raft_leader(nodes: dict[int, Node]) -> int | None:
    """The voter that says, in DescribeQuorum, that it leads (the probe's heartbeats lag a
    leader change by up to their interval, and a follower's DescribeQuorum answer carries
    NOT_LEADER_OR_FOLLOWER with no high watermark)."""
    from kraftpy.tools.kafka_connection import ClientError

    for i, node in nodes.items():
        try:
            answer = describe_quorum(node.controller_port)
        except (ClientError, OSError):
            continue
        if answer.error_code == 0 and answer.leader_id == i:
            return i
    return None


def follower_catch_up(side: Side, nodes: dict[int, Node]) -> None:
    from kraftpy.tools.kafka_connection import ClientError

    leader = wait_until(lambda: raft_leader(nodes), 600, f"{side.name}: a raft leader", 0.5)
    follower = next(i for i in nodes if i != leader)
    node = nodes[follower]
    node.stop()
    node.wipe()

    def committed() -> int | None:
        nonlocal leader
        try:
            answer = describe_quorum(nodes[leader].controller_port)
        except (ClientError, OSError):
            return None
        if answer.error_code != 0:  # the leadership moved meanwhile: ask who leads now
            leader = raft_leader({i: n for i, n in nodes.items() if i != follower}) or leader
            return None
        return int(answer.high_watermark)

    target = wait_until(committed, 600, f"{side.name}: the leader's high watermark", 0.5)
    started = time.monotonic()
    launched_ms = time.time() * 1000
    node.launch()

    def fetched_snapshot() -> bool:
        return any(not p.name.startswith("0" * 20 + "-")  # not the raft bootstrap one
                   for p in node.metadata_dir().glob("*.checkpoint"))

    def caught_up() -> bool:
        """The follower holds the snapshot it fetched, and the leader heard from it since its
        launch at a log end that reaches what the leader had committed then. (A leader also
        completes a fetch the old incarnation left parked, at the time it completes it, as
        Kafka's does: the leader's view alone can name the old incarnation's log end.)"""
        if not fetched_snapshot():
            return False
        try:
            quorum = describe_quorum(nodes[leader].controller_port)
        except (ClientError, OSError):
            return False
        return any(v.replica_id == follower and v.last_fetch_timestamp >= launched_ms
                   and v.log_end_offset >= target for v in quorum.current_voters)

    wait_until(caught_up, 600, f"{side.name}: follower {follower} caught up", 0.1)
    side.rows["follower s"] = time.monotonic() - started
    side.rows["follower snapshot"] = fetched_snapshot()


def failover(side: Side, nodes: dict[int, Node]) -> None:
    assert side.probe is not None
    leader = wait_until(lambda: raft_leader(nodes), 600, f"{side.name}: a raft leader", 0.5)
    killed = time.time()
    nodes[leader].kill()

    def new_leader() -> float | None:
        assert side.probe is not None
        side.probe.poll()
        times = [s["t"] for s in side.probe.samples if s["kind"] == "hb" and not s["e"]
                 and s["t"] > killed and s["n"] != leader]
        return min(times) if times else None

    side.rows["failover s"] = wait_until(new_leader, 600, f"{side.name}: a new leader",
                                         0.05) - killed
    nodes[leader].launch()


def quorum(root: Path, partitions: int, args: argparse.Namespace) -> list[Side]:
    from support.kafka import random_cluster_id
    from support.server import free_port, quorum_servers

    heap = kafka_heap(args.kafka_heap, partitions)
    # Retention of 1 MB in segments of 8 MB (Kafka's smallest): a snapshot trims the log, so
    # a wiped follower can only catch up from a snapshot.
    overrides = {**NO_SNAPSHOTS, "metadata.max.retention.bytes": "1048576",
                 "metadata.log.segment.bytes": str(8 << 20)}
    servers = quorum_servers(root / "kraftpy", 3, overrides, log_level="INFO")
    ours = {int(s.properties["node.id"]): KraftpyNode(root, {}, server=s) for s in servers}
    cluster_id = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = [f"{i}@{HOST}:{port}" for i, port in ports.items()]
    theirs: dict[int, Node] = {i: KafkaController(root / f"kafka{i}", overrides, heap,
                                                 node_id=i, cluster_id=cluster_id,
                                                 voters=voters, controller_port=port)
                               for i, port in ports.items()}
    sides = [Side("kraftpy", ours[1]), Side("Kafka", theirs[1])]
    groups: dict[str, dict[int, Node]] = {"kraftpy": dict(ours), "Kafka": theirs}
    try:
        for node in theirs.values():
            assert isinstance(node, KafkaController)
            node.node.format()
        for group in groups.values():
            for node in group.values():
                node.launch()
        for side in sides:
            group = groups[side.name]
            for node in group.values():
                wait_until(lambda n=node: _answers(n.controller_port), 300,
                           f"{side.name} listening", 0.1)
            side.probe = Probe(f"{side.name}-quorum",
                               {i: (HOST, n.controller_port) for i, n in group.items()},
                               side.node.cluster_id(), root)
        print(f"{partitions:,} partitions on three voters each: up", flush=True)

        def create_on_leader(side: Side, topics: int | None = None, prefix: str = "scale"
                             ) -> None:
            side.node = groups[side.name][leader_of(side)]

            def new_leader() -> Node | None:
                time.sleep(1.0)  # the probe's heartbeats to learn who answers now
                try:
                    return groups[side.name][leader_of(side)]
                except (IndexError, KeyError):
                    return None

            create(side, topics or partitions // args.partitions_per_topic,
                   args.partitions_per_topic, args.per_request, new_leader, prefix=prefix,
                   timed=topics is None)

        both(sides, 0, create_on_leader, "created (quorum)")
        for side in sides:  # a snapshot each, so that the log is trimmed below one
            for node in groups[side.name].values():
                node.properties.update(SNAPSHOT_ONCE)
        both(sides, 1, lambda s: _rolling_restart(s, groups[s.name]), "rolling restart")

        def snapshot_on_every_voter(side: Side) -> None:
            """10,000 more partitions (over 1 MB of records): the bytes trigger fires on every
            voter (Kafka's counts only what its loader replays after catching up), and a
            snapshot trims each log."""
            create_on_leader(side, topics=100, prefix="more")
            for i, node in groups[side.name].items():
                wait_until(lambda n=node: any(n.metadata_dir().glob("*.checkpoint")), 600,
                           f"{side.name}: a snapshot on voter {i}", 0.2)

        both(sides, 2, snapshot_on_every_voter, "a snapshot on every voter")
        time.sleep(10)
        both(sides, 3, lambda s: follower_catch_up(s, groups[s.name]), "follower caught up")
        # A settled quorum fails over: the voter that has just fetched a snapshot loads it
        # first (a million partitions: about 8 s on kraftpy), whichever voter wins.
        time.sleep(20)
        both(sides, 4, lambda s: failover(s, groups[s.name]), "failover")
    finally:
        for side in sides:
            if side.probe is not None:
                side.probe.close()
        for group in groups.values():
            for node in group.values():
                node.stop()
    sides[1].rows["heap"] = heap
    return sides


def _rolling_restart(side: Side, nodes: dict[int, Node]) -> None:
    """Each voter restarted in turn with the new properties (the quorum stays up)."""
    for node in nodes.values():
        node.stop()
        node.launch()
        wait_until(lambda n=node: _answers(n.controller_port), 1800, "a voter back", 0.1)
        time.sleep(2)
    wait_until(lambda: any(active_with_image(n.controller_port) for n in nodes.values()),
               1800, f"{side.name}: an active leader", 0.2)


# --- the table ---------------------------------------------------------------------------------

def fmt(value: Any, unit: str) -> str:
    if isinstance(value, tuple):
        p50, p99, n = value
        return "-" if math.isnan(p50) else f"{p50:,.1f} / {p99:,.1f} ms ({n})"
    if unit == "MB":
        return f"{value / 1e6:,.1f} MB"
    if unit == "/s":
        return f"{value:,.0f}/s"
    return f"{value:,.2f} s"


def table(title: str, ours: dict[str, Any], theirs: dict[str, Any], partitions: int) -> str:
    lines = [f"\n{title}\n", "| row | kraftpy | Kafka 4.1 controller | kraftpy / Kafka | target |",
             "|---|---|---|---|---|"]

    def row(name: str, key: str, unit: str, target: float | None) -> None:
        if key not in ours or key not in theirs:
            return
        a, b = ours[key], theirs[key]
        if isinstance(a, tuple):
            verdict = "met" if max(a[1], 0) <= 50 or math.isnan(a[1]) else "MISSED"
            lines.append(f"| {name} | {fmt(a, unit)} | {fmt(b, unit)} | | p99 <= 50 ms "
                         f"{verdict} |")
            return
        if unit == "/s":
            a, b = partitions / a, partitions / b
            ratio = b / a  # time ratio
        else:
            ratio = a / b if b else math.inf
        goal = "" if target is None else (f"<= {target:g}x "
                                          f"{'met' if ratio <= target else 'MISSED'}")
        lines.append(f"| {name} | {fmt(a, unit)} | {fmt(b, unit)} | {ratio:.2f}x | {goal} |")

    half = 0.5 if partitions >= 1_000_000 else 1.0
    row("create the partitions (time ratio)", "create s", "/s", 1.0)
    row("... controller CPU during the creation", "create cpu s", "s", None)
    for key in ("during creation", "after creation", "during the snapshot", "during the fence"):
        row(f"ApiVersions p50 / p99 (samples), {key}", f"{key} av", "", None)
        row(f"BrokerHeartbeat p50 / p99 (samples), {key}", f"{key} hb", "", None)
    row("resident memory after the creation", "rss", "MB", half)
    row("restart from the log, to active with the image", "restart log s", "s", 1.0)
    row("snapshot size (the same records; kraftpy's has its own producer-id block)",
        "snapshot bytes", "MB", None)
    row("snapshot write time", "snapshot s", "s", 1.0)
    row("restart from the snapshot", "restart snapshot s", "s", 1.0)
    row("resident memory after the restart", "rss restarted", "MB", half)
    row("a Kafka 4.1 broker: start to RUNNING (mean of four)", "broker s", "s", 1.0)
    row("fence: last heartbeat to leaders moved", "fence s", "s", 1.0)
    row("three voters: follower wiped, to caught up", "follower s", "s", 1.0)
    row("three voters: kill -9 of the leader to a new leader", "failover s", "s", 1.0)
    for name, rows in (("kraftpy", ours), ("Kafka", theirs)):
        if rows.get("create leader changes"):
            lines.append(f"\n{name}: the leader changed {rows['create leader changes']} times "
                         "during the creation (each request answered NOT_CONTROLLER sent again "
                         "to the new leader)")
        for what in rows.get("timed out", []):
            lines.append(f"\n{name} timed out: {what}")
    if ours.get("broker runs") and theirs.get("broker runs"):
        lines.append("\nthe broker starts, in order: kraftpy " + ", ".join(
            f"{t:.2f}" for t in ours["broker runs"]) + " s; Kafka " + ", ".join(
            f"{t:.2f}" for t in theirs["broker runs"]) + " s")
    if "follower snapshot" in ours:
        lines.append(f"\nthe follower fetched a snapshot: kraftpy {ours['follower snapshot']}, "
                     f"Kafka {theirs['follower snapshot']}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", default="100000,1000000",
                        help="sizes, comma separated (e.g. 100000 alone)")
    parser.add_argument("--partitions-per-topic", type=int, default=100)
    parser.add_argument("--per-request", type=int, default=10, help="topics per CreateTopics")
    parser.add_argument("--kafka-heap", default="auto")
    parser.add_argument("--skip-quorum", action="store_true")
    parser.add_argument("--quorum-only", action="store_true",
                        help="only the three-voter part, at the largest size")
    parser.add_argument("--work-dir", help="keep the nodes' directories and logs here")
    parser.add_argument("--probe", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.probe:
        probe_main(json.loads(args.probe))
        return 0

    from support.kafka import kafka_libs

    kafka_libs()
    sizes = [int(s) for s in args.partitions.split(",")]
    out = [f"{os.cpu_count()} cores, load average {load_average()} at the start"]
    with contextlib.ExitStack() as stack:
        if args.work_dir:
            tmp = args.work_dir
            Path(tmp).mkdir(parents=True, exist_ok=True)
        else:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(
                prefix="kraftpy-vs-kafka-scale-"))
        for size in ([] if args.quorum_only else sizes):
            ours, theirs = single_node(Path(tmp) / f"single-{size}", size, args)
            recovered = [ln.split(" recovered ", 1)[1] for ln in ours.node.server.log_text(
            ).splitlines() if " recovered " in ln]  # type: ignore[attr-defined]
            if recovered:
                out.append("kraftpy's own log of its restarts: recovered "
                           + "; ".join(recovered))
                print(out[-1], flush=True)
            out.append(table(f"{size:,} partitions ({size // args.partitions_per_topic:,} "
                             f"topics, RF 3, six brokers); Kafka heap {theirs.rows['heap']}; "
                             f"load average {load_average()} at the end",
                             ours.rows, theirs.rows, size))
            print(out[-1], flush=True)
        if not args.skip_quorum:
            size = max(sizes)
            ours, theirs = quorum(Path(tmp) / f"quorum-{size}", size, args)
            out.append(table(f"three voters, {size:,} partitions; Kafka heap "
                             f"{theirs.rows['heap']} each; load average {load_average()}",
                             ours.rows, theirs.rows, size))
            print(out[-1], flush=True)
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
