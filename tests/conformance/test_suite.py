"""`kraftpy conformance` against a real kraftpy process: every check passes."""

from __future__ import annotations

import subprocess
import sys

import pytest
from kraftpy.tools.conformance import CHECKS, Target, run_checks
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
