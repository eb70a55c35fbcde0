"""`kraftpy conformance` against a real kraftpy process: every check passes."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from kraftpy.tools.conformance import CHECKS, Target, run_checks
from support.security import Pki, secure_server, write_jaas
from support.server import KraftpyServer, running_server


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with running_server(tmp_path_factory.mktemp("conformance")) as srv:
        yield srv


def test_every_check_passes(server: KraftpyServer) -> None:
    target = Target(client=(server.host, server.client_port),
                    controller=(server.host, server.controller_port), incomplete_wait=0.5)
    results = run_checks(target)
    assert len(results) == len(CHECKS) >= 45
    failed = [f"[{r.listener}] {r.name}: {r.detail}" for r in results if r.status != "pass"]
    assert not failed, "\n".join(failed)


def test_the_command_line_reports_and_sets_the_exit_status(server: KraftpyServer) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "kraftpy.tools", "conformance", "--bootstrap", server.bootstrap,
         "--controller", server.controller, "--only", "InitProducerId"],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "0 failed" in run.stdout
    # Pointed at the wrong listener, the client checks fail and the exit status says so.
    run = subprocess.run(
        [sys.executable, "-m", "kraftpy.tools", "conformance", "--bootstrap",
         server.controller, "--only", "Metadata"],
        capture_output=True, text=True, timeout=120)
    assert run.returncode == 1
    assert "FAIL" in run.stdout


def test_a_server_that_never_closes_fails_the_suite() -> None:
    """The suite can fail: a server that never closes is caught by the bad-input checks."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    stop = threading.Event()

    def swallow() -> None:
        listener.settimeout(0.2)
        held = []
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue
        for s in held:
            s.close()

    t = threading.Thread(target=swallow, daemon=True)
    t.start()
    try:
        port = listener.getsockname()[1]
        results = run_checks(Target(client=("127.0.0.1", port), close_wait=0.3, timeout=0.5),
                             lambda name: "negative frame size" in name)
        assert [(r.listener, r.status) for r in results] == [("client", "fail"),
                                                              ("controller", "skip")]
    finally:
        stop.set()
        t.join()
        listener.close()


def test_the_suite_runs_over_sasl_ssl_with_a_command_config(tmp_path: Path) -> None:
    """Every client check passes on a SASL_SSL listener: TLS and SCRAM first, then the same."""
    pki = Pki.create(tmp_path / "pki")
    srv = secure_server(tmp_path / "srv", pki, write_jaas(tmp_path, {"admin": "admin-Secret-4"}),
                        {"super.users": "User:admin"})
    config = tmp_path / "admin.properties"
    config.write_text(f"security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                      f"sasl.username=admin\nsasl.password=admin-Secret-4\n"
                      f"ssl.ca.location={pki.ca_path}\n")
    srv.start()
    try:
        run = subprocess.run(
            [sys.executable, "-m", "kraftpy.tools", "conformance", "--bootstrap", srv.sasl_ssl,
             "--command-config", str(config)], capture_output=True, text=True, timeout=240)
        assert run.returncode == 0, run.stdout + run.stderr
        passed = int(re.search(r"(\d+) passed, 0 failed", run.stdout).group(1))
        assert passed == sum(c.listener == "client" for c in CHECKS)
        assert "authenticated User:admin" in srv.log_text()
        run = subprocess.run(  # without the settings nothing gets past the TLS listener
            [sys.executable, "-m", "kraftpy.tools", "conformance", "--bootstrap", srv.sasl_ssl,
             "--only", "pipelined"], capture_output=True, text=True, timeout=60)
        assert run.returncode == 1 and "1 failed" in run.stdout
    finally:
        assert srv.stop() == 0, srv.log_tail()
