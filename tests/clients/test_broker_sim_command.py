"""`kraftpy broker-sim` against a real kraftpy: registered, unfenced, K blocks printed."""

from __future__ import annotations

import re
import socket
import subprocess
import sys

import pytest
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
    with socket.create_server(("127.0.0.1", 0)) as s:
        port = s.getsockname()[1]
    run = broker_sim("--controller", f"127.0.0.1:{port}", "--broker-id", "9")
    assert run.returncode == 1 and f"cannot connect to 127.0.0.1:{port}" in run.stderr
    run = broker_sim("--controller", server.controller, "--broker-id", "9", "--blocks", "-1")
    assert run.returncode == 2 and "--blocks" in run.stderr
