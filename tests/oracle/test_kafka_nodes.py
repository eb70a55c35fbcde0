"""The fixtures that run real Kafka 4.1 work as the rest of the suite relies on.

A combined node serves the Java client end to end (idempotent and transactional produce, a
read_committed consumer that sees committed records only); separate controller and broker
nodes form a cluster with a static voter set; a stopped node is gone; a node that cannot start
fails the test with Kafka's own log lines.
"""

from __future__ import annotations

import re
import socket
import uuid
from pathlib import Path

import pytest
from support.kafka import KafkaNode, run_java_client, run_tool

pytestmark = pytest.mark.slow


def _lines(run_output: str, word: str) -> list[list[str]]:
    return [line.split()[1:] for line in run_output.splitlines() if line.startswith(word + " ")]


def test_a_combined_node_serves_the_java_client(kafka_oracle: KafkaNode, java_client: Path
                                                ) -> None:
    topic = f"java-{uuid.uuid4().hex[:8]}"
    idem = run_java_client(java_client, "produce", kafka_oracle.bootstrap, topic, "4").check()
    committed = run_java_client(java_client, "produce", kafka_oracle.bootstrap, topic, "3",
                                f"{topic}-c", "commit").check()
    aborted = run_java_client(java_client, "produce", kafka_oracle.bootstrap, topic, "2",
                              f"{topic}-a", "abort").check()
    assert len(_lines(idem.stdout, "acked")) == 4
    pids = [int(_lines(r.stdout, "producer")[0][0]) for r in (idem, committed, aborted)]
    assert len(set(pids)) == 3 and min(pids) >= 0
    consumed = run_java_client(java_client, "consume", kafka_oracle.bootstrap, topic, "7",
                               "20000", f"{topic}-group").check()
    values = sorted(fields[2] for fields in _lines(consumed.stdout, "record"))
    assert values == sorted([f"idem-{i}" for i in range(4)] + [f"{topic}-c-{i}" for i in range(3)])
    assert "consumed 7" in consumed.stdout


def test_separate_controller_and_broker_with_static_voters(tmp_path: Path) -> None:
    controller = KafkaNode(tmp_path / "c", roles="controller", node_id=3000, static_voter=True)
    broker = KafkaNode(tmp_path / "b", roles="broker", node_id=1, voters=[controller.voter],
                       cluster_id=controller.cluster_id)
    try:
        controller.format()
        broker.format()
        controller.start()
        broker.start()
        status = run_tool("MetadataQuorumCommand", "--bootstrap-controller",
                          controller.controller, "describe", "--status").check().stdout
        assert re.search(r"^LeaderId:\s+3000$", status, re.M), status
        assert re.search(r'^CurrentObservers:\s+\[\{"id": 1', status, re.M), status
        topics = run_tool("TopicCommand", "--bootstrap-server", broker.bootstrap, "--create",
                          "--topic", "t", "--partitions", "2").check().stdout
        assert "Created topic t." in topics
    finally:
        broker_code, controller_code = broker.stop(), controller.stop()
    # SIGTERM ends a JVM with 143: Kafka's normal, controlled stop.
    assert (broker_code, controller_code) == (143, 143)
    assert "BrokerLifecycleManager" in broker.log_text()
    assert not broker.running and not controller.running


def test_a_node_that_cannot_start_fails_with_kafkas_own_log(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        node = KafkaNode(tmp_path / "k", static_voter=True, broker_port=port)
        node.format()
        with pytest.raises(pytest.fail.Exception) as failed:
            node.start(timeout=60)
    assert "Address already in use" in str(failed.value)
    assert not node.running
