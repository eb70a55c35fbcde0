"""KIP-853 as brokers use it: a kraft.version 1 quorum whose one voter is kraftpy.

`kraftpy storage format --standalone` writes what Kafka's does (KRaftVersion and Voters in the
raft bootstrap snapshot, meta.properties' directory.id); the first leader writes both into its
first LeaderChange batch and every snapshot carries them, so a broker configured with only
`controller.quorum.bootstrap.servers` finds the leader's CONTROLLER endpoint in the log,
registers and runs. A directory Kafka's own StorageTool formats with `--standalone` runs under
kraftpy too. A voter set naming other controllers needs controller.quorum.bootstrap.servers:
without them it is refused with exit 2 and one line, the directory unchanged.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from support.kafka import KafkaNode, run_tool
from support.server import KraftpyServer

pytestmark = pytest.mark.slow


def _format(srv: KraftpyServer, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftpy.tools", "storage", "format", "-c",
                           str(srv.config_path), *flags], capture_output=True, text=True,
                          timeout=60)


def _dump(path: Path) -> list[str]:
    """DumpLogSegments' record lines of a file, ids, ports and times masked."""
    out = run_tool("DumpLogSegments", "--cluster-metadata-decoder", "--files",
                   str(path)).check().stdout
    lines = [line for line in out.splitlines() if line.startswith("| offset:")]
    lines = [re.sub(r"CreateTime: \d+", "CreateTime: T", line) for line in lines]
    lines = [re.sub(r'"(voterDirectoryId)":"[^"]+"', r'"\1":"D"', line) for line in lines]
    lines = [re.sub(r'"port":\d+', '"port":P', line) for line in lines]
    return [re.sub(r'"lastContainedLogTimestamp":\d+', '"lastContainedLogTimestamp":T', line)
            for line in lines]


def test_a_broker_with_bootstrap_servers_runs_on_a_standalone_kraftpy(
        tmp_path: Path, kafka_jars: Path) -> None:
    srv = KraftpyServer(tmp_path / "kraftpy",
                        {"metadata.log.max.record.bytes.between.snapshots": "2000"})
    formatted = _format(srv, "--standalone")
    assert formatted.returncode == 0, formatted.stderr
    meta = (srv.data_dir / "meta.properties").read_text()
    directory_id = re.search(r"directory.id=(\S+)", meta).group(1)
    srv.start()
    broker = KafkaNode(tmp_path / "broker", roles="broker", node_id=2,
                       bootstrap_servers=[srv.controller], cluster_id=srv.cluster_id())
    try:
        broker.format()
        broker.start(timeout=90)
        status = run_tool("MetadataQuorumCommand", "--bootstrap-controller", srv.controller,
                          "describe", "--status").check().stdout
        assert f'"directoryId": "{directory_id}"' in status
        assert re.search(r'CurrentObservers:\s+\[\{"id": 2', status), status
        features = run_tool("FeatureCommand", "--bootstrap-server", broker.bootstrap,
                            "describe").check().stdout
        assert re.search(r"Feature: kraft.version\tSupportedMinVersion: 0\t"
                         r"SupportedMaxVersion: 1\tFinalizedVersionLevel: 1", features)
        run_tool("TopicCommand", "--bootstrap-server", broker.bootstrap, "--create",
                 "--topic", "t", "--partitions", "40").check()  # enough records to snapshot
    finally:
        broker.stop()
        srv.stop()
    # Snapshots carry the voters after their header; a restart writes them no second time.
    mdir = srv.data_dir / "__cluster_metadata-0"
    newest = sorted(mdir.glob("*.checkpoint"))[-1]
    assert newest.name != "00000000000000000000-0000000000.checkpoint", "no snapshot was taken"
    assert [line.split("headerKeys: [] ")[1].split(" ")[0] for line in _dump(newest)[:3]] == [
        "SnapshotHeader", "KRaftVersion", "KRaftVoters"]
    srv.start()
    srv.stop()
    lines = [line for p in sorted(mdir.glob("*.log")) for line in _dump(p)]
    assert sum("KRaftVoters" in line for line in lines) <= 1


def test_kraftpy_writes_what_kafkas_standalone_format_and_first_epoch_write(
        tmp_path: Path, kafka_jars: Path) -> None:
    ours = KraftpyServer(tmp_path / "kraftpy")
    assert _format(ours, "--standalone").returncode == 0
    ours.start()
    ours.stop()
    theirs = KafkaNode(tmp_path / "kafka", roles="controller", node_id=1)
    theirs.format(standalone=True)
    theirs.start()
    theirs.stop()
    bootstrap = "00000000000000000000-0000000000.checkpoint"
    ours_dir, theirs_dir = ours.data_dir / "__cluster_metadata-0", theirs.metadata_dir()
    assert _dump(ours_dir / bootstrap) == _dump(theirs_dir / bootstrap)
    first = "00000000000000000000.log"
    assert _dump(ours_dir / first)[:3] == _dump(theirs_dir / first)[:3]
    assert (ours_dir / "quorum-state").read_text().replace('"leaderEpoch":1', "") == \
        (theirs_dir / "quorum-state").read_text().replace('"leaderEpoch":1', "")


def test_a_directory_kafka_formats_standalone_runs_under_kraftpy(tmp_path: Path,
                                                                  kafka_jars: Path) -> None:
    srv = KraftpyServer(tmp_path / "kraftpy")
    kafka = KafkaNode(tmp_path / "kafka", roles="controller", node_id=1,
                      controller_port=srv.controller_port,
                      overrides={"log.dirs": str(srv.data_dir)})
    kafka.format(standalone=True)
    srv.start()
    broker = KafkaNode(tmp_path / "broker", roles="broker", node_id=2,
                       bootstrap_servers=[srv.controller], cluster_id=kafka.cluster_id)
    try:
        broker.format()
        broker.start(timeout=90)
    finally:
        broker.stop()
        srv.stop()


def test_a_voter_set_of_several_needs_bootstrap_servers(tmp_path: Path,
                                                        kafka_jars: Path) -> None:
    """Kafka's `--initial-controllers` naming two voters, on a node without
    controller.quorum.bootstrap.servers: it would run as the lone voter, so it is refused (exit
    2, one line, nothing changed). kraftpy's own format writes the same voter set Kafka's does
    (tests/raft/test_initial_controllers.py serves it with bootstrap servers)."""
    from kraftpy.controller.log.snapshots import read_snapshot
    from kraftpy.controller.raft.voters import RAFT_BOOTSTRAP_SNAPSHOT

    srv = KraftpyServer(tmp_path / "kraftpy")
    kafka = KafkaNode(tmp_path / "kafka", roles="controller", node_id=1,
                      controller_port=srv.controller_port,
                      overrides={"log.dirs": str(srv.data_dir)})
    others = (f"1@127.0.0.1:{srv.controller_port}:MvDxzVmcRsaTz33bUuRU6A,"
              "2@127.0.0.1:9999:lMhVxdoMS2eUR9pdAYLMKg")
    kafka.format(initial_controllers=others)
    before = {p: p.read_bytes() for p in srv.data_dir.rglob("*") if p.is_file()}
    done = subprocess.run(srv.command(), capture_output=True, text=True, timeout=60,
                          cwd=srv.root)
    assert done.returncode == 2
    errors = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "no controller.quorum.bootstrap.servers" in errors[0], errors
    assert {p: p.read_bytes() for p in srv.data_dir.rglob("*") if p.is_file()} == before
    # kraftpy's own format: the same control records, the same directory id.
    other = KraftpyServer(tmp_path / "other", controller_port=srv.controller_port)
    formatted = _format(other, "--cluster-id", kafka.cluster_id, "--initial-controllers", others)
    assert formatted.returncode == 0, formatted.stderr
    assert "directory.id=MvDxzVmcRsaTz33bUuRU6A" in (other.data_dir / "meta.properties").read_text()
    snapshot = Path("__cluster_metadata-0") / RAFT_BOOTSTRAP_SNAPSHOT
    assert read_snapshot(other.data_dir / snapshot).control == \
        read_snapshot(srv.data_dir / snapshot).control
    other = KraftpyServer(tmp_path / "joiner")
    # A controller that joins a dynamic quorum later (tests/raft/test_dynamic_quorum.py).
    joined = _format(other, "--no-initial-controllers")
    assert joined.returncode == 0 and (other.data_dir / "meta.properties").exists()
