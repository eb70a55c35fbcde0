"""A real Kafka 4.1 broker runs with kraftpy as its controller.

The broker (`process.roles=broker`, `controller.quorum.voters=1@<kraftpy>`) finds the leader
through raft Fetch (its first Fetch at epoch 0 is answered FENCED_LEADER_EPOCH with the
leader), replicates kraftpy's metadata log, registers, is unfenced and reaches RUNNING. A Java
client's idempotent producer then gets its producer id from the broker, which takes its block
from kraftpy with AllocateProducerIds: `kraftpy pid-audit` lists that block under the
broker's id and epoch, and it never overlaps the ids kraftpy hands to clients itself. The
broker's copy of the metadata log is kraftpy's, batch for batch, up to what it fetched.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from kraftpy.protocol.record_batch import iter_record_batches
from support.kafka import KafkaNode, run_java_client
from support.producers import kafka_python_producer_id
from support.server import KraftpyServer, running_server

pytestmark = pytest.mark.slow


@pytest.fixture
def kraftpy(tmp_path: Path, kafka_jars: Path):
    with running_server(tmp_path / "kraftpy") as srv:
        yield srv


def _broker(root: Path, srv: KraftpyServer, node_id: int = 2) -> KafkaNode:
    broker = KafkaNode(root, roles="broker", node_id=node_id,
                       voters=[f"1@{srv.controller}"], cluster_id=srv.cluster_id())
    broker.format()
    return broker


def _batches(segment: Path) -> list[bytes]:
    data = segment.read_bytes()
    return [bytes(b.buffer[b.start:b.start + 12 + b.length])
            for b in iter_record_batches(data)]


def test_a_broker_registers_runs_and_takes_producer_id_blocks(
        kraftpy: KraftpyServer, java_client: Path, tmp_path: Path) -> None:
    broker = _broker(tmp_path / "broker", kraftpy)
    try:
        broker.start(timeout=90)  # waits for "Transitioning from RECOVERY to RUNNING"
        assert "Registered broker 2" in kraftpy.log_text()
        assert "Broker 2 (epoch" in kraftpy.log_text() and "FENCED -> UNFENCED" in kraftpy.log_text()
        idem = run_java_client(java_client, "init-idempotent", broker.bootstrap).check()
        broker_pid = int(idem.stdout.split()[1])
        own_pid, _, _ = kafka_python_producer_id(kraftpy.bootstrap, wait_s=20)
    finally:
        assert broker.stop() == 143
    assert kraftpy.stop() == 0
    audit = subprocess.run([sys.executable, "-m", "kraftpy.tools", "pid-audit", "--json",
                            str(kraftpy.data_dir)], capture_output=True, text=True, timeout=60)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    blocks = json.loads(audit.stdout)["blocks"]
    (granted,) = [b for b in blocks if b["broker_id"] == 2]
    assert granted["first_id"] <= broker_pid <= granted["last_id"]
    assert not granted["first_id"] <= own_pid <= granted["last_id"]
    # The broker's replica of the metadata log holds kraftpy's batches, byte for byte.
    ours = _batches(kraftpy.data_dir / "__cluster_metadata-0" / "00000000000000000000.log")
    theirs = _batches(broker.metadata_dir() / "00000000000000000000.log")
    assert len(theirs) >= 5
    assert theirs == ours[:len(theirs)]
