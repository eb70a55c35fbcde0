"""`kraftpy broker-sim` against a real kraftpy: registered, unfenced, K blocks printed."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from support.security import Pki, secure_server, write_jaas
from support.server import KraftpyServer, running_server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with running_server(tmp_path_factory.mktemp("broker-sim")) as srv:
        yield srv


def broker_sim(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftpy.tools", "broker-sim", *args],
                          capture_output=True, text=True, timeout=60)


def test_registers_unfences_and_prints_contiguous_blocks(server: KraftpyServer) -> None:
    run = broker_sim("--controller", server.controller, "--broker-id", "8", "--blocks", "3",
                     "--unregister")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert re.fullmatch(rf"registered broker 8 in cluster {server.cluster_id()}: "
                        r"broker epoch \d+", lines[0]), lines[0]
    assert lines[1] == "broker 8 unfenced" and lines[-1] == "broker 8 unregistered"
    blocks = [tuple(map(int, m.groups())) for m in
              (re.fullmatch(r"block (\d+)-(\d+) \((\d+) ids\)", line) for line in lines[2:-1])
              if m]
    assert len(blocks) == 3
    for first, last, length in blocks:
        assert last - first + 1 == length == 1000
    assert [b[0] for b in blocks[1:]] == [b[1] + 1 for b in blocks[:-1]]
    assert sum("to broker 8 " in line for line in server.log_text().splitlines()) == 3


def test_errors_are_reported_with_the_error_name(server: KraftpyServer) -> None:
    run = broker_sim("--controller", server.controller, "--broker-id", "9",
                     "--cluster-id", "AAAAAAAAAAAAAAAAAAAAAA", "--blocks", "0")
    assert run.returncode == 1
    assert "BrokerRegistration: error 104 (INCONSISTENT_CLUSTER_ID)" in run.stderr
    run = broker_sim("--controller", server.bootstrap, "--broker-id", "9")  # not a CONTROLLER one
    assert run.returncode == 1
    assert "DescribeCluster: error 114 (MISMATCHED_ENDPOINT_TYPE)" in run.stderr
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    run = broker_sim("--controller", f"127.0.0.1:{port}", "--broker-id", "9")
    assert run.returncode == 1 and f"cannot connect to 127.0.0.1:{port}" in run.stderr
    run = broker_sim("--controller", server.controller, "--broker-id", "9", "--blocks", "-1")
    assert run.returncode == 2 and "--blocks" in run.stderr


def test_a_sasl_ssl_controller_listener_with_command_config(tmp_path: Path) -> None:
    pki = Pki.create(tmp_path / "pki")
    srv = secure_server(tmp_path / "srv", pki, write_jaas(tmp_path, {"admin": "admin-Secret-3"}), {
        "listener.security.protocol.map":
            "CONTROLLER:SASL_SSL,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SSL:SSL",
        "sasl.mechanism.controller.protocol": "SCRAM-SHA-256", "super.users": "User:admin"})
    good = tmp_path / "admin.properties"
    good.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-256\n"
                    f"sasl.username=admin\nsasl.password=admin-Secret-3\n"
                    f"ssl.ca.location={pki.ca_path}\n")
    wrong = tmp_path / "wrong.properties"
    wrong.write_text(good.read_text().replace("admin-Secret-3", "nope-nope"))
    srv.start()
    try:
        run = broker_sim("--controller", srv.controller, "--broker-id", "12",
                         "--command-config", str(good))
        assert run.returncode == 0, run.stderr
        assert re.search(r"^block \d+-\d+ \(1000 ids\)$", run.stdout, re.M)
        assert "authenticated User:admin" in srv.log_text()
        run = broker_sim("--controller", srv.controller, "--broker-id", "13",
                         "--command-config", str(wrong))
        assert run.returncode == 1 and "SASL authentication failed" in run.stderr
        assert "nope-nope" not in run.stderr
        run = broker_sim("--controller", srv.controller, "--broker-id", "13")  # no TLS at all
        assert run.returncode == 1 and run.stderr.startswith("kraftpy broker-sim: ")
    finally:
        assert srv.stop() == 0, srv.log_tail()
