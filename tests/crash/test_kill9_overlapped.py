"""kill -9 during overlapped fsync rounds: no acknowledged producer-id block is ever lost.

A fresh interpreter runs a lone voter under 64 writers whose rounds are split in two halves,
each fsynced by io_uring while the loop handles the other (`tests/support/ring_crash_writer.py`);
it is killed with SIGKILL at a random moment, over and over, on the same data dir. After each
kill the data dir recovers as the next start recovers it, and every block acknowledged before
the kill is below the recovered next producer id (its ProducerIdsRecord is in the log); blocks
acknowledged across all runs never overlap. Bounded by kills and by wall time.
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
from kraftpy.controller.log.storage import CLEAN_SHUTDOWN
from support import ring_crash_writer
from support.lone_quorum import open_lone

pytestmark = pytest.mark.slow

KILLS = int(os.environ.get("KRAFTPY_OVERLAPPED_KILLS", "10"))
SECONDS = float(os.environ.get("KRAFTPY_OVERLAPPED_SECONDS", "60"))
WRITERS = 64


def _run_until_killed(data: Path, first_broker: int, seed: int, out: Path,
                      rng: random.Random) -> list[str]:
    with out.open("wb") as sink:
        child = subprocess.Popen(
            [sys.executable, ring_crash_writer.__file__, str(data), str(first_broker),
             str(WRITERS), str(seed)], stdout=sink, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while b"R\n" not in out.read_bytes():
            assert child.poll() is None, f"the writer exited ({child.returncode})"
            assert time.monotonic() < deadline, "the writer never got its brokers registered"
            time.sleep(0.01)
        time.sleep(rng.uniform(0.05, 0.5))
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    text = out.read_text()
    return text[: text.rfind("\n") + 1].splitlines()  # a line cut by the kill is no evidence


def _recovered_next_producer_id(data: Path) -> int:
    quorum = open_lone(data)
    try:
        return quorum.controller.producer_ids.next_producer_id
    finally:
        quorum.storage.close()
        (data / CLEAN_SHUTDOWN).unlink(missing_ok=True)  # the next run recovers as after a kill


def test_kill9_during_overlapped_rounds_loses_no_acknowledged_block(tmp_path: Path) -> None:
    data = tmp_path / "data"
    rng = random.Random(20261203)
    blocks: list[tuple[int, int]] = []
    kills = during = ring_rounds = 0
    modes: set[str] = set()
    deadline = time.monotonic() + SECONDS
    while kills < KILLS and time.monotonic() < deadline:
        lines = _run_until_killed(data, 1000 * (kills + 1), kills, tmp_path / "out", rng)
        kills += 1
        acked = [(int(s), int(n)) for _, s, n in
                 (line.split() for line in lines if line.startswith("A "))]
        reports = [line.split()[1:] for line in lines if line.startswith("O ")]
        modes.update(line.split()[1] for line in lines if line.startswith("M "))
        if reports:
            during += int(reports[-1][0])
            ring_rounds += int(reports[-1][1])
        next_id = _recovered_next_producer_id(data)
        for start, length in acked:
            assert start + length <= next_id, (
                f"kill {kills}: block {start}+{length} was acknowledged, but the recovered "
                f"log only reaches producer id {next_id}")
        blocks.extend(acked)
    assert kills >= min(KILLS, 4), f"only {kills} kills fitted in {SECONDS}s"
    assert len(blocks) > kills * WRITERS
    ordered = sorted(blocks)
    for (start, length), (after, _) in zip(ordered, ordered[1:], strict=False):
        assert start + length <= after, f"blocks {start}+{length} and {after} overlap"
    ring = FsyncRing.open()
    if ring is None:  # this kernel refuses io_uring: the runner's own rounds were killed
        assert modes == {"runner"}, modes
    else:
        ring.close()
        assert modes == {"ring"}, modes
        assert ring_rounds > 0 and during > 0, "no record was appended while a round was fsynced"
