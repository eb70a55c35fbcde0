"""KIP-853's `storage format --initial-controllers` naming three voters, served by three
`kraftpy serve` processes.

Every node is formatted with the same `--initial-controllers 1@..,2@..,3@..` and configured
with `controller.quorum.bootstrap.servers` (no `controller.quorum.voters`), as Kafka 4.1 runs
such a quorum: nodes 1 and 2 by kraftpy's format, node 3 by Kafka 4.1's own `kafka-storage
format`, and node 4 (not in the list; Kafka formats it too, with a new directory id) by
kraftpy's. The three voters elect a leader among themselves, the leader's first epoch writes
the voter set into the log, a broker registers and takes a producer-id block, and node 4
follows as an observer. A node that would run alone (no bootstrap servers) with that set is
refused before anything is written.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kraftpy.controller.log.partition_log import PartitionLog
from kraftpy.protocol.control_records import ControlType, parse_control_key
from kraftpy.protocol.messages.voters_record import VotersRecord
from kraftpy.tools.broker_sim import BrokerSim
from support.kafka import run_tool
from support.server import (
    HOST,
    KraftpyServer,
    describe_quorum,
    free_port,
    quorum_leader,
    stop_quorum,
)

pytestmark = pytest.mark.slow

ELECTION_TIMEOUT_MS = 1000  # Kafka's default controller.quorum.election.timeout.ms
DIRS = {1: "JEXY6aqzQY-32P5TStzaFg", 2: "MvDxzVmcRsaTz33bUuRU6A", 3: "07R5amHmR32VDA6jHkGbTA"}


def _format(srv: KraftpyServer, cluster_id: str, initial: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kraftpy.tools", "storage", "format", "-c",
                           str(srv.config_path), "--cluster-id", cluster_id,
                           "--initial-controllers", initial],
                          capture_output=True, text=True, timeout=60)


def _kafka_format(srv: KraftpyServer, cluster_id: str, initial: str) -> None:
    """Kafka 4.1's `kafka-storage format` of the node's directory (its own config file: a
    controller whose only log dir is kraftpy's data dir)."""
    config = srv.root / "kafka.properties"
    config.write_text(f"process.roles=controller\nnode.id={srv.properties['node.id']}\n"
                      f"controller.listener.names=CONTROLLER\n"
                      f"listeners=CONTROLLER://{srv.controller}\n"
                      f"controller.quorum.bootstrap.servers="
                      f"{srv.properties['controller.quorum.bootstrap.servers']}\n"
                      f"log.dirs={srv.data_dir}\n")
    done = run_tool("StorageTool", "format", "--cluster-id", cluster_id,
                    "--initial-controllers", initial, "-c", str(config))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Formatting dynamic metadata voter directory" in done.stdout


def _voter_sets(srv: KraftpyServer) -> list[list[int]]:
    """The voter ids of every VotersRecord in a node's metadata log, in order."""
    log = PartitionLog.open(srv.data_dir / "__cluster_metadata-0", read_only=True)
    try:
        return [sorted(v.voter_id for v in VotersRecord.decode(rec.value, 0).voters)
                for batch in log.read() if batch.is_control for rec in batch.records()
                if parse_control_key(rec.key) == ControlType.KRAFT_VOTERS]
    finally:
        log.close()


def _wait_for(check, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


class Quorum:
    def __init__(self, servers: list[KraftpyServer], cluster_id: str, elected_s: float) -> None:
        self.servers, self.cluster_id, self.elected_s = servers, cluster_id, elected_s
        self.voters, self.observer = servers[:3], servers[3]


@pytest.fixture(scope="module")
def quorum(tmp_path_factory: pytest.TempPathFactory, kafka_jars: Path) -> Iterator[Quorum]:
    from kraftpy.protocol.uuid import kafka_uuid_str, random_kafka_uuid

    root = tmp_path_factory.mktemp("initial-controllers")
    cluster_id = kafka_uuid_str(random_kafka_uuid())
    ports = [(free_port(), free_port()) for _ in range(4)]
    bootstrap = ",".join(f"{HOST}:{controller}" for _, controller in ports[:3])
    initial = ",".join(f"{i + 1}@{HOST}:{controller}:{DIRS[i + 1]}"
                       for i, (_, controller) in enumerate(ports[:3]))
    servers = [KraftpyServer(root / f"node{i + 1}", {
        "node.id": str(i + 1), "controller.quorum.bootstrap.servers": bootstrap,
        "controller.quorum.election.timeout.ms": str(ELECTION_TIMEOUT_MS)},
        client_port=client, controller_port=controller)
        for i, (client, controller) in enumerate(ports)]
    for srv in servers[:2] + servers[3:]:
        done = _format(srv, cluster_id, initial)
        assert done.returncode == 0, done.stderr
    _kafka_format(servers[2], cluster_id, initial)
    try:
        for srv in servers:
            srv.launch()
        for srv in servers:
            srv.wait_answering(60)
        started = time.monotonic()
        quorum_leader(servers[:3], timeout=15)
        yield Quorum(servers, cluster_id, time.monotonic() - started)
    finally:
        stop_quorum(servers)


def test_each_node_runs_with_the_directory_id_the_list_gave_it(quorum: Quorum) -> None:
    for srv in quorum.voters:
        node_id = int(srv.properties["node.id"])
        meta = (srv.data_dir / "meta.properties").read_text()
        assert re.search(r"directory.id=(\S+)", meta).group(1) == DIRS[node_id]  # type: ignore[union-attr]
        assert f"as voter {node_id} of [1, 2, 3]" in srv.log_text()
    assert "as observer 4 of [1, 2, 3]" in quorum.observer.log_text()


def test_a_leader_is_elected_within_two_election_timeouts(quorum: Quorum) -> None:
    assert quorum.elected_s < 2 * ELECTION_TIMEOUT_MS / 1000, quorum.elected_s
    leader = quorum_leader(quorum.voters, timeout=15)
    # the leader's DescribeQuorum (only a leader answers it, as Kafka's) names the three
    # voters and node 4 as an observer; the followers refuse it
    partition = describe_quorum(leader)
    assert partition.error_code == 0
    assert partition.leader_id == int(leader.properties["node.id"])
    assert sorted(v.replica_id for v in partition.current_voters) == [1, 2, 3]
    _wait_for(lambda: 4 in [o.replica_id for o in describe_quorum(leader).observers])
    for srv in quorum.voters:
        if srv is not leader:
            assert describe_quorum(srv).error_code == 6  # NOT_LEADER_OR_FOLLOWER


def test_a_broker_registers_and_takes_a_producer_id_block(quorum: Quorum) -> None:
    leader = quorum_leader(quorum.voters, timeout=15)
    broker = BrokerSim((HOST, leader.controller_port), 100, cluster_id=quorum.cluster_id)
    broker.register()
    assert broker.allocate()[1] == 1000


def test_every_log_holds_the_voter_set(quorum: Quorum) -> None:
    """The bootstrap snapshot is never replicated: the leader's first epoch writes the set
    into the log, and every node (the observer too) replicates it."""
    _wait_for(lambda: all(_voter_sets(srv)[:1] == [[1, 2, 3]] for srv in quorum.servers))


def test_a_node_that_would_run_alone_is_refused(tmp_path: Path) -> None:
    """The same voter set on a node without controller.quorum.bootstrap.servers: it would run
    as the lone voter and commit without the others' votes, so serve refuses (exit 2) and
    changes nothing."""
    srv = KraftpyServer(tmp_path / "alone")
    initial = (f"1@{HOST}:{srv.controller_port}:{DIRS[1]},2@{HOST}:{free_port()}:{DIRS[2]},"
               f"3@{HOST}:{free_port()}:{DIRS[3]}")
    assert _format(srv, "MkU3OEVBNTcwNTJENDM2Qg", initial).returncode == 0
    before = {p: p.read_bytes() for p in srv.data_dir.rglob("*") if p.is_file()}
    done = subprocess.run(srv.command(), capture_output=True, text=True, timeout=60,
                          cwd=srv.root)
    assert done.returncode == 2
    errors = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line]
    assert len(errors) == 1 and "controller.quorum.bootstrap.servers" in errors[0], errors
    assert {p: p.read_bytes() for p in srv.data_dir.rglob("*") if p.is_file()} == before
