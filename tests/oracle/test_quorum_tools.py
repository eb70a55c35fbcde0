"""Kafka's `kafka-metadata-quorum describe` against three `kraftpy serve` voters, and beside a
Kafka 4.1 quorum of three controllers.

Through any voter (`--bootstrap-controller` naming a follower: every voter answers
DescribeCluster with the Raft leader, and the leader answers DescribeQuorum from its replica
states) the tool shows the leader, the three voters and an observer that fetched; after
AllocateProducerIds load every voter is caught up with lag 0. Against three Kafka controllers
with static voters the same columns come out: the outputs are compared after masking what
differs between any two clusters (ids, ports, offsets, timestamps, who leads).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kraftpy.protocol.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from kraftpy.tools.broker_sim import BrokerSim
from kraftpy.tools.kafka_connection import KafkaConnection
from support.kafka import KafkaNode, random_cluster_id, run_tool
from support.raft import fetch
from support.server import (
    HOST,
    KraftpyServer,
    free_port,
    quorum_leader,
    quorum_servers,
    start_quorum,
    stop_quorum,
)

pytestmark = pytest.mark.slow

TOOL = "MetadataQuorumCommand"
OBSERVER_ID = 100


@pytest.fixture(scope="module")
def kraftpy_quorum(tmp_path_factory: pytest.TempPathFactory, kafka_jars: Path
                   ) -> Iterator[list[KraftpyServer]]:
    servers = quorum_servers(tmp_path_factory.mktemp("kraftpy-quorum"))
    try:
        start_quorum(servers)
        quorum_leader(servers)
        yield servers
    finally:
        stop_quorum(servers)


@pytest.fixture(scope="module")
def kafka_quorum(tmp_path_factory: pytest.TempPathFactory, kafka_jars: Path
                 ) -> Iterator[list[KafkaNode]]:
    root = tmp_path_factory.mktemp("kafka-quorum")
    ports = [free_port() for _ in range(3)]
    voters = [f"{i + 1}@{HOST}:{p}" for i, p in enumerate(ports)]
    cluster_id = random_cluster_id()
    nodes = [KafkaNode(root / f"c{i + 1}", roles="controller", node_id=i + 1,
                       controller_port=p, voters=voters, cluster_id=cluster_id)
             for i, p in enumerate(ports)]
    try:
        for node in nodes:
            node.format()
            node.start(wait=False)
        for node in nodes:
            node.wait_started()
        yield nodes
    finally:
        for node in nodes:
            node.stop()


def _describe(address: str, what: str) -> str:
    run = run_tool(TOOL, "--bootstrap-controller", address, "describe", what)
    assert run.returncode == 0, run.stdout + run.stderr[-2000:]
    return run.stdout


def _rows(text: str) -> list[list[str]]:
    """The --replication table: NodeId DirectoryId LogEndOffset Lag LastFetch LastCaughtUp
    Status, one list of cells per replica."""
    return [line.split() for line in text.splitlines() if line.split()[:1] != []
            and line.split()[0].isdigit()]


def _settled(address: str, ok: Callable[[str], bool], timeout: float = 30.0) -> str:
    """`describe --replication` until `ok` holds (a voter a fetch behind a fresh append shows a
    lag of 1 for a moment; Kafka's does too)."""
    deadline = time.monotonic() + timeout
    while True:
        out = _describe(address, "--replication")
        if ok(out) or time.monotonic() > deadline:
            return out
        time.sleep(0.5)


def _all_caught_up(out: str) -> bool:
    rows = _rows(out)
    return len(rows) >= 3 and all(r[3] == "0" for r in rows)


def _mask_status(text: str) -> str:
    text = re.sub(r"^(ClusterId|LeaderId|LeaderEpoch|HighWatermark|MaxFollowerLag|"
                  r"MaxFollowerLagTimeMs):(\s+)\S+", r"\1:\2X", text, flags=re.M)
    return re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)


def _mask_replication(text: str) -> list[tuple[str, ...]]:
    """Each row without its node id, offset and timestamps, in the tool's order."""
    header = text.splitlines()[0].split()
    return [tuple(header)] + [(r[1], r[3], r[6]) for r in _rows(text)]


def test_describe_through_a_follower_shows_every_voter_caught_up(kraftpy_quorum) -> None:
    servers = kraftpy_quorum
    leader = quorum_leader(servers)
    follower = next(s for s in servers if s is not leader)
    broker = BrokerSim((HOST, leader.controller_port), OBSERVER_ID + 1,
                       cluster_id=leader.cluster_id())
    broker.register()
    for _ in range(50):  # load: 50 committed blocks
        broker.allocate()
    broker.close()
    status = _describe(follower.controller, "--status")
    leader_id = int(re.search(r"^LeaderId:\s+(\d+)", status, re.M).group(1))  # type: ignore
    assert f"node{leader_id}" == leader.root.name
    hwm = int(re.search(r"^HighWatermark:\s+(\d+)", status, re.M).group(1))  # type: ignore
    assert hwm > 50
    for srv in servers:
        assert f'"CONTROLLER://{srv.controller}"' in status
    out = _settled(follower.controller, _all_caught_up)
    rows = _rows(out)
    assert sorted(r[0] for r in rows) == ["1", "2", "3"], out
    assert all(r[3] == "0" for r in rows), out  # lag 0: every voter caught up
    assert {r[6] for r in rows} == {"Leader", "Follower"}
    assert [r[6] for r in rows].count("Leader") == 1
    assert all(int(r[2]) >= hwm for r in rows), out
    now_ms = time.time() * 1000
    assert all(now_ms - 30_000 < int(r[5]) <= now_ms + 1000 for r in rows), out


def test_an_observer_that_fetched_is_shown(kraftpy_quorum) -> None:
    leader = quorum_leader(kraftpy_quorum)
    request = DescribeQuorumRequest(topics=[TopicData(topic_name="__cluster_metadata",
                                                      partitions=[PartitionData()])])
    with KafkaConnection((HOST, leader.controller_port)) as conn:
        part = conn.request(request, 2).topics[0].partitions[0]
        answer = conn.request(fetch(0, epoch=part.leader_epoch, last_epoch=0,
                                    cluster=leader.cluster_id(), replica=OBSERVER_ID,
                                    max_wait=0), 17)
        assert answer.responses[0].partitions[0].error_code == 0
    status = _describe(leader.controller, "--status")
    assert re.search(rf'^CurrentObservers:\s+\[{{"id": {OBSERVER_ID}}}\]$', status, re.M), status
    rows = _rows(_describe(leader.controller, "--replication"))
    assert [r[6] for r in rows if r[0] == str(OBSERVER_ID)] == ["Observer"]


def test_the_same_columns_as_a_kafka_quorum_of_three(kraftpy_quorum, kafka_quorum) -> None:
    kafka = ",".join(n.controller for n in kafka_quorum)
    ours = ",".join(s.controller for s in kraftpy_quorum)
    statuses = {name: _mask_status(_describe(address, "--status"))
                for name, address in (("kafka", kafka), ("kraftpy", ours))}
    # the observer an earlier test made stays on kraftpy's leader for Kafka's session timeout
    statuses["kraftpy"] = re.sub(r"^CurrentObservers:.*$", "CurrentObservers: X",
                                 statuses["kraftpy"], flags=re.M)
    statuses["kafka"] = re.sub(r"^CurrentObservers:.*$", "CurrentObservers: X",
                               statuses["kafka"], flags=re.M)
    assert "CurrentVoters:" in statuses["kafka"]
    assert statuses["kraftpy"] == statuses["kafka"]
    replication = {}
    for name, address in (("kafka", kafka), ("kraftpy", ours)):
        out = _settled(address, _all_caught_up)
        replication[name] = [r for r in _mask_replication(out) if r[-1] != "Observer"]
    assert len(replication["kafka"]) == 4  # the header and three voters
    assert replication["kraftpy"] == replication["kafka"]
