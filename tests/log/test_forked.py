"""`forked.call_in_child` and `call_in_children`: the work a large snapshot's encoding is
handed to, and the snapshot written in parts by children at once.

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


def test_children_run_at_once_and_every_one_is_waited_for(tmp_path: Path) -> None:
    """Each child waits until all have started (each one's file is there): they run at once.
    A failure comes back once every child has finished, the first in the order given."""
    count = 3

    def work(i: int) -> None:
        (tmp_path / f"started-{i}").write_bytes(b"")
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("started-*"))) < count:
            if time.monotonic() > deadline:
                raise TimeoutError("the other children never started")
            time.sleep(0.005)
        (tmp_path / f"done-{i}").write_bytes(b"")

    forked.call_in_children([lambda i=i: work(i) for i in range(count)])
    assert sorted(p.name for p in tmp_path.glob("done-*")) == ["done-0", "done-1", "done-2"]

    def fail(text: str) -> None:
        raise ValueError(text)

    slow = tmp_path / "slow"
    with pytest.raises(RuntimeError, match="ValueError: first"):
        forked.call_in_children([lambda: fail("first"), lambda: (time.sleep(0.3),
                                                                 slow.write_bytes(b"x")),
                                 lambda: fail("second")])
    assert slow.exists()  # the slow one was waited for, though the first had failed


@pytest.mark.parametrize("count", [1, 2, 3, 5])
def test_a_snapshot_written_in_parts_holds_the_records_of_one_written_whole(
        tmp_path: Path, count: int) -> None:
    """Parts encoded by children at once and joined are one valid file: offsets run on from
    part to part (our reader and kafka-python's check them, and every CRC), the values are
    those of the file one writer writes, and no part file is left behind."""
    from kafka.record.memory_records import MemoryRecords
    from kraftpy.controller.log.snapshots import (
        SnapshotId,
        read_snapshot,
        write_snapshot,
        write_snapshot_in_parts,
    )
    from support.controller_harness import Harness

    h = Harness()
    h.brokers_and_topics([t * 3 for t in range(7)])
    sid = SnapshotId(h.end, 2)
    control = [(b"\x00\x00\x00\x05", b"\x00\x00\x00\x00")]  # any control record
    whole = tmp_path / "whole"
    whole.mkdir()
    write_snapshot(whole, sid, h.qc.snapshot_values(), last_contained_log_timestamp=7,
                   timestamp=9, control=control)
    parted = tmp_path / "parts"
    parted.mkdir()
    parts = h.qc.snapshot_value_parts(count)
    assert (len(parts) > 1) is (count > 1) and len(parts) <= count
    path = write_snapshot_in_parts(parted, sid, parts, last_contained_log_timestamp=7,
                                   timestamp=9, control=control, run=forked.call_in_children)
    assert [p.name for p in parted.iterdir()] == [sid.file_name]
    ours = read_snapshot(path)
    assert list(ours.iter_values()) == list(read_snapshot(whole / sid.file_name).iter_values())
    assert ours.last_contained_log_timestamp == 7
    records = MemoryRecords(path.read_bytes())
    offsets = []
    while (batch := records.next_batch()) is not None:
        assert batch.validate_crc()
        offsets += [r.offset for r in batch]
    assert offsets == list(range(len(offsets)))
    assert len(offsets) == 2 + len(control) + sum(c for c, _ in parts)  # header, footer


def test_a_part_that_fails_leaves_no_snapshot_and_no_part_file(tmp_path: Path) -> None:
    from kraftpy.controller.log.snapshots import SnapshotId, write_snapshot_in_parts

    def broken() -> list[bytes]:
        raise ValueError("no values")
        yield b""  # a generator, read in the child

    sid = SnapshotId(10, 1)
    with pytest.raises(RuntimeError, match="no values"):
        write_snapshot_in_parts(tmp_path, sid, [(3, [b"\x01\x03\x00"] * 3), (7, broken())],
                                last_contained_log_timestamp=0, timestamp=0,
                                run=forked.call_in_children)
    assert list(tmp_path.iterdir()) == []
