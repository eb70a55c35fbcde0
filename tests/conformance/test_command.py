"""`kraftpy conformance` against nothing: one line saying which listener cannot be reached and
why, a non-zero exit, no traceback."""

from __future__ import annotations

import socket
import subprocess
import sys

from kraftpy.tools.conformance import Target, run_checks


def _dead_port() -> int:
    with socket.socket() as s:  # bound and closed again: nothing listens there
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_dead_port_is_one_connect_error() -> None:
    client, controller = _dead_port(), _dead_port()
    run = subprocess.run([sys.executable, "-m", "kraftpy.tools", "conformance",
                          "--bootstrap", f"127.0.0.1:{client}",
                          "--controller", f"127.0.0.1:{controller}"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert run.stdout == ""
    assert run.stderr.splitlines() == [
        f"kraftpy conformance: client listener: cannot connect to 127.0.0.1:{client}: "
        "Connection refused"]


def test_checks_that_lose_the_server_say_so_in_one_line() -> None:
    port = _dead_port()
    results = run_checks(Target(client=("127.0.0.1", port), timeout=1.0),
                         lambda name: "pipelined" in name or "ApiVersions" in name)
    ran = [r for r in results if r.listener == "client"]
    assert ran and all(r.status == "fail" for r in ran)
    for r in ran:
        assert r.detail == f"ConnectFailed: cannot connect to 127.0.0.1:{port}: Connection refused"
