"""kraftpy and Kafka 4.1 controllers as voters of one Raft quorum (static voters, kraft.version 0).

Three voters, 1 kraftpy + 2 Kafka and 2 kraftpy + 1 Kafka, under AllocateProducerIds load from
a simulated broker that always goes to the leader. Leadership is forced onto each
implementation in turn by killing the leader (and, to hand it to the other kind, the second
voter of the leader's kind, restarted at once: it comes back with no leader and grants the
first pre-vote it is asked for). Then:

- Kafka's `kafka-metadata-quorum describe --replication` lists all three voters caught up;
- every voter's `__cluster_metadata-0` holds the same batches, byte for byte (a follower keeps
  its leader's batches as fetched, whoever wrote them);
- every block the broker was granted is in that log, and no block is granted twice;
- every voter is a registered controller (ControllerRegistration), kraftpy's included, so a
  Kafka leader finalizes a feature upgrade (transaction.version 0 -> 2 with Kafka's tool);
- with 1 kraftpy + 2 Kafka, a real Kafka broker runs throughout: a topic created through it
  after each handover is committed by the new leader, its copy of the log is the voters', and
  no Kafka node logged a fault replaying what the other implementation wrote.
"""

from __future__ import annotations

import re
import threading
import time
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from kraftpy.controller.log.partition_log import PartitionLog
from kraftpy.protocol.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from kraftpy.protocol.metadata_frame import decode_metadata_record
from kraftpy.protocol.record_batch import TruncatedBatchError, iter_record_batches
from kraftpy.protocol.records.producer_ids_record import ProducerIdsRecord
from kraftpy.protocol.records.register_controller_record import RegisterControllerRecord
from kraftpy.tools.broker_sim import BrokerSim
from kraftpy.tools.kafka_connection import ClientError, KafkaConnection
from support.kafka import KafkaNode, random_cluster_id, run_tool
from support.server import HOST, KraftpyServer, free_port

pytestmark = pytest.mark.usefixtures("kafka_jars")

BROKER_ID = 100
NOT_CONTROLLER = 41
ROUNDS = 3  # leadership handed to the other kind three times: each kind leads after a kill
LEADER_WAIT_S = 45.0


class Voter:
    """One voter of the mixed quorum: a `kraftpy serve` or a Kafka controller-only node."""

    def __init__(self, kind: str, node: Any, node_id: int, port: int) -> None:
        self.kind = kind  # "kraftpy" or "kafka"
        self.node = node
        self.node_id = node_id
        self.port = port

    def start(self) -> None:
        if self.kind == "kraftpy":
            self.node.launch()
        else:
            self.node.start(wait=False)

    def kill(self) -> None:
        self.node.kill()

    @property
    def running(self) -> bool:
        return bool(self.node.running)

    @property
    def log_dir(self) -> Path:
        return Path(self.node.data_dir) / "__cluster_metadata-0"

    def describe_quorum(self) -> Any | None:
        try:
            with KafkaConnection((HOST, self.port), timeout=2.0) as conn:
                return conn.request(DescribeQuorumRequest(topics=[TopicData(
                    topic_name="__cluster_metadata",
                    partitions=[PartitionData(partition_index=0)])]), 1)
        except (ClientError, OSError):
            return None

    def __repr__(self) -> str:
        return f"{self.kind} voter {self.node_id}"


def make_quorum(root: Path, kinds: str) -> list[Voter]:
    """Voters 1..3, `kinds` one letter each: p (kraftpy) or k (Kafka); formatted, not started."""
    cluster_id = random_cluster_id()
    ports = [free_port() for _ in kinds]
    voters = [f"{i + 1}@{HOST}:{port}" for i, port in enumerate(ports)]
    out = []
    for i, (kind, port) in enumerate(zip(kinds, ports, strict=True)):
        node_id = i + 1
        if kind == "p":
            node: Any = KraftpyServer(root / f"kraftpy{node_id}", {
                "node.id": str(node_id), "controller.quorum.voters": ",".join(voters),
                "cluster.id": cluster_id}, controller_port=port)
            out.append(Voter("kraftpy", node, node_id, port))
        else:
            node = KafkaNode(root / f"kafka{node_id}", roles="controller", node_id=node_id,
                             cluster_id=cluster_id, voters=voters, controller_port=port)
            node.format()
            out.append(Voter("kafka", node, node_id, port))
    return out


def find_leader(voters: list[Voter], timeout: float = LEADER_WAIT_S) -> Voter:
    """The voter that answers DescribeQuorum as the leader of the current epoch."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for voter in voters:
            if not voter.running:
                continue
            answer = voter.describe_quorum()
            if answer is None or answer.error_code or not answer.topics:
                continue
            partition = answer.topics[0].partitions[0]
            if partition.error_code == 0 and partition.leader_id == voter.node_id:
                return voter
        time.sleep(0.1)
    tails = "\n".join(f"--- {v}\n{v.node.log_tail(15)}" for v in voters)
    pytest.fail(f"no leader within {timeout}s:\n{tails}")


class BrokerLoad:
    """AllocateProducerIds in a loop from one simulated broker, always at the current leader
    (found again after NOT_CONTROLLER or a dead connection, as a broker's channel does)."""

    def __init__(self, voters: list[Voter], cluster_id: str) -> None:
        self.voters = voters
        self.cluster_id = cluster_id
        self.blocks: list[tuple[int, int]] = []
        self.errors: list[int] = []
        self.epoch = -1
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> BrokerLoad:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join(30)

    def acknowledged(self, at_least: int, timeout: float = 30.0) -> None:
        """Wait until `at_least` more blocks than now are acknowledged."""
        target = len(self.blocks) + at_least
        deadline = time.monotonic() + timeout
        while len(self.blocks) < target:
            assert time.monotonic() < deadline, f"no grants for {timeout}s: {self.errors[-5:]}"
            time.sleep(0.05)

    def _run(self) -> None:
        broker: BrokerSim | None = None
        while not self.stop.is_set():
            try:
                if broker is None:
                    leader = find_leader(self.voters, timeout=LEADER_WAIT_S)
                    broker = BrokerSim((HOST, leader.port), BROKER_ID, cluster_id=self.cluster_id,
                                       timeout=5.0)
                    if self.epoch < 0:
                        self.epoch = broker.register()
                    broker.epoch = self.epoch
                answer = broker.allocate_response()
                if answer.error_code == 0:
                    self.blocks.append((answer.producer_id_start, answer.producer_id_len))
                    time.sleep(0.02)
                    continue
                self.errors.append(answer.error_code)
                if answer.error_code == NOT_CONTROLLER:
                    broker.close()
                    broker = None
                time.sleep(0.05)
            except (ClientError, OSError, pytest.fail.Exception):
                if broker is not None:
                    with suppress(Exception):
                        broker.close()
                broker = None
                time.sleep(0.05)
        if broker is not None:
            broker.close()


def read_batches(voter: Voter) -> list[tuple[int, bytes]]:
    """(base offset, the batch's bytes) of every whole batch in the voter's segments."""
    out = []
    for segment in sorted(voter.log_dir.glob("*.log")):
        data = segment.read_bytes()
        try:
            for batch in iter_record_batches(data):
                out.append((batch.base_offset, data[batch.start:batch.end]))
        except TruncatedBatchError:  # a batch torn by the kill at the end: not compared
            pass
    return out


def log_records(voter: Voter) -> list[Any]:
    log = PartitionLog.open(voter.log_dir, read_only=True)
    try:
        out = []
        for batch in log.read():
            if batch.is_control:
                continue
            for value in batch.values():
                out.append(decode_metadata_record(value)[0])  # type: ignore[arg-type]
        return out
    finally:
        log.close()


def hand_leadership(voters: list[Voter], leader: Voter, to_kind: str) -> Voter:
    """Kill `leader` (of the other kind) so that a voter of `to_kind` leads; the killed
    voter is restarted once a new leader serves. Returns the new leader."""
    others = [v for v in voters if v is not leader]
    same_kind = [v for v in others if v.kind == leader.kind]
    leader.kill()
    for v in same_kind:  # restart at once: no leader known, so it grants the first pre-vote
        v.kill()
        v.start()
    new = find_leader(voters)
    leader.start()
    return new


def create_topic(broker: KafkaNode, name: str, timeout: float = 60.0) -> None:
    """Through the broker, which forwards CreateTopics to whoever leads (retried while the
    broker is still finding a new leader)."""
    deadline = time.monotonic() + timeout
    while True:
        done = run_tool("TopicCommand", "--bootstrap-server", broker.bootstrap, "--create",
                        "--topic", name, "--partitions", "2")
        if done.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert done.returncode == 0, done.stdout + done.stderr + broker.log_tail()


def change_features(leader: Voter) -> None:
    """transaction.version down to 0 and back up to 2 through Kafka's tool at the leader: an
    upgrade is finalized only if every voter registered a range that holds it (Kafka's
    "controller N has not registered"), kraftpy's voters included."""
    bootstrap = ("--bootstrap-controller", f"{HOST}:{leader.port}")
    deadline = time.monotonic() + 20
    while True:  # a voter the handover just restarted registers its new incarnation first
        run = run_tool("FeatureCommand", *bootstrap, "downgrade", "--feature",
                       "transaction.version=0")
        if "has not registered" not in run.stdout or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    down = run.check().stdout
    assert down.strip() == "transaction.version was downgraded to 0.", down
    up = run_tool("FeatureCommand", *bootstrap, "upgrade", "--feature",
                  "transaction.version=2").check().stdout
    assert up.strip() == "transaction.version was upgraded to 2.", up


@pytest.mark.parametrize("kinds", ["pkk", "ppk"], ids=["1kraftpy-2kafka", "2kraftpy-1kafka"])
def test_mixed_quorum(tmp_path: Path, kinds: str) -> None:
    voters = make_quorum(tmp_path, kinds)
    broker: KafkaNode | None = None
    try:
        for v in voters:
            v.start()
        leader = find_leader(voters)
        cluster_id = voters[0].node.cluster_id if voters[0].kind == "kafka" else \
            voters[0].node.properties["cluster.id"]
        if kinds == "pkk":  # a real broker rides through every failover
            broker = KafkaNode(tmp_path / "broker", roles="broker", node_id=4,
                               cluster_id=cluster_id,
                               voters=[f"{v.node_id}@{HOST}:{v.port}" for v in voters])
            broker.format()
            broker.start(timeout=90)
            create_topic(broker, f"led-by-{leader.kind}-0")
        led_by: list[str] = [leader.kind]
        features_changed = False
        with BrokerLoad(voters, cluster_id) as load:
            load.acknowledged(5)
            for round_ in range(1, ROUNDS + 1):
                for _attempt in range(4):
                    want = "kafka" if leader.kind == "kraftpy" else "kraftpy"
                    leader = hand_leadership(voters, leader, want)
                    if leader.kind == want:
                        break
                led_by.append(leader.kind)
                load.acknowledged(5)
                if leader.kind == "kafka" and not features_changed:
                    change_features(leader)  # a Kafka leader checks every voter registered
                    features_changed = True
                if broker is not None:
                    assert broker.running, broker.log_tail()
                    create_topic(broker, f"led-by-{leader.kind}-{round_}")
        print(f"{kinds}: leaders in turn {led_by}; {len(load.blocks)} blocks granted; "
              f"errors seen by the broker {sorted(set(load.errors))}")
        assert {"kraftpy", "kafka"} <= set(led_by[1:]), led_by

        # Every voter caught up, as Kafka's own tool sees it.
        deadline = time.monotonic() + 30
        while True:
            leader = find_leader(voters)
            run = run_tool("MetadataQuorumCommand", "--bootstrap-controller",
                           f"{HOST}:{leader.port}", "describe", "--replication")
            lines = [line.split() for line in run.stdout.splitlines() if line.strip()]
            lag = lines[0].index("Lag") if lines and "Lag" in lines[0] else -1
            lags = {int(r[0]): int(r[lag]) for r in lines[1:]
                    if lag >= 0 and r[-1] in ("Leader", "Follower")}
            if run.returncode == 0 and sorted(lags) == [1, 2, 3] and max(lags.values()) <= 1:
                break
            assert time.monotonic() < deadline, run.stdout + run.stderr
            time.sleep(0.5)
        print(run.stdout)
        if broker is not None:
            listed = run_tool("TopicCommand", "--bootstrap-server", broker.bootstrap,
                              "--list").check().stdout.split()
            assert len(listed) == ROUNDS + 1, listed
            time.sleep(1)  # the broker fetches the last records
    finally:
        if broker is not None:
            broker.stop()
        for v in voters:
            v.kill()

    logs = {v.node_id: read_batches(v) for v in voters}
    if broker is not None:  # an observer's copy is the voters' too
        logs[4] = read_batches(Voter("kafka", broker, 4, 0))
    common = min(len(b) for b in logs.values())
    assert common > 10
    for node_id, batches in logs.items():
        assert batches[:common] == logs[1][:common], f"node {node_id} differs from voter 1"
    for node in [v.node for v in voters if v.kind == "kafka"] + ([broker] if broker else []):
        # Kafka replayed every record kraftpy wrote: no metadata fault, no raft error
        faults = [line for line in node.log_text().splitlines()
                  if re.search(r"Encountered .*fault", line)]  # Kafka's fault handlers
        assert not faults, faults[:5]

    records = log_records(voters[0])
    grants = [r for r in records if isinstance(r, ProducerIdsRecord)]
    ends = [r.next_producer_id for r in grants]
    assert ends == sorted(set(ends)), "a producer-id block granted twice"
    granted = {(r.next_producer_id - 1000, 1000) for r in grants if r.broker_id == BROKER_ID}
    assert set(load.blocks) <= granted, set(load.blocks) - granted
    assert len(set(load.blocks)) == len(load.blocks)
    registered = {r.controller_id for r in records if isinstance(r, RegisterControllerRecord)}
    assert registered == {1, 2, 3}  # kraftpy registers with a Kafka leader as Kafka does
