"""`kraftpy conformance` against nothing, or with bad arguments: one line saying which listener
cannot be reached and why (or what is wrong with the arguments), a non-zero exit, no
traceback."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
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



def _conformance(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    from kraftpy.tools.cli import main

    status = main(["conformance", *args])
    out, err = capsys.readouterr()
    return status, out, err


def test_a_dead_broker_is_one_connect_error(capsys: pytest.CaptureFixture[str]) -> None:
    port = _dead_port()
    status, out, err = _conformance(capsys, "--broker", f"127.0.0.1:{port}", "--json")
    assert (status, out) == (2, "")
    assert err.splitlines() == [
        f"kraftpy conformance: broker: cannot connect to 127.0.0.1:{port}: Connection refused"]


def test_what_bad_arguments_get(capsys: pytest.CaptureFixture[str]) -> None:
    """Each bad argument: exit 2 and one line saying what is wrong, no traceback."""
    port = _dead_port()
    for args, message in (
            ((), "give --bootstrap (a controller) or --broker (a cluster's brokers), or both"),
            (("--controller", f"127.0.0.1:{port}"), "--controller needs --bootstrap"),
            (("--broker", "no-port"), "expected HOST:PORT, got 'no-port'"),
            (("--broker", f"127.0.0.1:{port}", "--check-timeout", "0"),
             "--check-timeout must be positive")):
        status, out, err = _conformance(capsys, *args)
        assert (status, out) == (2, ""), args
        assert err.splitlines() == [f"kraftpy conformance: {message}"], args


def test_a_server_that_is_not_kafka_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """Something else on the port (here an HTTP server's refusal): exit 2, one line."""
    import threading

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]

        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(1024)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        status, out, err = _conformance(capsys, "--broker", f"127.0.0.1:{port}")
        thread.join(10)
    assert (status, out) == (2, "")
    assert err.splitlines() == [  # "HTTP" read as a frame size
        "kraftpy conformance: broker: not a Kafka response: frame size 1213486160 is larger "
        "than the maximum 100000000 (field size, offset 0)"]
