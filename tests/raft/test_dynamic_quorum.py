"""KIP-853 on the wire: a dynamic quorum of `kraftpy serve` processes grown and shrunk by
Kafka 4.1's own `kafka-metadata-quorum add-controller / remove-controller`.

Node 1 is formatted `--standalone`, nodes 2 and 3 `--no-initial-controllers`; all three name
node 1 in `controller.quorum.bootstrap.servers`. Nodes 2 and 3 start as observers that fetch
the log; add-controller (run with the node's own config file, as Kafka's tool expects) makes
each a voter once it has caught up, and is answered only after the VotersRecord commits;
remove-controller takes one out again. After every change the quorum still commits (a
simulated broker registers and takes producer-id blocks) and every node's log holds the
same VotersRecords.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kraftpy.controller.log.partition_log import PartitionLog
from kraftpy.protocol.control_records import ControlType, parse_control_key
from kraftpy.protocol.messages.add_raft_voter_request import AddRaftVoterRequest, Listener
from kraftpy.protocol.messages.voters_record import VotersRecord
from kraftpy.tools.broker_sim import BrokerSim
from kraftpy.tools.kafka_connection import KafkaConnection
from support.kafka import run_tool
from support.server import HOST, KraftpyServer, free_port, quorum_leader, stop_quorum

pytestmark = pytest.mark.slow


def _format(srv: KraftpyServer, cluster_id: str, flag: str) -> str:
    done = subprocess.run([sys.executable, "-m", "kraftpy.tools", "storage", "format", "-c",
                           str(srv.config_path), "--cluster-id", cluster_id, flag],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    meta = (srv.data_dir / "meta.properties").read_text()
    return re.search(r"directory.id=(\S+)", meta).group(1)  # type: ignore[union-attr]


def _voter_sets(srv: KraftpyServer) -> list[list[int]]:
    """The voter ids of every VotersRecord in a node's metadata log, in order."""
    log = PartitionLog.open(srv.data_dir / "__cluster_metadata-0", read_only=True)
    try:
        out = []
        for batch in log.read():
            if batch.is_control:
                for rec in batch.records():
                    if parse_control_key(rec.key) == ControlType.KRAFT_VOTERS:
                        record = VotersRecord.decode(rec.value, 0)
                        out.append(sorted(v.voter_id for v in record.voters))
        return out
    finally:
        log.close()


def _voters_offset(srv: KraftpyServer) -> int:
    log = PartitionLog.open(srv.data_dir / "__cluster_metadata-0", read_only=True)
    try:
        return max(rec.offset for batch in log.read() if batch.is_control
                   for rec in batch.records()
                   if parse_control_key(rec.key) == ControlType.KRAFT_VOTERS)
    finally:
        log.close()


def _snapshot_voters(srv: KraftpyServer, past: int) -> list[int] | None:
    """The voter ids in the newest snapshot ending past `past`, None if there is none yet."""
    from kraftpy.controller.log.snapshots import newest_whole_snapshot
    from kraftpy.controller.raft.voters import from_control

    snapshot, _ = newest_whole_snapshot(srv.data_dir / "__cluster_metadata-0")
    if snapshot is None or snapshot.snapshot_id.end_offset <= past:
        return None
    record = from_control(snapshot.control)[1]
    return None if record is None else sorted(v.voter_id for v in record.voters)


def _quorum(root: Path) -> tuple[list[KraftpyServer], str]:
    from kraftpy.protocol.uuid import kafka_uuid_str, random_kafka_uuid

    cluster_id = kafka_uuid_str(random_kafka_uuid())
    ports = [(free_port(), free_port()) for _ in range(3)]
    bootstrap = f"{HOST}:{ports[0][1]}"
    servers = [KraftpyServer(root / f"node{i + 1}", {
        "node.id": str(i + 1), "controller.quorum.bootstrap.servers": bootstrap,
        "metadata.log.max.record.bytes.between.snapshots": "2000"},
        client_port=client, controller_port=controller)
        for i, (client, controller) in enumerate(ports)]
    return servers, cluster_id


def _commits(leader: KraftpyServer, cluster_id: str, broker_id: int) -> None:
    broker = BrokerSim((HOST, leader.controller_port), broker_id, cluster_id=cluster_id)
    broker.register()
    first = broker.allocate()
    assert first[1] == 1000


def _wait_for(check, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_add_and_remove_controllers_with_kafkas_tool(tmp_path: Path, kafka_jars: Path) -> None:
    servers, cluster_id = _quorum(tmp_path)
    one, two, three = servers
    first = _format(one, cluster_id, "--standalone")
    directories = {2: _format(two, cluster_id, "--no-initial-controllers"),
                   3: _format(three, cluster_id, "--no-initial-controllers")}
    try:
        for srv in servers:
            srv.launch()
        for srv in servers:
            srv.wait_answering(60)
        assert quorum_leader(servers, timeout=15) is one
        _commits(one, cluster_id, 100)
        assert "as observer 2 of []" in two.log_text()  # no voters: --no-initial-controllers

        for srv in (two, three):
            added = run_tool("MetadataQuorumCommand", "--bootstrap-controller", one.controller,
                             "--command-config", str(srv.config_path), "add-controller",
                             timeout=120)
            node_id = int(srv.properties["node.id"])
            assert added.returncode == 0, added.stdout + added.stderr
            assert (f"Added controller {node_id} with directory id "
                    f"{directories[node_id]} and endpoints: CONTROLLER://{srv.controller}"
                    in added.stdout)
        assert _voter_sets(one)[-1] == [1, 2, 3]
        _commits(one, cluster_id, 101)
        _wait_for(lambda: all(_voter_sets(s)[-1:] == [[1, 2, 3]] for s in servers))
        # a snapshot past the change carries the voter set in force at its offset
        _wait_for(lambda: _snapshot_voters(one, _voters_offset(one)) == [1, 2, 3], 30)
        # Kafka's tool lists the three voters with their directory ids
        replication = run_tool("MetadataQuorumCommand", "--bootstrap-controller",
                               one.controller, "describe", "--replication").check().stdout
        rows = [line.split() for line in replication.splitlines()[1:] if line.strip()]
        assert sorted((int(r[0]), r[1]) for r in rows if r[-1] in ("Leader", "Follower")) == \
            sorted({1: first, **directories}.items()), replication

        # one change at a time, the same id twice, a voter without a directory: Kafka's codes
        with KafkaConnection((HOST, one.controller_port)) as conn:
            again = conn.request(AddRaftVoterRequest(
                cluster_id=cluster_id, timeout_ms=30000, voter_id=2,
                voter_directory_id=_uuid(directories[2]),
                listeners=[Listener(name="CONTROLLER", host=HOST, port=two.controller_port)]),
                0)
            assert again.error_code == 126  # DUPLICATE_VOTER
            stranger = conn.request(AddRaftVoterRequest(
                cluster_id="wrong", timeout_ms=30000, voter_id=9,
                voter_directory_id=_uuid(directories[2]), listeners=[]), 0)
            assert stranger.error_code == 104  # INCONSISTENT_CLUSTER_ID
        with KafkaConnection((HOST, two.controller_port)) as conn:
            follower = conn.request(AddRaftVoterRequest(
                cluster_id=cluster_id, timeout_ms=30000, voter_id=9,
                voter_directory_id=_uuid(directories[2]), listeners=[]), 0)
            assert follower.error_code == 6  # NOT_LEADER_OR_FOLLOWER

        removed = run_tool("MetadataQuorumCommand", "--bootstrap-controller", one.controller,
                           "remove-controller", "--controller-id", "3",
                           "--controller-directory-id", directories[3], timeout=120)
        assert removed.returncode == 0, removed.stdout + removed.stderr
        assert f"Removed  KRaft controller 3 with directory id {directories[3]}" \
            in removed.stdout  # Kafka's words, its double space too
        assert _voter_sets(one)[-1] == [1, 2]
        _commits(quorum_leader(servers[:2], timeout=15), cluster_id, 102)

        # the leader removes itself: it answers, then resigns; voter 2 leads alone
        removed = run_tool("MetadataQuorumCommand", "--bootstrap-controller", one.controller,
                           "remove-controller", "--controller-id", "1",
                           "--controller-directory-id", _directory(one), timeout=120)
        assert removed.returncode == 0, removed.stdout + removed.stderr
        assert quorum_leader(servers[:2], timeout=15) is two
        _commits(two, cluster_id, 103)
        _wait_for(lambda: _voter_sets(one)[-1] == [2])
    finally:
        stop_quorum(servers)


def _uuid(text: str):  # type: ignore[no-untyped-def]
    from kraftpy.protocol.uuid import parse_kafka_uuid

    return parse_kafka_uuid(text)


def _directory(srv: KraftpyServer) -> str:
    meta = (srv.data_dir / "meta.properties").read_text()
    return re.search(r"directory.id=(\S+)", meta).group(1)  # type: ignore[union-attr]
