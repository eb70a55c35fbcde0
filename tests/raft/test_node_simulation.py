"""Whole nodes under simulated schedules: the server's own assembly on real files, the disk
and the network failing, every state checked against a fresh replay of the committed log.

Each schedule is one seed (`tests/support/node_sim.py`): 3 or 5 voters (one schedule in eight
a lone voter with its transaction log), each node what `open_quorum` builds (recovery, the
raft driver, the controller host, its committed image and snapshot jobs) over a tmpfs;
brokers register, heartbeat, take producer-id blocks and create and delete topics, producers
take ids, all of whoever is the active controller. For 8 simulated seconds the network drops,
delays, duplicates, reorders and partitions, nodes lose power between events or at their N-th
disk operation (inside a flush round, a snapshot write or install, a truncation, a restart's
recovery, a clean stop), fsyncs fail, disks fill up and slow down, nodes stop cleanly; every
node comes back from what its disk holds. After every event: the Raft properties of
`raft_sim.py`, every controller and committed image equal to a fresh replay of the committed
history where it stands, every snapshot written or downloaded too, no answer before its
records are committed, no producer-id block or id acknowledged twice or before it is
committed, nothing fsynced lost by a restart. Then the faults stop: the active controller must
answer and every node catch up within `LIVENESS_MS`.

The same seeds run every time; `KRAFTPY_NODE_SIM_SEED=N KRAFTPY_NODE_SIM_SCHEDULES=1` replays
the schedule of seed N, `KRAFTPY_NODE_SIM_SCHEDULES` sets how many run, and
`HYPOTHESIS_PROFILE=explore` draws a fresh base seed (printed on failure).
"""

from __future__ import annotations

import hashlib
import os
import random
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kraftpy.controller.host import ControllerHost
from kraftpy.controller.log.partition_log import FlushTicket
from kraftpy.controller.raft.actions import Committed
from kraftpy.controller.raft.core import RaftNode
from kraftpy.controller.raft.roles import Leader
from support.node_sim import NodeSim
from support.raft_sim import Faults, SafetyViolation, Sim

SCHEDULES = int(os.environ.get("KRAFTPY_NODE_SIM_SCHEDULES", "200"))
CHUNKS = 2
CHAOS_MS = 8000
# After the faults end: a restarted node's election (a request timeout, an election timeout,
# a lost pre-vote round), a fetch timeout before a dead leader is noticed, then the new
# leader's activation and a broker's heartbeat to register: 15 s covers that with room.
LIVENESS_MS = 15000


def _base_seed() -> int:
    if "KRAFTPY_NODE_SIM_SEED" in os.environ:
        return int(os.environ["KRAFTPY_NODE_SIM_SEED"])
    if os.environ.get("HYPOTHESIS_PROFILE") == "explore":
        return random.SystemRandom().randrange(1 << 30)
    return 0


BASE = _base_seed()


@pytest.fixture(scope="module")
def root() -> Iterator[Path]:
    """A tmpfs when there is one (the nodes' fsyncs cost nothing there), else the disk."""
    shm = Path("/dev/shm")
    parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    with tempfile.TemporaryDirectory(prefix="kraftpy-node-sim-", dir=parent) as path:
        yield Path(path)


def schedule(seed: int, root: Path) -> NodeSim:
    """The settings of seed `seed`'s schedule: 3 or 5 voters (one schedule in eight a lone
    voter, with its transaction log), Kafka's append linger or none, one schedule in four
    with a snapshot retention policy."""
    voters = 1 if seed % 8 == 7 else 3 if seed % 2 else 5
    return NodeSim(seed, root, voters=voters,
                   linger_ms=0 if seed % 3 == 0 else 25,
                   properties={"metadata.max.retention.bytes": "6000"} if seed % 4 == 1
                   else None)


def run_schedule(seed: int, root: Path) -> tuple[dict[str, int], float, tuple]:
    """One schedule: faults for CHAOS_MS, then settled; its stats, how long the quorum took
    to answer and catch up (ms), and what it did (to compare two runs)."""
    with schedule(seed, root) as sim:
        sim.run_until(CHAOS_MS)
        sim.quiet()
        took = sim.settle(LIVENESS_MS)
        stats = {**sim.stats, **{f"power_lost_in_{k}": v for k, v in sim.power_lost_in.items()}}
        return stats, took, (sim.committed, sim.granted, sorted(sim.leaders.items()))


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_whole_nodes_under_disk_and_network_faults(chunk: int, root: Path) -> None:
    totals: dict[str, int] = {}
    worst = 0.0
    seeds = range(BASE + chunk, BASE + SCHEDULES, CHUNKS)
    for seed in seeds:
        try:
            stats, took, _ = run_schedule(seed, root)
        except AssertionError as exc:  # a SafetyViolation, or no liveness once settled
            pytest.fail(f"{exc} (replay: KRAFTPY_NODE_SIM_SEED={seed} "
                        "KRAFTPY_NODE_SIM_SCHEDULES=1)")
        worst = max(worst, took)
        for key, value in stats.items():
            totals[key] = totals.get(key, 0) + value
    print(f"{len(seeds)} schedules, worst recovery {worst:.0f} ms, {totals}")
    # the faults happened: the checks ran over each kind of them
    assert totals["crashes"] > len(seeds) and totals["clean_stops"] > 0
    for where in ("event", "round", "snapshot", "start"):  # power lost inside each of them
        assert totals.get(f"power_lost_in_{where}", 0) > 0, where
    assert totals["failures"] > len(seeds) // 2  # failed fsyncs and full disks
    assert totals["elections"] > len(seeds) and totals["truncations"] > 0
    assert totals["snapshots_written"] > len(seeds) and totals["snapshots_installed"] > 0
    assert totals["acked"] > 10 * len(seeds)


def fingerprint(seed: int, root: Path) -> str:
    stats, took, done = run_schedule(seed, root)
    return hashlib.sha256(repr((sorted(stats.items()), took, done)).encode()).hexdigest()


def test_a_whole_node_schedule_replays_exactly(root: Path) -> None:
    """Same seed, same run, in this process and in another with another hash seed: ids,
    placements, file names and the Raft core's timeouts all draw from the seed, and time is
    the schedule's."""
    seed = BASE + 5
    here = fingerprint(seed, root)
    assert fingerprint(seed, root) == here
    tests = Path(__file__).resolve().parents[1]
    code = ("import sys; from pathlib import Path; from test_node_simulation import fingerprint;"
            f" print(fingerprint({seed}, Path(sys.argv[1])))")
    env = {**os.environ, "PYTHONHASHSEED": "12345",
           "PYTHONPATH": os.pathsep.join([str(tests), str(tests / "raft")])}
    done = subprocess.run([sys.executable, "-c", code, str(root / "elsewhere")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == here


def _first_violation(seeds: range, run: object) -> str:
    for seed in seeds:
        try:
            run(seed)  # type: ignore[operator]
        except SafetyViolation as exc:
            return str(exc)
    raise AssertionError(f"no schedule of seeds {seeds.start}-{seeds.stop - 1} caught it")


def _whole(root: Path) -> object:
    def run(seed: int) -> None:
        with schedule(seed, root) as sim:
            sim.run_until(CHAOS_MS)
    return run


def test_an_answer_released_before_its_commit_is_caught(monkeypatch: pytest.MonkeyPatch,
                                                        root: Path) -> None:
    """A host whose deferred answers go one record early (`end <= hwm + 1`)."""
    def release(self: ControllerHost) -> None:
        hwm = self.hwm
        self.controller.on_committed(hwm, self.txn_durable)
        deferred = self._deferred
        while deferred and deferred[0].end <= hwm + 1:
            waiting = deferred.popleft()
            waiting.resolve(waiting.response)
        self.on_commit()

    monkeypatch.setattr(ControllerHost, "release", release)
    found = _first_violation(range(BASE, BASE + 20), _whole(root))
    print(found)
    assert found.startswith("seed ") and "before" in found and "committed" in found, found


def test_a_committed_image_fed_ahead_of_the_commit_is_caught(
        monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """A leader's records replayed into its committed image as it appends them, not as they
    commit: the image holds state nothing committed."""
    real_write = ControllerHost.write

    def write(self: ControllerHost, result: object, now: int, next_offset: int) -> int:
        end = real_write(self, result, now, next_offset)
        if self._own:
            base, records = self._own.pop()
            for i, (record, version) in enumerate(records):
                self.image.replay(record, version, base + i)
        return end

    monkeypatch.setattr(ControllerHost, "write", write)
    found = _first_violation(range(BASE, BASE + 20), _whole(root))
    print(found)
    assert found.startswith("seed ") and "committed image" in found, found


def test_a_flush_round_without_its_fsync_is_caught(monkeypatch: pytest.MonkeyPatch,
                                                   root: Path) -> None:
    """Flush rounds that report the log durable without fsyncing it: a power loss then
    takes records the node counted as on its disk."""
    monkeypatch.setattr(FlushTicket, "fsync", lambda self: None)
    found = _first_violation(range(BASE, BASE + 20), _whole(root))
    print(found)
    assert found.startswith("seed ") and ("fsynced" in found or "committed" in found), found


class _LoneCommit(RaftNode):
    """A leader that takes its own log end for the high watermark, not a majority's."""

    def _maybe_update_high_watermark(self, s: Leader) -> None:
        end = s.replicas[self.node_id].end_offset
        if end is not None and end > s.epoch_start_offset and end > self.log.high_watermark:
            s.high_watermark = end
            self.log.high_watermark = end
            self._out.append(Committed(end))


def test_a_leader_committing_alone_is_caught() -> None:
    """The core simulation, through the same driver: a committed entry lost or changed."""
    def run(seed: int) -> None:
        Sim(seed, voters=3, faults=Faults(), make_node=_LoneCommit).run_until(CHAOS_MS)

    found = _first_violation(range(BASE, BASE + 20), run)
    print(found)
    assert found.startswith("seed ") and "committed" in found, found
