"""A real `kraftpy serve` process for tests: free ports, its own data dir, started and stopped.

Usage:

    from support.server import KraftpyServer, running_server

    def test_something(tmp_path):
        with running_server(tmp_path) as srv:          # started and answering
            srv.bootstrap                              # "127.0.0.1:<client port>"
            srv.controller                             # "127.0.0.1:<CONTROLLER port>"
            srv.kill(); srv.start()                    # kill -9 and restart, same ports and dir
        # stopped with SIGTERM on exit; the exit status is checked (0)

    srv = KraftpyServer(tmp_path, overrides={"broker.session.timeout.ms": "3000"})
    srv.start(); ...; assert srv.stop() == 0

Or as a pytest fixture in a test module: `from support.server import kraftpy_server` and take
`kraftpy_server` as an argument (a started server in the test's tmp_path).

The server writes its log to `<root>/server.log` (`srv.log_text()`); a server that exits or does
not answer within the start timeout fails the test with the log's tail.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

HOST = "127.0.0.1"
CLIENT_LISTENER = "PLAINTEXT"
CONTROLLER_LISTENER = "CONTROLLER"


_HANDED_OUT: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host: str = HOST) -> int:
    """A port free now and outside the kernel's ephemeral range.

    A port the kernel picked for bind(0) comes from the ephemeral range, the same range it draws
    outgoing connections' source ports from: between this call and the server's bind, any
    client connection in the suite may take it. Ports below the range are never handed out
    that way, so only a listener could take one.
    """
    low, high = _ephemeral_range()
    candidates = [p for p in range(10000, 65536) if not low <= p <= high and p not in _HANDED_OUT]
    rng = random.Random()
    for _ in range(200):
        port = rng.choice(candidates)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
        _HANDED_OUT.add(port)
        return port
    raise RuntimeError("no free port outside the ephemeral range")


def probe(host: str, port: int, timeout: float = 1.0) -> bool:
    """True when something at host:port answers an ApiVersions v0 request with a whole frame."""
    from kraftpy.protocol.framing import encode_request
    from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
    from kraftpy.tools.kafka_connection import ClientError, KafkaConnection

    try:
        with KafkaConnection((host, port), timeout=timeout) as conn:
            conn.send_raw(encode_request(ApiVersionsRequest(), 0, 1, "probe"))
            return conn.recv_frame()[:4] == b"\0\0\0\1"  # correlation id 1
    except (ClientError, OSError):
        return False


class KraftpyServer:
    """One `kraftpy serve` subprocess bound to fixed free ports under `root`."""

    def __init__(
        self,
        root: Path,
        overrides: Mapping[str, str] | None = None,
        *,
        client_port: int | None = None,
        controller_port: int | None = None,
        log_level: str = "INFO",
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.host = HOST
        self.client_port = client_port or free_port()
        self.controller_port = controller_port or free_port()
        self.data_dir = self.root / "data"
        self.log_path = self.root / "server.log"
        self.config_path = self.root / "server.properties"
        self.log_level = log_level
        self.extra_args = list(extra_args)
        self.env = dict(env or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        props = {
            "process.roles": "broker,controller",
            "node.id": "1",
            "listeners": f"{CLIENT_LISTENER}://{HOST}:{self.client_port},"
            f"{CONTROLLER_LISTENER}://{HOST}:{self.controller_port}",
            "controller.listener.names": CONTROLLER_LISTENER,
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "metadata.log.dir": str(self.data_dir),
        }
        props.update(overrides or {})
        self.properties = props
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))

    # --- addresses ---------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.client_port}"

    @property
    def controller(self) -> str:
        return f"{self.host}:{self.controller_port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def command(self) -> list[str]:
        return [
            sys.executable, "-m", "kraftpy.tools", "serve",
            "--config", str(self.config_path), "--log-level", self.log_level,
            *self.extra_args,
        ]

    def plaintext_ports(self) -> list[int]:
        """The client and CONTROLLER ports a plain ApiVersions probe can reach (not TLS/SASL)."""
        protocols = dict(item.split(":", 1) for item in
                         self.properties["listener.security.protocol.map"].split(","))
        return [port for name, port in ((CLIENT_LISTENER, self.client_port),
                                        (CONTROLLER_LISTENER, self.controller_port))
                if protocols.get(name, name) == "PLAINTEXT"]

    def _answering(self) -> bool:
        ports = self.plaintext_ports()
        if ports:
            return all(probe(self.host, port) for port in ports)
        try:  # TLS or SASL everywhere: a listener that accepts is as far as a probe can see
            socket.create_connection((self.host, self.client_port), timeout=1.0).close()
            return True
        except OSError:
            return False

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self, timeout: float = 30.0) -> None:
        """Start the process and wait until its plaintext listeners answer ApiVersions."""
        self.launch()
        self.wait_answering(timeout)

    def launch(self) -> None:
        """Start the process, not waiting for it (`wait_answering` does)."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        self.starts += 1
        with self.log_path.open("ab") as log:
            log.write(f"\n=== start {self.starts} ===\n".encode())
            log.flush()
            env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
            self.proc = subprocess.Popen(
                self.command(), stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.root
            )

    def wait_answering(self, timeout: float = 30.0) -> None:
        """Wait until the launched process's plaintext listeners answer ApiVersions."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(
                    f"kraftpy serve exited with {self.proc.returncode}:\n{self.log_tail()}"
                )
            if self._answering():
                return
            time.sleep(0.05)
        self.kill()
        pytest.fail(f"kraftpy serve did not answer within {timeout}s:\n{self.log_tail()}")

    def stop(self, timeout: float = 20.0) -> int:
        """SIGTERM and wait; returns the exit status (kills and fails after `timeout`)."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else 0
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail(f"kraftpy serve ignored SIGTERM for {timeout}s:\n{self.log_tail()}")

    def kill(self) -> None:
        """kill -9, and reap."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def restart(self, timeout: float = 30.0) -> None:
        self.stop()
        self.start(timeout)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    # --- what it said and wrote ---------------------------------------------------------------
    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def cluster_id(self) -> str:
        for line in (self.data_dir / "meta.properties").read_text().splitlines():
            if line.startswith("cluster.id="):
                return line.split("=", 1)[1].strip()
        raise LookupError("no cluster.id in meta.properties")


@contextlib.contextmanager
def running_server(
    root: Path, overrides: Mapping[str, str] | None = None, **kwargs: object
) -> Iterator[KraftpyServer]:
    """A started server; on exit it is stopped with SIGTERM and must exit 0."""
    srv = KraftpyServer(root, overrides, **kwargs)  # type: ignore[arg-type]
    srv.start()
    try:
        yield srv
    finally:
        if srv.running:
            code = srv.stop()
            assert code == 0, f"kraftpy serve exited {code} on SIGTERM:\n{srv.log_tail()}"
        else:
            srv.kill()


@pytest.fixture
def kraftpy_server(tmp_path: Path) -> Iterator[KraftpyServer]:
    with running_server(tmp_path / "kraftpy") as srv:
        yield srv


def quorum_servers(root: Path, count: int = 3, overrides: Mapping[str, str] | None = None,
                   **kwargs: object) -> list[KraftpyServer]:
    """`count` servers (not started) forming one static quorum: node ids 1..count, one
    cluster id, each one's CONTROLLER listener named in everyone's controller.quorum.voters."""
    import uuid

    from kraftpy.protocol.uuid import kafka_uuid_str

    ports = [(free_port(), free_port()) for _ in range(count)]
    voters = ",".join(f"{i + 1}@{HOST}:{controller}" for i, (_, controller) in enumerate(ports))
    cluster_id = kafka_uuid_str(uuid.uuid4())
    servers = []
    for i, (client, controller) in enumerate(ports):
        props = {"node.id": str(i + 1), "controller.quorum.voters": voters,
                 "cluster.id": cluster_id, **(overrides or {})}
        servers.append(KraftpyServer(Path(root) / f"node{i + 1}", props, client_port=client,
                                     controller_port=controller, **kwargs))  # type: ignore[arg-type]
    return servers


def start_quorum(servers: Sequence[KraftpyServer], timeout: float = 60.0) -> float:
    """Launch all at once; the monotonic time at which all answer ApiVersions."""
    for srv in servers:
        srv.launch()
    for srv in servers:
        srv.wait_answering(timeout)
    return time.monotonic()


def is_quorum_leader(srv: KraftpyServer) -> bool:
    """DescribeCluster on the client listener goes through the controller: only the active
    leader answers it (on the CONTROLLER listener every voter answers, naming the leader)."""
    from kraftpy.protocol.messages.describe_cluster_request import DescribeClusterRequest
    from kraftpy.tools.kafka_connection import ClientError, KafkaConnection

    try:
        with KafkaConnection((srv.host, srv.client_port), timeout=2.0) as conn:
            return conn.request(DescribeClusterRequest(endpoint_type=1), 1).error_code == 0
    except (ClientError, OSError):
        return False


def describe_quorum(srv: KraftpyServer, version: int = 2, timeout: float = 3.0) -> Any:
    """DescribeQuorum for __cluster_metadata-0 at `srv`'s CONTROLLER listener: its partition
    (error_code, leader_id, leader_epoch, high_watermark, current_voters, observers)."""
    from kraftpy.protocol.messages.describe_quorum_request import (
        DescribeQuorumRequest,
        PartitionData,
        TopicData,
    )
    from kraftpy.tools.kafka_connection import KafkaConnection

    request = DescribeQuorumRequest(topics=[TopicData(topic_name="__cluster_metadata",
                                                      partitions=[PartitionData()])])
    with KafkaConnection((srv.host, srv.controller_port), timeout=timeout) as conn:
        return conn.request(request, version).topics[0].partitions[0]


def quorum_leader(servers: Sequence[KraftpyServer], timeout: float = 30.0) -> KraftpyServer:
    """The server that answers as the active leader (fails the test after `timeout`)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for srv in servers:
            if srv.running and is_quorum_leader(srv):
                return srv
        time.sleep(0.02)
    logs = "\n".join(f"--- {s.root.name}\n{s.log_tail(30)}" for s in servers)
    pytest.fail(f"no leader within {timeout}s:\n{logs}")


def stop_quorum(servers: Sequence[KraftpyServer]) -> None:
    """SIGTERM each running server; each must exit 0."""
    for srv in servers:
        if srv.running:
            code = srv.stop()
            assert code == 0, f"kraftpy serve exited {code} on SIGTERM:\n{srv.log_tail()}"
