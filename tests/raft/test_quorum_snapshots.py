"""Snapshots in a quorum of three `kraftpy serve` voters, with small segments and snapshots
every few kilobytes: every voter snapshots its committed state and deletes the segments that
snapshot covers; a follower stopped (kill -9) meanwhile finds, when it comes back, that the
leader's log starts past its own end, so it downloads the leader's snapshot by FetchSnapshot,
installs it and follows from there. Afterwards the three voters' committed states agree, no
producer-id block was granted twice (`kraftpy pid-audit` over the three dirs), and Kafka 4.1's
DumpLogSegments reads the snapshots the quorum wrote (the downloaded one included) as
`kraftpy dump-log` prints them.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from kraftpy.controller.log.segment import parse_segment_name
from kraftpy.controller.log.snapshots import parse_snapshot_name
from kraftpy.tools.broker_sim import BrokerSim
from support.kafka import run_tool
from support.server import KraftpyServer, quorum_leader, quorum_servers, start_quorum, stop_quorum

SMALL = {"metadata.log.segment.bytes": "4096",
         "metadata.log.max.record.bytes.between.snapshots": "2500",
         "metadata.log.max.snapshot.interval.ms": "1000"}
BROKER_ID = 100
STATE_KEYS = ("metadata_version", "features", "brokers", "topics", "producer_ids",
              "transactions", "acls")


def _partition(srv: KraftpyServer) -> Path:
    return srv.data_dir / "__cluster_metadata-0"


def _segments(srv: KraftpyServer) -> list[int]:
    return sorted(b for p in _partition(srv).iterdir()
                  if (b := parse_segment_name(p.name)) is not None)


def _snapshots(srv: KraftpyServer) -> list[int]:
    return sorted(sid.end_offset for p in _partition(srv).iterdir()
                  if (sid := parse_snapshot_name(p.name)) is not None)


def _log_end(srv: KraftpyServer) -> int:
    from kraftpy.controller.log.partition_log import PartitionLog

    log = PartitionLog.open(_partition(srv), read_only=True)
    try:
        return log.log_end_offset
    finally:
        log.close()


def _state(srv: KraftpyServer) -> dict:
    done = subprocess.run([sys.executable, "-m", "kraftpy.tools", "metadata-state", "--json",
                           str(srv.data_dir)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def _allocate_until(broker: BrokerSim, done, blocks: list[tuple[int, int]],
                    timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the quorum did not snapshot and trim in time"
        blocks.append(broker.allocate())


def test_a_follower_behind_the_log_start_catches_up_by_fetch_snapshot(
        tmp_path: Path, kafka_jars: Path) -> None:
    servers = quorum_servers(tmp_path, overrides=SMALL)
    blocks: list[tuple[int, int]] = []
    try:
        start_quorum(servers)
        leader = quorum_leader(servers)
        broker = BrokerSim(("127.0.0.1", leader.controller_port), BROKER_ID,
                           cluster_id=leader.cluster_id(), timeout=10.0)
        broker.register()
        for _ in range(5):
            blocks.append(broker.allocate())
        behind = next(s for s in servers if s is not leader)
        other = next(s for s in servers if s is not leader and s is not behind)
        time.sleep(1.0)  # it fetches the grants so far
        behind.kill()
        stopped_at = _log_end(behind)
        assert stopped_at > 0

        def trimmed() -> bool:  # both running voters snapshotted past it and dropped its offsets
            return all(_segments(s)[0] > stopped_at and _snapshots(s)
                       and _snapshots(s)[-1] > stopped_at for s in (leader, other))
        _allocate_until(broker, trimmed, blocks)
        assert len(_segments(leader)) < 6, "old segments are deleted as snapshots cover them"

        leader_start, leader_snapshots = _segments(leader)[0], len(_snapshots(leader))
        restarted = time.monotonic()
        behind.start(60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "installed snapshot" not in behind.log_tail(400):
            blocks.append(broker.allocate())
            time.sleep(0.1)
        tail = behind.log_tail(400)
        assert "installed snapshot" in tail, tail
        assert "downloading snapshot" in tail
        installed = _snapshots(behind)[-1]
        assert installed > stopped_at
        caught_up_s = time.monotonic() - restarted
        print(f"follower stopped at offset {stopped_at}; the leader's log then started at "
              f"{leader_start} ({leader_snapshots} snapshots kept); restarted, it installed "
              f"snapshot {installed} within {caught_up_s:.2f} s of its start; "
              f"{len(blocks)} blocks granted")
        for _ in range(20):  # it follows the leader from the snapshot on
            blocks.append(broker.allocate())
        broker.close()
        time.sleep(2.0)
        assert not list(_partition(behind).glob("*.part")), "a partial snapshot file was left"
    finally:
        stop_quorum(servers)
    assert _segments(behind)[0] >= installed
    assert not [p for p in _partition(behind).iterdir() if p.name.endswith(".deleted")]

    # The committed state every voter rebuilds from its newest snapshot and log (offsets and
    # epochs the replay saw differ with where each snapshot was cut; the state does not).
    states = [{key: _state(s)[key] for key in STATE_KEYS} for s in servers]
    assert states[0]["producer_ids"]["next_producer_id"] == sum(blocks[-1])
    for srv, state in zip(servers[1:], states[1:], strict=True):
        assert state == states[0], f"{srv.root.name}'s committed state differs"
    starts = [first for first, _ in blocks]
    assert len(set(starts)) == len(starts), "a block acknowledged twice"
    audit = subprocess.run(
        [sys.executable, "-m", "kraftpy.tools", "pid-audit",
         *(str(s.data_dir) for s in servers)], capture_output=True, text=True, timeout=120)
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-3000:]

    for srv in (leader, behind):  # Kafka reads the snapshots the quorum wrote
        path = sorted(_partition(srv).glob("*.checkpoint"))[-1]
        kafka = run_tool("DumpLogSegments", "--cluster-metadata-decoder", "--files",
                         str(path)).check()
        assert "invalid" not in kafka.stdout.lower(), kafka.stdout[-2000:]
        ours = subprocess.run([sys.executable, "-m", "kraftpy.tools", "dump-log",
                               "--no-progress", str(path)], capture_output=True, text=True,
                              timeout=120)
        assert kafka.stdout.splitlines() == ours.stdout.splitlines(), path
        assert "PRODUCER_IDS_RECORD" in kafka.stdout
