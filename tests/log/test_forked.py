"""`forked.call_in_child`: the work a large snapshot's encoding is handed to.

What the child writes is there when the call returns; what it raises comes back (an OSError
with its errno, anything else as a RuntimeError naming it); it keeps none of the parent's
descriptors (a socket the parent closes is closed), and it does not outlive the thread that
forked it.
"""

from __future__ import annotations

import errno
import os
import socket
import threading
import time
from pathlib import Path

import pytest
from kraftpy.controller.log import forked

pytestmark = pytest.mark.skipif(not forked.available(), reason="fork and prctl are Linux's")


def test_the_childs_file_is_there_when_the_call_returns(tmp_path: Path) -> None:
    target = tmp_path / "out"
    forked.call_in_child(lambda: target.write_bytes(b"written by %d" % os.getpid()))
    assert target.read_bytes().startswith(b"written by ")
    assert target.read_bytes() != b"written by %d" % os.getpid()


def test_an_oserror_in_the_child_comes_back_with_its_errno(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-dir" / "file"
    with pytest.raises(OSError) as raised:
        forked.call_in_child(lambda: missing.write_bytes(b"x"))
    assert raised.value.errno == errno.ENOENT
    assert str(missing) in str(raised.value)


def test_another_exception_comes_back_as_a_runtime_error() -> None:
    def broken() -> None:
        raise ValueError("an image that cannot be encoded")

    with pytest.raises(RuntimeError, match="ValueError: an image that cannot be encoded"):
        forked.call_in_child(broken)


def test_the_child_keeps_none_of_the_parents_descriptors(tmp_path: Path) -> None:
    ours, peer = socket.socketpair()
    listing = tmp_path / "fds"
    try:
        forked.call_in_child(lambda: listing.write_text(" ".join(os.listdir("/proc/self/fd"))))
        assert ours.fileno() > 2
        assert str(ours.fileno()) not in listing.read_text().split()
        # ...so a close here is seen by the peer at once, child or no child.
        ours.close()
        peer.settimeout(10)
        assert peer.recv(1) == b""
    finally:
        ours.close()
        peer.close()


def test_the_child_dies_with_the_thread_that_forked_it(tmp_path: Path) -> None:
    """PR_SET_PDEATHSIG: the child of a parent that is gone does not go on writing. Here the
    parent is a process of its own that forks a child sleeping for a minute and is then killed:
    the child must be gone soon after."""
    pid_file = tmp_path / "child-pid"
    code = f"""
import os, time, threading
from pathlib import Path
from kraftpy.controller.log import forked
def work():
    Path({str(pid_file)!r}).write_text(str(os.getpid()))
    time.sleep(60)
threading.Thread(target=forked.call_in_child, args=(work,)).start()
time.sleep(60)
"""
    import subprocess
    import sys

    parent = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline, "the child never started"
            time.sleep(0.05)
        child = int(pid_file.read_text())
        parent.kill()
        parent.wait(30)
        deadline = time.monotonic() + 30
        while _alive(child):
            assert time.monotonic() < deadline, "the child outlived its parent"
            time.sleep(0.05)
    finally:
        parent.kill()
        parent.wait(30)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_a_thread_can_fork_while_another_runs() -> None:
    """The server forks from a worker thread while its event loop runs on."""
    stop = threading.Event()
    spins = [0]

    def busy() -> None:
        while not stop.is_set():
            spins[0] += 1

    runner = threading.Thread(target=busy)
    runner.start()
    try:
        for _ in range(20):
            forked.call_in_child(lambda: sum(range(10_000)))
    finally:
        stop.set()
        runner.join()
    assert spins[0] > 0


def test_a_snapshot_written_by_the_child_is_byte_for_byte_the_threads(tmp_path: Path) -> None:
    """The child runs the very encoding a worker thread runs, so what Kafka's tools read of a
    thread-written snapshot (tests/oracle/test_kafka_reads_kraftpy_log.py) holds of it."""
    from kraftpy.controller.log.snapshots import SnapshotId, write_snapshot
    from kraftpy.protocol.metadata_frame import encode_metadata_record
    from support.controller_harness import Harness

    h = Harness()
    for broker_id in (101, 102, 103):
        h.allocate(broker_id, h.unfenced_broker(broker_id))
    sid = SnapshotId(h.end, 1)
    written = {}
    for how in ("thread", "child"):
        directory = tmp_path / how
        directory.mkdir()

        def write(directory: Path = directory) -> None:
            write_snapshot(directory, sid, (encode_metadata_record(r, v)
                                            for r, v in h.qc.snapshot_records()),
                           last_contained_log_timestamp=1234, timestamp=5678)

        forked.call_in_child(write) if how == "child" else write()
        written[how] = (directory / sid.file_name).read_bytes()
    assert len(written["child"]) > 200
    assert written["child"] == written["thread"]
