"""Kafka 4.1's command-line tools print against `kraftpy serve` what they print against Kafka.

Each tool runs twice in one test, against a real Kafka 4.1 node with a static voter set (as
`kraftpy serve` runs by default) and against kraftpy, and the outputs are compared after the
values that differ between any two clusters (cluster ids, ports, offsets, timestamps, producer
ids) are masked. Both listeners are asked where the tool can reach them: `--bootstrap-server`
(the client listener) and `--bootstrap-controller` (the CONTROLLER listener).
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.kafka import KafkaNode, run_tool
from support.producers import kafka_python_producer_id
from support.server import KraftpyServer, running_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def kraftpy(tmp_path_factory: pytest.TempPathFactory, kafka_jars: Path
            ) -> Iterator[KraftpyServer]:
    with running_server(tmp_path_factory.mktemp("kraftpy-tools")) as srv:
        yield srv


def _both(kafka: KafkaNode, kraftpy: KraftpyServer, listener: str
          ) -> list[tuple[str, str]]:
    """(name, --bootstrap-* argument) for each, on the listener named."""
    if listener == "client":
        return [("kafka", kafka.bootstrap), ("kraftpy", kraftpy.bootstrap)]
    return [("kafka", kafka.controller), ("kraftpy", kraftpy.controller)]


def _outputs(kafka: KafkaNode, kraftpy: KraftpyServer, listener: str,
             args: Callable[[str], list[str]], tool: str, mask: Callable[[str], str]
             ) -> dict[str, str]:
    out = {}
    for name, address in _both(kafka, kraftpy, listener):
        run = run_tool(tool, *args(address))
        out[name] = mask(run.stdout + run.stderr if run.returncode else run.stdout)
    return out


def _mask_common(text: str) -> str:
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)
    text = re.sub(r'"port": \d+', '"port": PORT', text)
    return re.sub(r"\b\d{13}\b", "TIMESTAMP", text)


BOOTSTRAP = {"client": "--bootstrap-server", "controller": "--bootstrap-controller"}


@pytest.mark.parametrize("listener", ["client", "controller"])
def test_metadata_quorum_describe_status(kafka_oracle, kraftpy, listener: str) -> None:
    def mask(text: str) -> str:
        text = re.sub(r"^(ClusterId|LeaderEpoch|HighWatermark):(\s+)\S+", r"\1:\2X", text,
                      flags=re.M)
        return _mask_common(text)

    out = _outputs(kafka_oracle, kraftpy, listener,
                   lambda a: [BOOTSTRAP[listener], a, "describe", "--status"],
                   "MetadataQuorumCommand", mask)
    assert "LeaderId:" in out["kafka"]
    assert out["kraftpy"] == out["kafka"]


@pytest.mark.parametrize("listener", ["client", "controller"])
def test_metadata_quorum_describe_replication(kafka_oracle, kraftpy, listener: str) -> None:
    def mask(text: str) -> str:
        lines = []
        for line in text.splitlines():
            cells = line.split()
            if cells and cells[0].isdigit():  # NodeId DirectoryId LogEndOffset Lag ... Status
                cells[2] = "OFFSET"
            lines.append(" ".join(cells))
        return _mask_common("\n".join(lines))

    out = _outputs(kafka_oracle, kraftpy, listener,
                   lambda a: [BOOTSTRAP[listener], a, "describe", "--replication"],
                   "MetadataQuorumCommand", mask)
    assert "Leader" in out["kafka"]
    assert out["kraftpy"] == out["kafka"]


def test_cluster_id(kafka_oracle, kraftpy) -> None:
    for name, address in _both(kafka_oracle, kraftpy, "client"):
        run = run_tool("ClusterTool", "cluster-id", "--bootstrap-server", address).check()
        expected = kafka_oracle.cluster_id if name == "kafka" else kraftpy.cluster_id()
        assert run.stdout.strip() == f"Cluster ID: {expected}"


def test_transactions_list_and_describe(kafka_oracle, kraftpy) -> None:
    txn = f"tools-{uuid.uuid4().hex[:8]}"
    out = {}
    for name, address in _both(kafka_oracle, kraftpy, "client"):
        pid, epoch, _ = kafka_python_producer_id(address, transactional_id=txn, wait_s=30)
        assert epoch == 0
        listed = run_tool("TransactionsCommand", "--bootstrap-server", address, "list").check()
        row = [line.split() for line in listed.stdout.splitlines() if line.startswith(txn)]
        assert row and row[0][2] == str(pid) and row[0][3] == "Empty", listed.stdout
        header = listed.stdout.splitlines()[0].split()
        described = run_tool("TransactionsCommand", "--bootstrap-server", address, "describe",
                             "--transactional-id", txn).check()
        lines = [line.split() for line in described.stdout.splitlines() if line.strip()]
        # CoordinatorId TransactionalId ProducerId ProducerEpoch TransactionState ...: the
        # coordinator and the producer id differ between clusters, the rest must not.
        assert lines[1][1] == txn and lines[1][2] == str(pid), described.stdout
        lines[1][0], lines[1][2] = "COORDINATOR", "PID"
        out[name] = (header, lines)
    assert out["kraftpy"] == out["kafka"]


@pytest.mark.parametrize("listener", ["client", "controller"])
def test_acls_without_an_authorizer(kafka_oracle, kraftpy, listener: str) -> None:
    def mask(text: str) -> str:
        return "\n".join(line for line in text.splitlines() if line.startswith("Error"))

    out = _outputs(kafka_oracle, kraftpy, listener,
                   lambda a: [BOOTSTRAP[listener], a, "--list"], "AclCommand", mask)
    assert "SecurityDisabledException" in out["kafka"]
    assert out["kraftpy"] == out["kafka"]


def test_broker_api_versions(kafka_oracle, kraftpy) -> None:
    def lines(address: str) -> dict[str, str]:
        run = run_tool("BrokerApiVersionsCommand", "--bootstrap-server", address).check()
        found = dict(re.findall(r"^\s+(\w+)\(\d+\): (.*?),?$", run.stdout, re.M))
        assert re.search(r"\(id: 1 rack: null isFenced: false\) -> \(", run.stdout)
        return found

    kafka, ours = lines(kafka_oracle.bootstrap), lines(kraftpy.bootstrap)
    served = {api: text for api, text in ours.items() if text != "UNSUPPORTED"}
    assert {"InitProducerId", "Metadata", "FindCoordinator", "ApiVersions"} <= set(served)
    assert served == {api: kafka[api] for api in served}
    # Every API Kafka's broker listener knows is listed, served or not.
    assert set(ours) == set(kafka)
