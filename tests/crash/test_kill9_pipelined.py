"""kill -9 during overlapped commit rounds: no acknowledged producer-id block is ever lost.

A fresh interpreter runs the node's commit path (`Quorum` on a real MetadataStorage) with
brokers taking producer-id blocks, arrivals spread so that records are appended while the
previous round's fsync runs; it is killed with SIGKILL at a random moment, over and over.
After each kill the data dir recovers, and every block acknowledged before the kill is
covered by the recovered counter (its ProducerIdsRecord is in the log); blocks acknowledged
across all runs never overlap. Bounded by kills AND wall time.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kraftpy.controller.log.fsync_ring import FsyncRing
from kraftpy.controller.log.storage import MetadataStorage
from kraftpy.controller.quorum_controller import QuorumController
from support import quorum_crash_writer

pytestmark = pytest.mark.slow

KILLS = int(os.environ.get("KRAFTPY_PIPELINED_KILLS", "12"))
SECONDS = float(os.environ.get("KRAFTPY_PIPELINED_SECONDS", "45"))
WRITERS = 24


def _run_until_killed(data: Path, first_broker: int, seed: int, out: Path,
                      rng: random.Random) -> list[str]:
    with out.open("wb") as sink:
        child = subprocess.Popen(
            [sys.executable, quorum_crash_writer.__file__, str(data), str(first_broker),
             str(WRITERS), str(seed)],
            stdout=sink, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while b"R\n" not in out.read_bytes():
            assert child.poll() is None, f"the writer exited ({child.returncode})"
            assert time.monotonic() < deadline, "the writer never got its brokers registered"
            time.sleep(0.01)
        time.sleep(rng.uniform(0.02, 0.4))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    text = out.read_text()
    complete = text[: text.rfind("\n") + 1]  # a line cut by the kill is not evidence
    return complete.splitlines()


def _recovered_next_producer_id(data: Path) -> int:
    storage = MetadataStorage.open(data, node_id=1)
    try:
        controller = QuorumController(quorum_crash_writer.settings())
        storage.replay_into(controller)
        return controller.producer_ids.next_producer_id
    finally:
        storage.close()
        (data / ".kafka_cleanshutdown").unlink()  # the next run recovers as after a crash


def test_kill9_during_overlapped_rounds_loses_no_acknowledged_block(tmp_path: Path) -> None:
    data = tmp_path / "data"
    rng = random.Random(20261121)
    blocks: list[tuple[int, int]] = []
    kills = overlapped = 0
    modes: set[str] = set()
    deadline = time.monotonic() + SECONDS
    while kills < KILLS and time.monotonic() < deadline:
        lines = _run_until_killed(data, 1000 * (kills + 1), kills, tmp_path / "out", rng)
        kills += 1
        acked = [(int(s), int(n)) for _, s, n in
                 (line.split() for line in lines if line.startswith("A "))]
        reports = [int(line.split()[1]) for line in lines if line.startswith("O ")]
        modes.update(line.split()[1] for line in lines if line.startswith("M "))
        overlapped += reports[-1] if reports else 0
        next_id = _recovered_next_producer_id(data)
        for start, length in acked:
            assert start + length <= next_id, (
                f"kill {kills}: block {start}+{length} was acknowledged, but the recovered "
                f"log only reaches producer id {next_id}")
        blocks.extend(acked)
    assert kills >= min(KILLS, 5), f"only {kills} kills fitted in {SECONDS}s"
    assert len(blocks) > kills * 10
    ordered = sorted(blocks)
    for (start, length), (after, _) in zip(ordered, ordered[1:], strict=False):
        assert start + length <= after, f"blocks {start}+{length} and {after} overlap"
    assert overlapped > 0, "no record was appended while a round was being fsynced"
    # Both ways of fsyncing a round were killed, where this kernel offers an io_uring.
    ring = FsyncRing.open()
    if ring is not None:
        ring.close()
    assert modes == ({"ring", "thread"} if ring is not None else {"thread"}), modes
