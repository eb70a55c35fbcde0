"""A whole cluster on this machine: N kraftpy controllers as one KIP-853 quorum, M real
Apache Kafka 4.1 brokers on it, every node in its own directory under one cluster directory.

The controllers are `kraftpy serve` processes (`process.roles=controller`), formatted with one
`kraftpy storage format --initial-controllers` (a dynamic quorum, kraft.version 1, as Kafka 4.1
formats a new cluster), so `kafka-metadata-quorum add-controller` / `remove-controller` work
on it. The brokers are Kafka's own `kafka.Kafka`, from the jars `kafka_runtime` fetches,
configured with `controller.quorum.bootstrap.servers` only. Their log dirs get the
`meta.properties` `kafka-storage format` writes for a broker.

Every node runs in a process group of its own, so a Ctrl-C at the terminal reaches only this
command, which stops the brokers first (SIGTERM: a controlled shutdown the controllers grant),
then the controllers, and kills what has not exited in time. On Linux each node also gets
SIGKILL from the kernel should this command die without stopping them (PR_SET_PDEATHSIG): no
JVM outlives it. `cluster.json` in the cluster directory says what runs where; `status` reads
it and asks the quorum and the brokers.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kraftpy.tools import kafka_runtime

HOST = "127.0.0.1"
STATE_FILE = "cluster.json"
BROKER_READY = "Transitioning from RECOVERY to RUNNING"
CONTROLLER_START_S = 60.0
BROKER_START_S = 120.0
BROKER_STOP_S = 30.0
CONTROLLER_STOP_S = 20.0


class ClusterError(Exception):
    """The cluster cannot start (or be asked); the message says why. `exit_code` 2 for what
    the operator can fix before starting (a port in use, Java missing), 1 for a node that
    failed."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass
class Node:
    """One process of the cluster, as `cluster.json` records it."""

    role: str  # "controller" or "broker"
    node_id: int
    port: int
    root: str
    pid: int | None = None
    directory_id: str | None = None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def path(self) -> Path:
        return Path(self.root)

    @property
    def data(self) -> Path:
        return self.path / "data"

    @property
    def log(self) -> Path:
        return self.path / ("server.log" if self.role == "controller" else "kafka.log")

    @property
    def config(self) -> Path:
        return self.path / "server.properties"

    def alive(self) -> bool:
        """Whether this node's process runs (by its pid and its config file's path)."""
        return self.pid is not None and pid_alive(self.pid, running=str(self.config))


@dataclass
class ClusterState:
    directory: str
    cluster_id: str
    kafka_libs: str
    controllers: list[Node] = field(default_factory=list)
    brokers: list[Node] = field(default_factory=list)
    pid: int | None = None  # the `kraftpy cluster` process that runs it

    def command_alive(self) -> bool:
        return self.pid is not None and pid_alive(self.pid, running="cluster")

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(b.address for b in self.brokers)

    @property
    def controller_servers(self) -> str:
        return ",".join(c.address for c in self.controllers)

    @property
    def nodes(self) -> list[Node]:
        return [*self.controllers, *self.brokers]

    def save(self) -> None:
        path = Path(self.directory) / STATE_FILE
        data = {"version": 1, **asdict(self), "bootstrap_servers": self.bootstrap_servers,
                "controller_servers": self.controller_servers}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        os.replace(tmp, path)

    @classmethod
    def load(cls, directory: Path) -> ClusterState:
        path = Path(directory) / STATE_FILE
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            raise ClusterError(f"no cluster in {directory} (no {STATE_FILE}); start one with "
                               f"`kraftpy cluster --dir {directory}`") from None
        except (OSError, ValueError) as exc:
            raise ClusterError(f"cannot read {path}: {exc}") from None
        return cls(data["directory"], data["cluster_id"], data["kafka_libs"],
                   [Node(**n) for n in data["controllers"]], [Node(**n) for n in data["brokers"]],
                   data.get("pid"))


def pid_alive(pid: int, *, running: str | None = None) -> bool:
    """Whether process `pid` runs (a zombie does not); with `running`, only if its command
    line holds that text, so a pid the system gave to another program since is not ours."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return running is None
    proc = Path(f"/proc/{pid}")
    if proc.is_dir():
        try:
            if (proc / "stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return False
            if running is not None:
                return running in (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                    errors="replace")
        except (OSError, IndexError):
            return False
    return True


def port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the parent dies (Linux), and a new session."""
    os.setsid()
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def _spawn(command: list[str], node: Node, env: dict[str, str] | None = None
           ) -> subprocess.Popen[bytes]:
    with node.log.open("ab") as log:
        log.write(f"\n=== kraftpy cluster: {' '.join(command[:3])} ... ===\n".encode())
        log.flush()
        return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=node.path,
                                stdin=subprocess.DEVNULL, env=env,
                                preexec_fn=_die_with_parent)  # from the main thread only


def _log_tail(node: Node, lines: int = 25) -> str:
    try:
        text = node.log.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join("    " + line for line in text.splitlines()[-lines:])


def _answers(port: int, timeout: float = 1.0) -> bool:
    """Whether something at the port answers an ApiVersions request with a whole frame."""
    from kraftpy.protocol.framing import encode_request
    from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
    from kraftpy.tools.kafka_connection import ClientError, KafkaConnection

    try:
        with KafkaConnection((HOST, port), timeout=timeout) as conn:
            conn.send_raw(encode_request(ApiVersionsRequest(), 0, 1, "kraftpy-cluster"))
            return conn.recv_frame()[:4] == b"\0\0\0\1"
    except (ClientError, OSError):
        return False


def describe_quorum(node: Node, timeout: float = 2.0) -> Any:
    """DescribeQuorum v2 of __cluster_metadata-0 at a controller (only the leader answers 0)."""
    from kraftpy.protocol.messages.describe_quorum_request import (
        DescribeQuorumRequest,
        PartitionData,
        TopicData,
    )
    from kraftpy.tools.kafka_connection import KafkaConnection

    request = DescribeQuorumRequest(topics=[TopicData(topic_name="__cluster_metadata",
                                                      partitions=[PartitionData()])])
    with KafkaConnection((HOST, node.port), timeout=timeout) as conn:
        response = conn.request(request, 2)
    if response.error_code:
        return None
    partition = response.topics[0].partitions[0]
    return partition if partition.error_code == 0 else None


def quorum_leader(state: ClusterState, timeout: float = 2.0) -> tuple[Node, Any] | None:
    for node in state.controllers:
        try:
            partition = describe_quorum(node, timeout)
        except Exception:  # not up, not the leader, or gone: ask the next
            continue
        if partition is not None:
            return node, partition
    return None


def describe_cluster(state: ClusterState, timeout: float = 2.0) -> Any | None:
    """DescribeCluster v2 (fenced brokers included) from the first broker that answers."""
    from kraftpy.protocol.messages.describe_cluster_request import DescribeClusterRequest
    from kraftpy.tools.kafka_connection import KafkaConnection

    for broker in state.brokers:
        try:
            with KafkaConnection((HOST, broker.port), timeout=timeout) as conn:
                response = conn.request(DescribeClusterRequest(include_fenced_brokers=True), 2)
        except Exception:
            continue
        if response.error_code == 0:
            return response
    return None


# --- building the directory --------------------------------------------------------------------

def _controller_properties(node: Node, state: ClusterState,
                           overrides: dict[str, str]) -> dict[str, str]:
    return {
        "process.roles": "controller",
        "node.id": str(node.node_id),
        "listeners": f"CONTROLLER://{node.address}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT",
        "controller.quorum.bootstrap.servers": state.controller_servers,
        "metadata.log.dir": str(node.data),
        **overrides,
    }


def _broker_properties(node: Node, state: ClusterState,
                       overrides: dict[str, str]) -> dict[str, str]:
    replicas = min(3, len(state.brokers))
    min_isr = str(min(2, replicas))
    return {
        "process.roles": "broker",
        "node.id": str(node.node_id),
        "listeners": f"PLAINTEXT://{node.address}",
        "advertised.listeners": f"PLAINTEXT://{node.address}",
        "inter.broker.listener.name": "PLAINTEXT",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        "controller.quorum.bootstrap.servers": state.controller_servers,
        "log.dirs": str(node.data),
        # Kafka's internal topics as the brokers can hold them (Kafka's defaults with three
        # or more: replication factor 3, transactions' min.isr 2).
        "offsets.topic.replication.factor": str(replicas),
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": str(replicas),
        "share.coordinator.state.topic.min.isr": min_isr,
        # A test cluster on one machine: a consumer group starts at once, few threads.
        "group.initial.rebalance.delay.ms": "0",
        "num.network.threads": "2",
        "num.io.threads": "4",
        "background.threads": "2",
        **overrides,
    }


def _write_properties(path: Path, props: dict[str, str]) -> None:
    path.write_text("# written by kraftpy cluster\n"
                    + "".join(f"{k}={v}\n" for k, v in props.items()))


def plan(directory: Path, controllers: int, brokers: int, base_port: int,
         kafka_libs: Path) -> ClusterState:
    """A new cluster's layout: controllers 1..N on base_port+100.., brokers N+1.. on base_port.."""
    if not 1 <= controllers <= 9:
        raise ClusterError(f"--controllers {controllers}: kraftpy cluster runs 1 to 9")
    if not 0 <= brokers <= 9:
        raise ClusterError(f"--brokers {brokers}: kraftpy cluster runs 0 to 9")
    directory = directory.resolve()
    state = ClusterState(str(directory), _new_id(), str(kafka_libs))
    for i in range(controllers):
        state.controllers.append(Node("controller", i + 1, base_port + 100 + i,
                                      str(directory / f"controller-{i + 1}"),
                                      directory_id=_new_id()))
    for j in range(brokers):
        node_id = controllers + j + 1
        state.brokers.append(Node("broker", node_id, base_port + j,
                                  str(directory / f"broker-{node_id}")))
    return state


def create(state: ClusterState, controller_overrides: dict[str, str],
           broker_overrides: dict[str, str]) -> None:
    """Write every node's configuration and format every data directory."""
    from kraftpy.controller.log.files import write_meta_properties

    Path(state.directory).mkdir(parents=True, exist_ok=True)
    initial = ",".join(f"{c.node_id}@{c.address}:{c.directory_id}" for c in state.controllers)
    formats = []
    for node in state.controllers:
        node.path.mkdir(parents=True, exist_ok=True)
        _write_properties(node.config, _controller_properties(node, state, controller_overrides))
        formats.append((node, subprocess.Popen(
            [sys.executable, "-m", "kraftpy.tools", "storage", "format", "--config",
             str(node.config), "--cluster-id", state.cluster_id, "--initial-controllers",
             initial], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)))
    for node in state.brokers:
        node.data.mkdir(parents=True, exist_ok=True)
        _write_properties(node.config, _broker_properties(node, state, broker_overrides))
        (node.path / "log4j2.yaml").write_text(kafka_runtime.NODE_LOG4J2)
        write_meta_properties(node.data, cluster_id=state.cluster_id, node_id=node.node_id,
                              directory_id=_new_id())
    for node, proc in formats:
        out, _ = proc.communicate(timeout=120)
        if proc.returncode != 0:
            raise ClusterError(f"kraftpy storage format of controller {node.node_id} failed "
                               f"(exit {proc.returncode}):\n{out}", 1)


def _new_id() -> str:
    """A cluster or directory id, as `kafka-storage random-uuid` makes them."""
    from kraftpy.protocol.uuid import kafka_uuid_str, random_kafka_uuid

    return kafka_uuid_str(random_kafka_uuid())


# --- running it --------------------------------------------------------------------------------

class LocalCluster:
    """The processes of one cluster, started and stopped by this command."""

    def __init__(self, state: ClusterState, say: Callable[[str], None]) -> None:
        self.state = state
        self.say = say
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.log_marks: dict[int, int] = {}  # where each broker's log of this start begins
        self.reported: set[int] = set()

    def _start_controller(self, node: Node) -> None:
        command = [sys.executable, "-m", "kraftpy.tools", "serve", "--config", str(node.config)]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.procs[node.node_id] = _spawn(command, node, env)
        node.pid = self.procs[node.node_id].pid

    def _start_broker(self, node: Node) -> None:
        self.log_marks[node.node_id] = node.log.stat().st_size if node.log.exists() else 0
        command = kafka_runtime.java_command(
            Path(self.state.kafka_libs), "kafka.Kafka", str(node.config),
            jvm_opts=kafka_runtime.NODE_JVM_OPTS, log4j_config=node.path / "log4j2.yaml")
        self.procs[node.node_id] = _spawn(command, node)
        node.pid = self.procs[node.node_id].pid

    def _check_alive(self, node: Node) -> None:
        proc = self.procs[node.node_id]
        if proc.poll() is not None:
            raise ClusterError(f"{node.role} {node.node_id} exited with {proc.returncode} while "
                               f"starting; the end of {node.log}:\n{_log_tail(node)}", 1)

    def start(self, stop: threading.Event) -> None:
        """Start every node and return once the quorum has a leader and every broker runs."""
        for node in self.state.controllers:
            self._start_controller(node)
        self.state.pid = os.getpid()
        self.state.save()
        deadline = time.monotonic() + CONTROLLER_START_S
        while quorum_leader(self.state, timeout=1.0) is None:
            for node in self.state.controllers:
                self._check_alive(node)
            if stop.is_set():
                raise ClusterError("stopped while starting", 130)
            if time.monotonic() > deadline:
                tails = "\n".join(f"  controller {n.node_id} ({n.log}):\n{_log_tail(n, 10)}"
                                  for n in self.state.controllers)
                raise ClusterError(f"the controllers elected no leader within "
                                   f"{CONTROLLER_START_S:.0f} s:\n{tails}", 1)
            stop.wait(0.1)
        for node in self.state.brokers:
            self._start_broker(node)
        self.state.save()
        deadline = time.monotonic() + BROKER_START_S
        waiting = list(self.state.brokers)
        while waiting:
            for node in list(waiting):
                self._check_alive(node)
                with node.log.open("rb") as f:
                    f.seek(self.log_marks[node.node_id])
                    if BROKER_READY.encode() in f.read() and _answers(node.port):
                        waiting.remove(node)
            if stop.is_set():
                raise ClusterError("stopped while starting", 130)
            if waiting and time.monotonic() > deadline:
                tails = "\n".join(f"  broker {n.node_id} ({n.log}):\n{_log_tail(n, 10)}"
                                  for n in waiting)
                raise ClusterError(f"brokers {[n.node_id for n in waiting]} were not running "
                                   f"within {BROKER_START_S:.0f} s:\n{tails}", 1)
            stop.wait(0.2)

    def watch(self) -> None:
        """Say once when a node exits on its own (the cluster keeps running without it)."""
        for node in self.state.nodes:
            proc = self.procs.get(node.node_id)
            if proc is not None and proc.poll() is not None and node.node_id not in self.reported:
                self.reported.add(node.node_id)
                self.say(f"{node.role} {node.node_id} exited with {proc.returncode}; "
                         f"its log: {node.log}")

    def _stop(self, nodes: list[Node], timeout: float) -> None:
        live = [(n, self.procs[n.node_id]) for n in nodes
                if n.node_id in self.procs and self.procs[n.node_id].poll() is None]
        for _node, proc in live:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for node, proc in live:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.say(f"{node.role} {node.node_id} did not stop within {timeout:.0f} s: "
                         "killed")
        for node in nodes:  # whatever is left of each node's process group
            proc = self.procs.get(node.node_id)
            if proc is None:
                continue
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
            node.pid = None

    def stop(self) -> None:
        """Brokers first (a controlled shutdown needs the controllers), then the controllers."""
        self._stop(self.state.brokers, BROKER_STOP_S)
        self._stop(self.state.controllers, CONTROLLER_STOP_S)
        self.state.pid = None
        self.state.save()


def check_ports(state: ClusterState) -> None:
    busy = [n for n in state.nodes if not port_free(n.port)]
    if busy:
        names = ", ".join(f"{n.role} {n.node_id} on {n.port}" for n in busy)
        raise ClusterError(f"ports in use: {names}; pick other ports with --base-port "
                           "(or stop what holds them)")


def open_or_plan(directory: Path, controllers: int, brokers: int, base_port: int,
                 kafka_libs: Path) -> tuple[ClusterState, bool]:
    """The cluster in `directory` (started again on its data), or a new one; and whether it
    is new. A directory whose cluster still runs is refused."""
    if (directory / STATE_FILE).exists():
        state = ClusterState.load(directory)
        if state.command_alive():
            raise ClusterError(f"a cluster is already running in {directory} (kraftpy cluster "
                               f"pid {state.pid}); `kraftpy cluster status --dir {directory}`")
        left = [n for n in state.nodes if n.alive()]
        if left:
            raise ClusterError(f"nodes of the last run in {directory} still run (pids "
                               f"{[n.pid for n in left]}); `kraftpy cluster stop --dir "
                               f"{directory}` ends them")
        if (len(state.controllers), len(state.brokers)) != (controllers, brokers):
            raise ClusterError(f"{directory} holds a cluster of {len(state.controllers)} "
                               f"controllers and {len(state.brokers)} brokers; start it with "
                               "those counts, or use another --dir")
        state.kafka_libs = str(kafka_libs)
        return state, False
    return plan(directory, controllers, brokers, base_port, kafka_libs), True


def describe_layout(state: ClusterState) -> str:
    n, m = len(state.controllers), len(state.brokers)
    lines = [f"kraftpy cluster {state.cluster_id}: {n} kraftpy controller{'s' * (n != 1)}, "
             f"{m} Apache Kafka {kafka_runtime.KAFKA_VERSION} broker{'s' * (m != 1)}, in "
             f"{state.directory}"]
    if state.brokers:
        lines.append(f"  bootstrap servers:    {state.bootstrap_servers}")
    lines.append(f"  bootstrap controller: {state.controller_servers}")
    for node in state.nodes:
        lines.append(f"  {node.role:<10} {node.node_id}  {node.address:<16} pid {node.pid:<7} "
                     f"data {node.data}  log {node.log}")
    if (Path(state.directory) / "bin").is_dir():
        lines.append(f"  Kafka's tools:        {Path(state.directory) / 'bin'} "
                     "(kafka-topics.sh, kafka-metadata-quorum.sh, ...)")
    return "\n".join(lines)


def run(directory: Path, controllers: int, brokers: int, base_port: int, kafka_libs: Path,
        controller_overrides: dict[str, str], broker_overrides: dict[str, str],
        say: Callable[[str], None] = print) -> int:
    """`kraftpy cluster`: start, print where everything is, run until SIGINT/SIGTERM, stop."""
    stop = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        stop.set()

    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, on_signal)
    try:
        # What can be refused without a side effect first; then Java and the jars; then ports.
        state, new = open_or_plan(directory, controllers, brokers, base_port, kafka_libs)
        if brokers:
            kafka_runtime.require("java")
            kafka_runtime.ensure_jars(kafka_libs, announce=say)
        check_ports(state)
        directory.mkdir(parents=True, exist_ok=True)
        if new:
            create(state, controller_overrides, broker_overrides)
        if kafka_runtime.jars_ready(kafka_libs):
            kafka_runtime.write_scripts(Path(state.directory) / "bin", kafka_libs,
                                        _tool_log4j(Path(state.directory)))
    except (ClusterError, kafka_runtime.KafkaUnavailable) as exc:
        print(f"kraftpy cluster: {exc}", file=sys.stderr, flush=True)
        return exc.exit_code if isinstance(exc, ClusterError) else 2
    cluster = LocalCluster(state, say)
    try:
        cluster.start(stop)
    except ClusterError as exc:
        print(f"kraftpy cluster: {exc}", file=sys.stderr, flush=True)
        cluster.stop()
        return exc.exit_code
    except BaseException:
        cluster.stop()
        raise
    state.save()
    say(describe_layout(state))
    say("running; Ctrl-C stops every node")
    try:
        while not stop.wait(0.5):
            cluster.watch()
    finally:
        say("stopping the brokers, then the controllers")
        cluster.stop()
    say("stopped")
    return 0


def _tool_log4j(directory: Path) -> Path:
    path = directory / "bin" / "tools-log4j2.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(kafka_runtime.TOOL_LOG4J2)
    return path


# --- status and stop ---------------------------------------------------------------------------

def status(directory: Path, timeout: float = 2.0) -> dict[str, Any]:
    """What runs in the cluster now: the quorum as its leader describes it, the brokers as
    the cluster's metadata (DescribeCluster) and their processes show them."""
    state = ClusterState.load(directory)
    out: dict[str, Any] = {
        "directory": state.directory, "cluster_id": state.cluster_id,
        "running": state.command_alive(), "pid": state.pid,
        "bootstrap_servers": state.bootstrap_servers,
        "controller_servers": state.controller_servers, "leader": None,
    }
    found = quorum_leader(state, timeout) if out["running"] else None
    replicas: dict[int, dict[str, Any]] = {}
    if found is not None:
        leader, partition = found
        out["leader"] = {"node_id": partition.leader_id, "epoch": partition.leader_epoch,
                         "high_watermark": partition.high_watermark}
        # Lag as kafka-metadata-quorum prints it: the leader's log end offset minus the
        # replica's.
        leader_end = next((v.log_end_offset for v in partition.current_voters
                           if v.replica_id == partition.leader_id), partition.high_watermark)
        for kind, group in (("voter", partition.current_voters),
                            ("observer", partition.observers)):
            for r in group:
                replicas[r.replica_id] = {
                    "quorum": kind, "log_end_offset": r.log_end_offset,
                    "lag": max(0, leader_end - r.log_end_offset) if r.log_end_offset >= 0
                    else None}
    registered: dict[int, bool] = {}
    if out["running"] and state.brokers:
        described = describe_cluster(state, timeout)
        if described is not None:
            registered = {b.broker_id: bool(b.is_fenced) for b in described.brokers}
    nodes = []
    for node in state.nodes:
        entry: dict[str, Any] = {"role": node.role, "node_id": node.node_id,
                                 "address": node.address, "pid": node.pid,
                                 "process": "running" if node.alive() else "stopped",
                                 "data": str(node.data), "log": str(node.log)}
        entry.update(replicas.get(node.node_id, {"quorum": None}))
        if node.role == "broker":
            entry["registration"] = (None if not registered and not out["running"] else
                                     "fenced" if registered.get(node.node_id) else
                                     "unfenced" if node.node_id in registered else
                                     "not registered")
        nodes.append(entry)
    ours = {n.node_id for n in state.nodes}
    for node_id, replica in sorted(replicas.items()):  # in the quorum, not started here
        if node_id not in ours:
            nodes.append({"role": "controller" if replica["quorum"] == "voter" else "node",
                          "node_id": node_id, "address": "-", "pid": None,
                          "process": "not ours", "data": None, "log": None, **replica})
    out["nodes"] = nodes
    return out


def format_status(info: dict[str, Any]) -> str:
    lines = [f"cluster {info['cluster_id']} in {info['directory']}: "
             + (f"running (kraftpy cluster pid {info['pid']})" if info["running"]
                else "not running")]
    leader = info["leader"]
    if leader:
        lines.append(f"quorum: leader {leader['node_id']}, epoch {leader['epoch']}, high "
                     f"watermark {leader['high_watermark']}")
    elif info["running"]:
        lines.append("quorum: no leader answers now")
    lines.append(f"bootstrap servers: {info['bootstrap_servers'] or '(no brokers)'}")
    lines.append(f"{'node':<16}{'address':<17}{'process':<17}{'quorum':<10}{'log end':>8}"
                 f"{'lag':>6}  broker")
    for n in info["nodes"]:
        process = f"{n['process']} {n['pid']}" if n["pid"] else n["process"]
        end = "" if n.get("log_end_offset") is None else str(n["log_end_offset"])
        lag = "" if n.get("lag") is None else str(n["lag"])
        lines.append(f"{n['role'] + ' ' + str(n['node_id']):<16}{n['address']:<17}"
                     f"{process:<17}{n['quorum'] or '-':<10}{end:>8}{lag:>6}  "
                     f"{n.get('registration') or ''}".rstrip())
    return "\n".join(lines)


def stop_running(directory: Path, timeout: float = BROKER_STOP_S + CONTROLLER_STOP_S + 10
                 ) -> str:
    """SIGTERM to the `kraftpy cluster` that runs the directory's cluster, and wait for it;
    nodes left by one that died are killed."""
    state = ClusterState.load(directory)
    if state.command_alive():
        os.kill(state.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while state.command_alive():
            if time.monotonic() > deadline:
                raise ClusterError(f"kraftpy cluster (pid {state.pid}) did not stop within "
                                   f"{timeout:.0f} s", 1)
            time.sleep(0.1)
        return f"stopped the cluster in {state.directory}"
    left = [n for n in state.nodes if n.alive()]
    for node in left:
        try:
            os.killpg(node.pid, signal.SIGKILL)  # type: ignore[arg-type]
        except (ProcessLookupError, PermissionError):
            pass
    if left:
        return f"killed {len(left)} nodes left behind: {[n.pid for n in left]}"
    return f"no cluster runs in {state.directory}"
