"""A real Kafka 4.1 broker on a quorum of three kraftpy controllers survives a leader kill.

The broker (`controller.quorum.voters` naming the three) finds the leader through raft Fetch,
replicates the log as an observer, registers and runs. The leader is killed with kill -9: the
broker follows the new leader (a topic created through it afterwards is forwarded to the new
leader and committed), and its copy of the log is the quorum's, batch for batch. Both leaders
list the broker in DescribeQuorum as an observer with its directory id, fetching and caught up.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from kraftpy.protocol.record_batch import iter_record_batches
from kraftpy.protocol.uuid import parse_kafka_uuid
from support.kafka import KafkaNode, run_tool
from support.server import (
    KraftpyServer,
    describe_quorum,
    quorum_leader,
    quorum_servers,
    start_quorum,
    stop_quorum,
)

pytestmark = pytest.mark.slow


def _batches(segment: Path) -> list[bytes]:
    data = segment.read_bytes()
    return [bytes(b.buffer[b.start:b.start + 12 + b.length]) for b in iter_record_batches(data)]


def _meta(node: KafkaNode, key: str) -> str:
    for line in (node.data_dir / "meta.properties").read_text().splitlines():
        if line.startswith(f"{key}="):
            return line.split("=", 1)[1].strip()
    raise LookupError(key)


def _shows_observer(leader: KraftpyServer, directory: uuid.UUID) -> None:
    """The leader's DescribeQuorum lists the broker (node 4) as an observer, with its
    directory id, fetching within the last seconds and caught up."""
    deadline = time.monotonic() + 15
    while True:
        part = describe_quorum(leader)
        observers = [o for o in part.observers if o.replica_id == 4]
        if observers and observers[0].log_end_offset >= part.high_watermark - 1 \
                or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert part.error_code == 0 and [v.replica_id for v in part.current_voters] == [1, 2, 3]
    (observer,) = observers
    assert observer.replica_directory_id == directory
    assert time.time() * 1000 - observer.last_fetch_timestamp < 10_000
    assert observer.last_caught_up_timestamp > 0


def test_a_kafka_broker_survives_a_leader_kill(tmp_path: Path, kafka_jars: Path) -> None:
    servers = quorum_servers(tmp_path)
    broker = None
    try:
        start_quorum(servers)
        leader = quorum_leader(servers)
        voters = [f"{i + 1}@{s.controller}" for i, s in enumerate(servers)]
        broker = KafkaNode(tmp_path / "broker", roles="broker", node_id=4, voters=voters,
                           cluster_id=leader.cluster_id())
        broker.format()
        broker.start(timeout=90)
        assert "Registered broker 4" in leader.log_text()
        directory = parse_kafka_uuid(_meta(broker, "directory.id"))
        _shows_observer(leader, directory)
        topics = ["TopicCommand", "--bootstrap-server", broker.bootstrap]
        assert "Created topic before." in run_tool(*topics, "--create", "--topic", "before",
                                                   "--partitions", "2").check().stdout
        leader.kill()
        new = quorum_leader(servers)
        assert new is not leader
        deadline = time.monotonic() + 60
        while True:  # the broker reaches the new leader (its own retries, then ours)
            done = run_tool(*topics, "--create", "--topic", "after", "--partitions", "1")
            if done.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert done.returncode == 0, done.stdout + done.stderr + broker.log_tail()
        assert broker.running
        _shows_observer(new, directory)  # the new leader's view: the broker fetches from it
        listed = run_tool(*topics, "--list").check().stdout.split()
        assert listed == ["after", "before"]
        leader.start(60)
        time.sleep(2)  # the broker fetches the last records
    finally:
        if broker is not None:
            broker.stop()
        stop_quorum(servers)
    theirs = _batches(broker.metadata_dir() / "00000000000000000000.log")
    ours = _batches(new.data_dir / "__cluster_metadata-0" / "00000000000000000000.log")
    assert len(theirs) >= 10 and theirs == ours[:len(theirs)]
