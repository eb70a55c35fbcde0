"""Real Apache Kafka 4.1 beside kraftpy: the jars, nodes of any role, Kafka's tools, a Java client.

Kafka is the oracle the suite compares kraftpy with. Nothing is downloaded by hand: the jars
are those of the package's `tools/kafka/pom.xml` (`kraftpy.tools.kafka_runtime`, which `kraftpy
cluster` uses too), copied into the git-ignored `tests/apache-kafka/libs/` by Maven on first use
in a session when they are missing (about a minute on a fresh machine, seconds once Maven's
`~/.m2` holds them).

    from support.kafka import KafkaNode, run_tool

    node = KafkaNode(tmp_path / "k1", roles="broker,controller", node_id=1)
    node.format(standalone=True)
    node.start()                         # returns once Kafka says it started and answers
    run_tool("TopicCommand", "--bootstrap-server", node.bootstrap, "--list").stdout
    node.stop()                          # SIGTERM, then SIGKILL; 143 is a normal exit

Every node started here is killed when the test session ends, whatever happened. A node that
does not start fails the test with the last lines of its own log.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from kraftpy.tools import kafka_runtime
from kraftpy.tools.kafka_runtime import (
    KAFKA_VERSION,
    NODE_JVM_OPTS,
    TOOL_JVM_OPTS,
    TOOLS,
    KafkaUnavailable,
)
from kraftpy.tools.kafka_runtime import NODE_LOG4J2 as LOG4J2
from kraftpy.tools.kafka_runtime import TOOL_LOG4J2 as TOOL_LOG4J2

from support.server import HOST, free_port, probe

__all__ = ["KAFKA_VERSION", "KafkaUnavailable", "KafkaNode", "run_tool", "kafka_libs"]

KAFKA_DIR = Path(__file__).resolve().parents[1] / "apache-kafka"
LIBS = KAFKA_DIR / "libs"
JAVA_SOURCES = KAFKA_DIR / "java"


# --- the jars ----------------------------------------------------------------------------------

def fetch_command() -> list[str]:
    """The one command that puts Kafka's jars in tests/apache-kafka/libs (.ci/run)."""
    return kafka_runtime.fetch_command(LIBS)


def kafka_libs() -> Path:
    """tests/apache-kafka/libs, filled from Maven Central on first use when the jars are missing."""
    if kafka_runtime.jars_ready(LIBS):
        return LIBS
    kafka_runtime.require("java", "javac", "mvn")
    return kafka_runtime.ensure_jars(
        LIBS, announce=lambda line: print(f"\nkraftpy tests: {line}", file=sys.__stderr__,
                                          flush=True))


def classpath() -> str:
    return str(kafka_libs() / "*")


def java_command(main_class: str, *args: str, jvm_opts: Sequence[str] = TOOL_JVM_OPTS,
                 log4j_config: Path | None = None, extra_classpath: Iterable[Path] = ()) -> list[str]:
    return kafka_runtime.java_command(kafka_libs(), main_class, *args, jvm_opts=jvm_opts,
                                      log4j_config=log4j_config, extra_classpath=extra_classpath)


# --- Kafka's tools -----------------------------------------------------------------------------

@dataclass
class ToolRun:
    args: list[str]
    returncode: int
    stdout: str
    stderr: str

    def check(self) -> ToolRun:
        """Fail the test, with what the tool printed, unless it exited 0."""
        if self.returncode != 0:
            pytest.fail(f"{' '.join(self.args[-6:])} exited {self.returncode}:\n"
                        f"{self.stdout[-4000:]}\n{self.stderr[-4000:]}")
        return self


def _tool_log4j() -> Path:
    path = kafka_libs() / "tool-log4j2.yaml"
    if not path.exists() or path.read_text() != TOOL_LOG4J2:
        path.write_text(TOOL_LOG4J2)
    return path


def run_tool(tool: str, *args: str, timeout: float = 120.0, stdin: str | None = None,
             env: Mapping[str, str] | None = None) -> ToolRun:
    """Run one of Kafka's tools (a name in TOOLS, or a main class) and return what it printed."""
    main_class = TOOLS.get(tool, tool)
    command = java_command(main_class, *args, log4j_config=_tool_log4j())
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout,
                              input=stdin, env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{tool} {' '.join(args)} ran past {timeout}s:\n{exc.stdout or ''}"
                    f"{exc.stderr or ''}")
    return ToolRun(command, done.returncode, done.stdout, done.stderr)


def metadata_shell_tree(source: Path, node: str, attempts: int = 5) -> str:
    """`kafka-metadata-shell --snapshot SOURCE tree NODE`. The shell now and then prints nothing
    at all (exit 0: its command ran before its loader published the image; seen about once in
    five runs on a busy machine), so an empty answer is asked again, a bounded number of times."""
    out = ""
    for _ in range(attempts):
        out = run_tool("MetadataShell", "--snapshot", str(source), "tree", node).check().stdout
        if out.strip():
            break
    return out


def random_cluster_id() -> str:
    from kraftpy.protocol.uuid import kafka_uuid_str, random_kafka_uuid

    return kafka_uuid_str(random_kafka_uuid())


# --- nodes -------------------------------------------------------------------------------------

_LIVE: set[KafkaNode] = set()


def _kill_all() -> None:
    for node in list(_LIVE):
        node.kill()


atexit.register(_kill_all)


class KafkaNode:
    """One real Kafka 4.1 process (broker, controller or both) with its own ports and data dir.

    `voters` are "id@host:port" strings (static `controller.quorum.voters`, kraft.version 0);
    `static_voter=True` makes a lone controller its own static voter set. Otherwise a
    controller names itself in `controller.quorum.bootstrap.servers` (KIP-853's dynamic quorum:
    format it with `standalone=True`) and a broker must be given `bootstrap_servers`.
    """

    def __init__(
        self,
        root: Path,
        *,
        roles: str = "broker,controller",
        node_id: int = 1,
        cluster_id: str | None = None,
        voters: Sequence[str] | None = None,
        bootstrap_servers: Sequence[str] | None = None,
        broker_port: int | None = None,
        controller_port: int | None = None,
        static_voter: bool = False,
        overrides: Mapping[str, str] | None = None,
        jvm_opts: Sequence[str] = NODE_JVM_OPTS,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.roles = roles
        self.node_id = node_id
        self.cluster_id = cluster_id or random_cluster_id()
        self.is_broker = "broker" in roles
        self.is_controller = "controller" in roles
        self.broker_port = (broker_port or free_port()) if self.is_broker else None
        self.controller_port = (controller_port or free_port()) if self.is_controller else None
        self.data_dir = self.root / "data"
        self.log_path = self.root / "kafka.log"
        self.config_path = self.root / "server.properties"
        self.log4j_path = self.root / "log4j2.yaml"
        self.jvm_opts = list(jvm_opts)
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        listeners = []
        if self.is_broker:
            listeners.append(f"PLAINTEXT://{HOST}:{self.broker_port}")
        if self.is_controller:
            listeners.append(f"CONTROLLER://{HOST}:{self.controller_port}")
        props: dict[str, str] = {
            "process.roles": roles,
            "node.id": str(node_id),
            "listeners": ",".join(listeners),
            "controller.listener.names": "CONTROLLER",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            "num.partitions": "1",
            "offsets.topic.replication.factor": "1",
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            "group.initial.rebalance.delay.ms": "0",
            "num.network.threads": "2",
            "num.io.threads": "2",
            "background.threads": "2",
            "log.flush.interval.messages": "9223372036854775807",
        }
        if self.is_broker:
            props["advertised.listeners"] = f"PLAINTEXT://{HOST}:{self.broker_port}"
            props["inter.broker.listener.name"] = "PLAINTEXT"
        if static_voter and self.is_controller and not voters:
            voters = [self.voter]
        if voters:
            props["controller.quorum.voters"] = ",".join(voters)
        elif bootstrap_servers:
            props["controller.quorum.bootstrap.servers"] = ",".join(bootstrap_servers)
        elif self.is_controller:
            props["controller.quorum.bootstrap.servers"] = f"{HOST}:{self.controller_port}"
        props.update(overrides or {})
        self.properties = props
        self._write_config()

    def _write_config(self) -> None:
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        self.log4j_path.write_text(LOG4J2)

    # --- addresses -----------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        assert self.broker_port is not None, f"node {self.node_id} has no broker listener"
        return f"{HOST}:{self.broker_port}"

    @property
    def controller(self) -> str:
        assert self.controller_port is not None, f"node {self.node_id} is not a controller"
        return f"{HOST}:{self.controller_port}"

    @property
    def voter(self) -> str:
        """This controller as `controller.quorum.voters` names it."""
        return f"{self.node_id}@{self.controller}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # --- format, start, stop -------------------------------------------------------------------
    def format(self, *, standalone: bool = False, initial_controllers: str | None = None,
               no_initial_controllers: bool = False, features: Mapping[str, int] | None = None,
               release_version: str | None = None, extra: Sequence[str] = ()) -> ToolRun:
        """`kafka-storage format` this node's directory (fails the test if it does not)."""
        args = ["format", "-t", self.cluster_id, "-c", str(self.config_path), "--ignore-formatted"]
        if standalone:
            args.append("--standalone")
        if initial_controllers:
            args += ["--initial-controllers", initial_controllers]
        if no_initial_controllers:
            args.append("--no-initial-controllers")
        for name, level in (features or {}).items():
            args += ["--feature", f"{name}={level}"]
        if release_version:
            args += ["--release-version", release_version]
        return run_tool("StorageTool", *args, *extra).check()

    def command(self) -> list[str]:
        return java_command("kafka.Kafka", str(self.config_path), jvm_opts=self.jvm_opts,
                            log4j_config=self.log4j_path)

    def start(self, *, wait: bool = True, timeout: float = 60.0) -> None:
        assert not self.running, "already running"
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"\n=== start {self.starts} ===\n".encode())
            log.flush()
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         cwd=self.root, start_new_session=True)
        self._log_mark = self.log_path.stat().st_size
        _LIVE.add(self)
        if wait:
            self.wait_started(timeout)

    def _log_since_start(self) -> str:
        with self.log_path.open("rb") as f:
            f.seek(getattr(self, "_log_mark", 0))
            return f.read().decode(errors="replace")

    def wait_for_log(self, text: str, timeout: float = 60.0) -> None:
        """Wait until this run's log has `text` (fails with the log's tail if the JVM exits)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self._log_since_start():
                return
            if not self.running:
                self.fail(f"exited with {self.proc.returncode if self.proc else None} "
                          f"before logging {text!r}")
            time.sleep(0.1)
        self.fail(f"did not log {text!r} within {timeout}s")

    def wait_started(self, timeout: float = 60.0) -> None:
        """Ready by Kafka's own signals: the start line, a RUNNING broker, answering listeners."""
        deadline = time.monotonic() + timeout
        self.wait_for_log("Kafka Server started", timeout)
        if self.is_broker:
            self.wait_for_log("Transitioning from RECOVERY to RUNNING",
                              max(1.0, deadline - time.monotonic()))
        for port in (self.broker_port, self.controller_port):
            while port is not None and not probe(HOST, port):
                if time.monotonic() > deadline:
                    self.fail(f"port {port} does not answer ApiVersions")
                time.sleep(0.1)

    def fail(self, why: str) -> None:
        """Kill the node and fail the test with what Kafka said: its errors, then its last lines."""
        self.kill()
        run = self._log_since_start().splitlines()
        errors = [line for i, line in enumerate(run)
                  if " ERROR " in line or " FATAL " in line or line.startswith("Caused by:")
                  or (i and (" ERROR " in run[i - 1] or " FATAL " in run[i - 1])
                      and not line.startswith("["))][:30]
        pytest.fail(f"Kafka node {self.node_id} ({self.roles}) {why}.\nIts errors:\n"
                    + "\n".join(errors) + "\nIts last lines:\n" + "\n".join(run[-30:]))

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM (a controlled shutdown), SIGKILL after `timeout`; the exit status.

        A JVM ended by SIGTERM exits 143: that is Kafka's normal clean stop.
        """
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        _LIVE.discard(self)
        return self.proc.returncode

    def kill(self) -> None:
        """kill -9 of the JVM (and anything it started), and reap."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)
        _LIVE.discard(self)

    # --- what it wrote -------------------------------------------------------------------------
    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def metadata_dir(self) -> Path:
        return self.data_dir / "__cluster_metadata-0"

    def __hash__(self) -> int:
        return id(self)


def kafka_node_fixture(tmp_path_factory: pytest.TempPathFactory, name: str,
                       **kwargs: object) -> KafkaNode:
    """A formatted, started node under a fresh temporary directory (the caller stops it)."""
    node = KafkaNode(tmp_path_factory.mktemp(name), **kwargs)  # type: ignore[arg-type]
    static = "voters" in kwargs or bool(kwargs.get("static_voter"))
    node.format(standalone=node.is_controller and not static)
    node.start()
    return node


# --- a small Java client -----------------------------------------------------------------------

def java_client_classes(work: Path) -> Path:
    """Compile tests/apache-kafka/java/*.java with javac against Kafka's jars (once per source digest)."""
    sources = sorted(JAVA_SOURCES.glob("*.java"))
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    out = work / f"classes-{digest}"
    if (out / ".done").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["javac", "-nowarn", "-d", str(out), "-cp", classpath(),
                           *map(str, sources)], capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        pytest.fail(f"javac failed:\n{done.stdout}\n{done.stderr}")
    (out / ".done").write_text("")
    return out


def run_java_client(classes: Path, *args: str, timeout: float = 90.0) -> ToolRun:
    """Run `KafkaClient <args>` (tests/apache-kafka/java/KafkaClient.java); its lines are its results."""
    command = java_command("KafkaClient", *args, extra_classpath=[classes],
                           log4j_config=_tool_log4j())
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"KafkaClient {' '.join(args)} ran past {timeout}s:\n{exc.stdout or ''}"
                    f"{exc.stderr or ''}")
    return ToolRun(command, done.returncode, done.stdout, done.stderr)
