"""Real Kafka 4.1 brokers run with kraftpy as their controller.

A broker (`process.roles=broker`, `controller.quorum.voters=1@<kraftpy>`) finds the leader
through raft Fetch (its first Fetch at epoch 0 is answered FENCED_LEADER_EPOCH with the
leader), replicates kraftpy's metadata log, registers, is unfenced and reaches RUNNING. Then a
workload runs through the broker: Kafka's tools create, describe, grow, configure and delete
topics (forwarded to kraftpy in Envelopes), the Java client produces idempotently and
transactionally (commit and abort) and a read_committed consumer in a group reads exactly the
committed records, kafka-python and librdkafka produce idempotently. The broker's producer-id
blocks are in kraftpy's log under its id and epoch (`kraftpy pid-audit`) and never overlap the
ids kraftpy hands to clients itself; the broker's copy of the log is kraftpy's, batch for batch.

The same workload on a Kafka 4.1 controller gives the same topics, partitions and configs
(MetadataShell on both logs) and the same kinds of records.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from kraftpy.protocol.record_batch import iter_record_batches
from support.kafka import KafkaNode, metadata_shell_tree, run_java_client, run_tool
from support.producers import confluent_producer_id, kafka_python_producer_id
from support.server import KraftpyServer

pytestmark = pytest.mark.slow


def _lines(output: str, word: str) -> list[list[str]]:
    return [line.split()[1:] for line in output.splitlines() if line.startswith(word + " ")]


def workload(bootstrap: str, java_client: Path) -> dict[str, object]:
    """Tools and clients through one broker; what they saw."""
    seen: dict[str, object] = {}

    def tool(*args: str) -> str:
        return run_tool(*args).check().stdout

    topics = ["TopicCommand", "--bootstrap-server", bootstrap]
    configs = ["ConfigCommand", "--bootstrap-server", bootstrap]
    seen["create"] = tool(*topics, "--create", "--topic", "t1", "--partitions", "3")
    tool(*topics, "--create", "--topic", "t2", "--partitions", "1", "--config",
         "retention.ms=3600000")
    tool(*topics, "--alter", "--topic", "t1", "--partitions", "4")
    tool(*configs, "--alter", "--entity-type", "topics", "--entity-name", "t2",
         "--add-config", "cleanup.policy=compact")
    seen["t2 configs"] = tool(*configs, "--describe", "--entity-type", "topics",
                              "--entity-name", "t2")
    tool(*topics, "--delete", "--topic", "t2")
    seen["describe"] = tool(*topics, "--describe", "--topic", "t1")
    seen["list"] = tool(*topics, "--list")
    idem = run_java_client(java_client, "produce", bootstrap, "t1", "5").check().stdout
    committed = run_java_client(java_client, "produce", bootstrap, "t1", "3", "txn-c",
                                "commit").check().stdout
    aborted = run_java_client(java_client, "produce", bootstrap, "t1", "2", "txn-a",
                              "abort").check().stdout
    consumed = run_java_client(java_client, "consume", bootstrap, "t1", "8", "30000",
                               "group-1").check().stdout
    seen["acked"] = sorted(f[2] for out in (idem, committed) for f in _lines(out, "acked"))
    seen["aborted"] = sorted(f[2] for f in _lines(aborted, "acked"))
    seen["consumed"] = sorted(f[2] for f in _lines(consumed, "record"))
    seen["producer ids"] = [int(_lines(out, "producer")[0][0])
                            for out in (idem, committed, aborted)]
    seen["python ids"] = [kafka_python_producer_id(bootstrap, wait_s=30)[0],
                          confluent_producer_id({"bootstrap.servers": bootstrap},
                                                wait_s=30)[0]]
    seen["groups"] = tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
                          "--bootstrap-server", bootstrap, "--describe", "--group", "group-1")
    return seen


def _broker_on(root: Path, voter: str, cluster_id: str) -> KafkaNode:
    broker = KafkaNode(root, roles="broker", node_id=2, voters=[voter], cluster_id=cluster_id)
    broker.format()
    broker.start(timeout=90)  # waits for "Transitioning from RECOVERY to RUNNING"
    return broker


@pytest.fixture(scope="module")
def on_kraftpy(tmp_path_factory: pytest.TempPathFactory, kafka_jars: Path, java_client: Path
               ) -> Iterator[tuple[KraftpyServer, KafkaNode, dict[str, object], int]]:
    root = tmp_path_factory.mktemp("broker-on-kraftpy")
    srv = KraftpyServer(root / "kraftpy")
    srv.start()
    broker = None
    try:
        broker = _broker_on(root / "broker", f"1@{srv.controller}", srv.cluster_id())
        seen = workload(broker.bootstrap, java_client)
        own_pid = kafka_python_producer_id(srv.bootstrap, wait_s=20)[0]
        yield srv, broker, seen, own_pid
    finally:
        if broker is not None:
            broker.stop()
        srv.stop()


@pytest.fixture(scope="module")
def on_kafka(tmp_path_factory: pytest.TempPathFactory, kafka_jars: Path, java_client: Path
             ) -> Iterator[tuple[KafkaNode, KafkaNode, dict[str, object]]]:
    """The same workload on a Kafka 4.1 controller."""
    root = tmp_path_factory.mktemp("broker-on-kafka")
    controller = KafkaNode(root / "controller", roles="controller", node_id=1,
                           static_voter=True)
    controller.format()
    controller.start()
    broker = None
    try:
        broker = _broker_on(root / "broker", controller.voter, controller.cluster_id)
        yield controller, broker, workload(broker.bootstrap, java_client)
    finally:
        if broker is not None:
            broker.stop()
        controller.stop()


def test_the_broker_runs_and_the_workload_succeeds(on_kraftpy) -> None:
    srv, broker, seen, _ = on_kraftpy
    log = srv.log_text()
    assert "Registered broker 2" in log and "FENCED -> UNFENCED" in log
    assert "Created topic t1." in seen["create"]
    assert seen["list"].split() == ["t1"]  # t2 deleted; no client has needed a coordinator yet
    assert seen["describe"].count("Leader: 2") == 4  # grown to four partitions
    assert "cleanup.policy=compact" in seen["t2 configs"]
    assert seen["consumed"] == seen["acked"] and len(seen["acked"]) == 8
    assert not set(seen["aborted"]) & set(seen["consumed"])
    assert "group-1" in seen["groups"] and "t1" in seen["groups"]


def test_the_brokers_blocks_are_in_kraftpys_log(on_kraftpy) -> None:
    srv, broker, seen, own_pid = on_kraftpy
    audit = subprocess.run([sys.executable, "-m", "kraftpy.tools", "pid-audit", "--json",
                            str(srv.data_dir)], capture_output=True, text=True, timeout=60)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    blocks = [b for b in json.loads(audit.stdout)["blocks"] if b["broker_id"] == 2]
    assert blocks
    ids = [*seen["producer ids"], *seen["python ids"]]
    for pid in ids:
        assert any(b["first_id"] <= pid <= b["last_id"] for b in blocks), (pid, blocks)
        assert not any(b["first_id"] <= own_pid <= b["last_id"] for b in blocks)
    assert len(set(ids)) == len(ids)


def _batches(segment: Path) -> list[bytes]:
    data = segment.read_bytes()
    return [bytes(b.buffer[b.start:b.start + 12 + b.length]) for b in iter_record_batches(data)]


def test_the_brokers_metadata_log_is_kraftpys(on_kraftpy) -> None:
    srv, broker, _, _ = on_kraftpy
    ours = _batches(srv.data_dir / "__cluster_metadata-0" / "00000000000000000000.log")
    theirs = _batches(broker.metadata_dir() / "00000000000000000000.log")
    assert len(theirs) >= 10
    assert theirs == ours[:len(theirs)]


def _image(metadata_dir: Path, path: str, copy_to: Path) -> str:
    """MetadataShell's tree at `path`, from a copy of the segment (the node still runs and
    holds its directory's lock, which MetadataShell respects)."""
    (segment,) = sorted(metadata_dir.glob("*.log"))
    copy = copy_to / f"{metadata_dir.parent.parent.name}-{segment.name}"
    if not copy.exists():
        shutil.copyfile(segment, copy)
    return metadata_shell_tree(copy, path)


def _topics(tree: str) -> dict[str, dict[str, str]]:
    """Topic name -> partition -> its registration (directory ids aside), from MetadataShell's
    tree of /image/topics/byName: a topic at no indent, its partitions at two spaces."""
    out: dict[str, dict[str, str]] = {}
    topic = part = None
    for line in tree.splitlines():
        if line and not line.startswith(" "):
            topic, part = line.rstrip(":"), None
            out[topic] = {}
        elif line.startswith("  ") and not line.startswith("    "):
            part = line.strip().rstrip(":")
        elif line.startswith("    PartitionRegistration(") and topic and part is not None:
            out[topic][part] = re.sub(r"directories=\[[^\]]*\]", "", line.strip())
    return out


def test_kafkas_controller_gives_the_same_state(on_kraftpy, on_kafka, tmp_path: Path) -> None:
    srv, _, ours_seen, _ = on_kraftpy
    controller, _, theirs_seen = on_kafka
    for key in ("list", "acked", "consumed", "aborted"):
        assert ours_seen[key] == theirs_seen[key], key
    mask = re.compile(r"TopicId: \S+")
    assert mask.sub("", ours_seen["describe"]) == mask.sub("", theirs_seen["describe"])
    assert ours_seen["t2 configs"] == theirs_seen["t2 configs"]
    ours_dir, theirs_dir = srv.data_dir / "__cluster_metadata-0", controller.metadata_dir()
    # MetadataShell's one-shot command may print an image from partway through the file (its
    # loader publishes after its reader reaches the end): a difference is read again, a bounded
    # number of times; a real one shows in every attempt.
    for _ in range(4):
        ours, theirs = (_image(d, "/image/topics/byName", tmp_path)
                        for d in (ours_dir, theirs_dir))
        configs = [_image(d, "/image/configs", tmp_path) for d in (ours_dir, theirs_dir)]
        if _topics(ours) == _topics(theirs) and configs[0] == configs[1]:
            break
    assert _topics(ours) == _topics(theirs)
    assert set(_topics(ours)) == {"t1", "__transaction_state", "__consumer_offsets"}
    assert configs[0] == configs[1]


def _quorum(controller: str, what: str) -> list[list[str]]:
    """`kafka-metadata-quorum describe` through the CONTROLLER listener, values that belong to
    one cluster (ids, offsets, times, lags) masked."""
    out = run_tool("MetadataQuorumCommand", "--bootstrap-controller", controller, "describe",
                   what).check().stdout
    rows = []
    for line in out.splitlines():
        cells = line.split()
        if what == "--replication" and cells and cells[0].isdigit():
            cells = [cells[0], cells[1] if cells[0] == "2" else "DIR", *["X"] * 4, cells[-1]]
        elif what == "--status":
            line = re.sub(r"127\.0\.0\.1:\d+", "ADDR", line)
            line = re.sub(r"^(ClusterId|LeaderEpoch|HighWatermark|MaxFollowerLag|"
                          r"MaxFollowerLagTimeMs):\s+\S+", r"\1: X", line)
            cells = [re.sub(r'"directoryId": "[^"]+"', '"directoryId": "D"', line)]
        rows.append(cells)
    return rows


def test_the_broker_is_an_observer_in_describe_quorum_as_on_kafka(on_kraftpy, on_kafka) -> None:
    srv, broker, _, _ = on_kraftpy
    controller, their_broker, _ = on_kafka
    ours = _quorum(srv.controller, "--replication")
    assert [row[0] for row in ours[1:]] == ["1", "2"]
    assert ours[2][-1] == "Observer"
    assert ours[2][1] != "AAAAAAAAAAAAAAAAAAAAAA"  # the broker's metadata directory id
    theirs = _quorum(controller.controller, "--replication")
    # Kafka's broker has its own directory id: compare the rest.
    assert [r[:1] + r[2:] for r in ours] == [r[:1] + r[2:] for r in theirs]
    assert _quorum(srv.controller, "--status") == _quorum(controller.controller, "--status")


def _record_types(metadata_dir: Path) -> list[str]:
    """The kinds of records in a metadata log, runs of one kind counted once, leaving out what
    differs by design: NoOps (timed), control records, the controller's own registration
    (Kafka's ControllerRegistration; kraftpy is not a Kafka controller process) and the
    producer-id blocks a kraftpy node claims for its own InitProducerId answers."""
    done = subprocess.run([sys.executable, "-m", "kraftpy.tools", "dump-log", "--json",
                           "--no-progress", *map(str, sorted(metadata_dir.glob("*.log")))],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    kinds: list[str] = []
    for line in done.stdout.splitlines():
        row = json.loads(line)
        kind = row["record_type"]
        if row["is_control"] or kind in ("NO_OP_RECORD", "REGISTER_CONTROLLER_RECORD"):
            continue
        if kind == "PRODUCER_IDS_RECORD" and row["payload"]["brokerEpoch"] == -1:
            continue  # kraftpy's own block (broker epoch -1)
        if not kinds or kinds[-1] != kind:
            kinds.append(kind)
    return kinds


def test_kafkas_controller_writes_the_same_kinds_of_records(on_kraftpy, on_kafka) -> None:
    srv, _, _, _ = on_kraftpy
    controller, _, _ = on_kafka
    ours = _record_types(srv.data_dir / "__cluster_metadata-0")
    theirs = _record_types(controller.metadata_dir())
    assert "TOPIC_RECORD" in ours and "REMOVE_TOPIC_RECORD" in ours
    assert ours == theirs


def test_dump_log_segments_reads_kraftpys_log_after_the_workload(on_kraftpy, tmp_path: Path
                                                                 ) -> None:
    srv, _, _, _ = on_kraftpy
    (segment,) = sorted((srv.data_dir / "__cluster_metadata-0").glob("*.log"))
    copy = tmp_path / segment.name
    shutil.copyfile(segment, copy)
    kafka = run_tool("DumpLogSegments", "--cluster-metadata-decoder", "--files",
                     str(copy)).check().stdout
    assert "isvalid: false" not in kafka and "PARTITION_RECORD" in kafka
    ours = subprocess.run([sys.executable, "-m", "kraftpy.tools", "dump-log", "--no-progress",
                           str(copy)], capture_output=True, text=True, timeout=120)
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines() == kafka.splitlines()
