"""The fixtures that run real Kafka 4.1 work as the rest of the suite relies on.

A combined node serves the Java client end to end (idempotent and transactional produce, a
read_committed consumer that sees committed records only); separate controller and broker
nodes form a cluster with a static voter set; a stopped node is gone; a node that cannot start
fails the test with Kafka's own log lines.
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
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


def test_kafka_and_kraftpy_refuse_each_others_running_directory(
        kafka_oracle: KafkaNode, tmp_path: Path) -> None:
    from support.server import running_server

    # Kafka's tools respect the lock of a directory kraftpy is running on...
    with running_server(tmp_path / "kraftpy") as srv:
        segment = srv.data_dir / "__cluster_metadata-0" / "00000000000000000000.log"
        shell = run_tool("MetadataShell", "--snapshot", str(segment), "ls", "/")
        assert shell.returncode != 0
        assert f"Unable to lock {srv.data_dir}" in shell.stdout + shell.stderr
    # ...and kraftpy refuses the directory of a running Kafka node, changing nothing in it.
    before = sorted(p.name for p in kafka_oracle.data_dir.iterdir())
    done = subprocess.run(
        [sys.executable, "-m", "kraftpy.tools", "serve", "--override",
         f"metadata.log.dir={kafka_oracle.data_dir}", "--override", "node.id=1", "--override",
         "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0"],
        capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "in use by another process" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert sorted(p.name for p in kafka_oracle.data_dir.iterdir()) == before
