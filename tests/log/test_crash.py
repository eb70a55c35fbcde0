"""Crash safety in real processes: SIGKILL a writer at random moments, then check the log.

After every kill: recovery succeeds, every acknowledged offset is present, offsets hold their
own values in order, and no batch is half there. Most writers are forked from this process
(so a kill can land within milliseconds of the first append); some are fresh interpreters
running the writer as a script. Bounded by kills AND wall time.
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
from kraftpy.controller.log.partition_log import PartitionLog
from kraftpy.controller.log.snapshots import load_newest_snapshot
from support import log_crash_writer

KILLS = int(os.environ.get("KRAFTPY_CRASH_KILLS", "240"))
TIME_BUDGET_S = float(os.environ.get("KRAFTPY_CRASH_SECONDS", "75"))
SCRIPT_EVERY = 24  # every 24th writer is a fresh interpreter
PER_BATCH = 5


def check_log(directory: Path, ops_per_flush: int = 1) -> int:
    """Recover and verify; returns the log end offset."""
    if not directory.exists():  # killed before the writer created it
        return 0
    snapshot = load_newest_snapshot(directory)
    start = 0
    if snapshot is not None:
        assert snapshot.snapshot_id is not None
        start = snapshot.snapshot_id.end_offset
        assert list(snapshot.iter_values()) == [b"%d" % (start - 1)]
    plog = PartitionLog.open(directory, topic_id=log_crash_writer.TOPIC_ID, segment_bytes=16384)
    try:
        assert plog.log_start_offset <= start <= plog.log_end_offset
        expected = None
        for batch in plog.read(start):
            if ops_per_flush == 1:
                assert batch.records_count == PER_BATCH  # a batch is all there or not at all
            else:  # operations sharing a batch: whole ones only, all there or none
                assert batch.records_count % PER_BATCH == 0
                assert 0 < batch.records_count <= PER_BATCH * ops_per_flush
            if expected is not None:
                assert batch.base_offset == expected
            assert batch.values() == [
                b"%d" % o for o in range(batch.base_offset, batch.next_offset)
            ]
            expected = batch.next_offset
        return plog.log_end_offset
    finally:
        plog.close()


def forked_writer(directory: Path, delay: float, ops_per_flush: int = 1) -> bytes:
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: write until killed, never return into pytest
        try:
            os.close(read_end)
            log_crash_writer.run(
                directory, write_end, per_batch=PER_BATCH, ops_per_flush=ops_per_flush
            )
        finally:
            os._exit(3)
    os.close(write_end)
    time.sleep(delay)
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status), f"writer exited by itself ({status})"
    chunks = []
    while chunk := os.read(read_end, 65536):
        chunks.append(chunk)
    os.close(read_end)
    return b"".join(chunks)


def script_writer(directory: Path, delay: float, ops_per_flush: int = 1) -> bytes:
    child = subprocess.Popen(
        [sys.executable, log_crash_writer.__file__, str(directory), "--per-batch", str(PER_BATCH),
         "--ops-per-flush", str(ops_per_flush)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(delay)
    child.send_signal(signal.SIGKILL)
    output, _ = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL
    return output


@pytest.mark.slow
def test_sigkill_loop_loses_no_acknowledged_record(tmp_path: Path) -> None:
    directory = tmp_path / "__cluster_metadata-0"
    rng = random.Random(20240419)
    deadline = time.monotonic() + TIME_BUDGET_S
    kills = acked = restarts_with_data = 0
    while kills < KILLS and time.monotonic() < deadline:
        if kills % SCRIPT_EVERY == SCRIPT_EVERY - 1:
            output = script_writer(directory, 0.3 + rng.random() * 0.4)
        else:
            output = forked_writer(directory, rng.random() * rng.choice([0.005, 0.05, 0.15]))
        kills += 1
        for line in output.decode().splitlines():
            if line.startswith("ACK "):
                acked = max(acked, int(line.split()[1]))
            elif line.startswith("START ") and int(line.split()[1]) > 0:
                restarts_with_data += 1
        end = check_log(directory)
        assert end >= acked, f"kill {kills}: acknowledged up to {acked} but the log ends at {end}"
    assert kills >= min(KILLS, 200), f"only {kills} kills fitted in {TIME_BUDGET_S}s"
    assert acked > 0 and restarts_with_data > kills // 2
    assert load_newest_snapshot(directory) is not None  # kills also crossed snapshot writes


SHARED_KILLS = int(os.environ.get("KRAFTPY_CRASH_SHARED_KILLS", "80"))
SHARED_SECONDS = float(os.environ.get("KRAFTPY_CRASH_SHARED_SECONDS", "30"))
OPS_PER_FLUSH = 8


@pytest.mark.slow
def test_sigkill_loop_with_operations_sharing_batches(tmp_path: Path) -> None:
    """The same loop with a BatchAccumulator: a torn shared batch drops only unacknowledged
    ops."""
    directory = tmp_path / "__cluster_metadata-0"
    rng = random.Random(20261121)
    deadline = time.monotonic() + SHARED_SECONDS
    kills = acked = shared = 0
    while kills < SHARED_KILLS and time.monotonic() < deadline:
        if kills % SCRIPT_EVERY == SCRIPT_EVERY - 1:
            output = script_writer(directory, 0.3 + rng.random() * 0.4, OPS_PER_FLUSH)
        else:
            output = forked_writer(
                directory, rng.random() * rng.choice([0.005, 0.05, 0.15]), OPS_PER_FLUSH
            )
        kills += 1
        for line in output.decode().splitlines():
            if line.startswith("ACK "):
                acked = max(acked, int(line.split()[1]))
        end = check_log(directory, OPS_PER_FLUSH)
        assert end >= acked, f"kill {kills}: acknowledged up to {acked} but the log ends at {end}"
    assert kills >= min(SHARED_KILLS, 40), f"only {kills} kills fitted in {SHARED_SECONDS}s"
    plog = PartitionLog.open(directory, topic_id=log_crash_writer.TOPIC_ID, segment_bytes=16384)
    shared = sum(batch.records_count > PER_BATCH for batch in plog.read())
    plog.close()
    assert acked > 0 and shared > 0  # operations did share batches
