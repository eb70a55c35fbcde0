"""A way back from a lost majority, end to end: three `kraftpy serve` controllers (a KIP-853
quorum formatted with `--initial-controllers`) under two real Kafka 4.1 brokers with data.

The two controllers that are not the leader are killed and their data dirs deleted (a copy
of one is kept, as an old disk that comes back later). The survivor is stopped; `kraftpy
storage recover-quorum` refuses without `--accept-data-loss` (changing nothing) and with it
writes the new voter set. The survivor then leads alone at the next epoch; the brokers carry
on: records written before are read back, new ones are written, a topic is created, and
producer ids keep coming from a block the survivor grants, none handed out twice (the
pid-audit of its log finds no overlap). A lost controller formatted anew (a new directory
id) joins as an observer and Kafka's `kafka-metadata-quorum add-controller` makes it a voter;
its old directory cannot be added back. The other lost controller started on its old disk
is refused by the survivor, asks for votes in vain and never leads: it cannot form a second
majority with the old voter set.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from kraftpy.protocol.messages.add_raft_voter_request import AddRaftVoterRequest, Listener
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.uuid import kafka_uuid_str, parse_kafka_uuid, random_kafka_uuid
from kraftpy.tools.kafka_connection import KafkaConnection
from support.kafka import KafkaNode, run_tool
from support.kafka_cluster import wait_for
from support.server import (
    HOST,
    KraftpyServer,
    describe_quorum,
    free_port,
    is_quorum_leader,
    quorum_leader,
)

pytestmark = pytest.mark.slow

TOPIC = "orders"
RETRIABLE = (14, 15)  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE


def _recover(srv: KraftpyServer, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftpy.tools", "storage", "recover-quorum",
                           "--config", str(srv.config_path), *args],
                          capture_output=True, text=True, timeout=60)


def _format(srv: KraftpyServer, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "kraftpy.tools", "storage", "format",
                           "--config", str(srv.config_path), *args],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return _directory(srv)


def _directory(srv: KraftpyServer) -> str:
    meta = (srv.data_dir / "meta.properties").read_text()
    return re.search(r"directory.id=(\S+)", meta).group(1)  # type: ignore[union-attr]


def _files(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _produce(bootstrap: str, values: list[str]) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all",
                             linger_ms=0, request_timeout_ms=10_000)
    try:
        for value in values:
            producer.send(TOPIC, value.encode()).get(timeout=60)
    finally:
        producer.close(5)


def _consume(bootstrap: str, count: int) -> list[str]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        parts = [TopicPartition(TOPIC, p) for p in (0, 1)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        got: list[str] = []
        deadline = time.monotonic() + 60
        while len(got) < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got.extend(r.value.decode() for r in records)
        return got
    finally:
        consumer.close()


def _producer_ids(address: str, count: int) -> list[int]:
    """`count` idempotent InitProducerId answers from one broker (retrying the answers that
    say a block is on its way, boundedly)."""
    host, port = address.rsplit(":", 1)
    ids: list[int] = []
    retries = 0
    with KafkaConnection((host, int(port)), timeout=30) as conn:
        while len(ids) < count:
            answer = conn.request(InitProducerIdRequest(transactional_id=None,
                                                        transaction_timeout_ms=60_000))
            if answer.error_code in RETRIABLE and retries < 600:
                retries += 1
                time.sleep(0.05)
                continue
            assert answer.error_code == 0, answer
            ids.append(answer.producer_id)
    return ids


def _log_since(srv: KraftpyServer, mark: int) -> str:
    return srv.log_text()[mark:]


def test_a_survivor_leads_alone_and_brokers_carry_on(tmp_path: Path, kafka_jars: Path) -> None:
    from kraftpy.tools.pid_audit import collect

    cluster_id = kafka_uuid_str(random_kafka_uuid())
    ports = [(free_port(), free_port()) for _ in range(3)]
    bootstrap = ",".join(f"{HOST}:{controller}" for _, controller in ports)
    dirs = {i: kafka_uuid_str(random_kafka_uuid()) for i in (1, 2, 3)}
    initial = ",".join(f"{i + 1}@{HOST}:{controller}:{dirs[i + 1]}"
                       for i, (_, controller) in enumerate(ports))
    controllers = [KraftpyServer(tmp_path / f"c{i + 1}", {
        "node.id": str(i + 1), "controller.quorum.bootstrap.servers": bootstrap},
        client_port=client, controller_port=controller)
        for i, (client, controller) in enumerate(ports)]
    for srv in controllers:
        _format(srv, "--cluster-id", cluster_id, "--initial-controllers", initial)
    brokers = [KafkaNode(tmp_path / f"b{b}", roles="broker", node_id=b,
                         bootstrap_servers=[s.controller for s in controllers],
                         cluster_id=cluster_id) for b in (101, 102)]
    old_disk = tmp_path / "old-disk"
    try:
        for srv in controllers:
            srv.launch()
        with ThreadPoolExecutor(2) as pool:  # two JVMs at once; a failure fails the test
            for formatted in [pool.submit(b.format) for b in brokers]:
                formatted.result()
        for srv in controllers:
            srv.wait_answering(60)
        for b in brokers:
            b.start(wait=False)
        for b in brokers:
            b.wait_started(timeout=120)
        servers = ",".join(b.bootstrap for b in brokers)
        from kafka.admin import KafkaAdminClient, NewTopic

        admin = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=30_000)
        admin.create_topics([NewTopic(TOPIC, 2, 2)])
        admin.close()
        before = [f"before-{i}" for i in range(20)]
        wait_for(lambda: _produce(servers, before[:1]) is None, 60, "a first record")
        _produce(servers, before[1:])
        ids_before = _producer_ids(brokers[0].bootstrap, 5) + _producer_ids(
            brokers[1].bootstrap, 5)

        # --- the majority is lost: the two followers die with their disks ---------------
        survivor = quorum_leader(controllers, timeout=30)
        lost = [s for s in controllers if s is not survivor]
        for srv in lost:
            srv.kill()
        returning, reformatted = lost
        shutil.copytree(returning.data_dir, old_disk)
        for srv in lost:
            shutil.rmtree(srv.data_dir)
        assert survivor.stop() == 0
        me = int(survivor.properties["node.id"])
        gone = ",".join(f"{s.properties['node.id']}:{dirs[int(s.properties['node.id'])]}"
                        for s in lost)

        # --- refused without the acceptance, nothing changed; then done -----------------
        unchanged = _files(survivor.data_dir)
        refused = _recover(survivor, "--survivors", str(me), "--lost-controllers", gone)
        assert refused.returncode == 1
        assert "What may be lost:" in refused.stdout
        assert "add --accept-data-loss" in refused.stderr, refused.stderr
        assert _files(survivor.data_dir) == unchanged
        done = _recover(survivor, "--survivors", str(me), "--lost-controllers", gone,
                        "--accept-data-loss")
        assert done.returncode == 0, done.stdout + done.stderr
        wrote = re.search(r"Wrote the new voter set at offset (\d+), leader epoch (\d+)",
                          done.stdout)
        assert wrote, done.stdout
        offset, epoch = int(wrote.group(1)), int(wrote.group(2))
        moved = re.search(r"Producer ids: the counter moves from (\d+) to (\d+)", done.stdout)
        assert moved, done.stdout
        counter = int(moved.group(2))
        assert re.search(rf"offsets \d+ to {offset - 1} are on this disk", done.stdout)

        # --- the survivor leads alone; the brokers carry on -----------------------------
        mark = len(survivor.log_text())
        survivor.start(60)
        assert quorum_leader([survivor], timeout=30) is survivor
        part = describe_quorum(survivor)
        assert part.leader_id == me and part.leader_epoch == epoch + 1
        assert [v.replica_id for v in part.current_voters] == [me]
        wait_for(lambda: {101, 102} <= {o.replica_id for o in describe_quorum(
            survivor).observers}, 60, "both brokers fetching from the survivor")
        after = [f"after-{i}" for i in range(20)]
        _produce(servers, after)
        assert sorted(_consume(servers, 40)) == sorted(before + after)
        admin = KafkaAdminClient(bootstrap_servers=servers, request_timeout_ms=30_000)
        admin.create_topics([NewTopic("after-recovery", 1, 2)])
        admin.close()
        # a broker's block runs out: the next one comes from the survivor, past all others
        ids_after = _producer_ids(brokers[0].bootstrap, 1010)
        assert len(set(ids_before + ids_after)) == len(ids_before) + len(ids_after)
        audit, problems = collect([str(survivor.data_dir / "__cluster_metadata-0")])
        assert not problems and not audit.has_overlap, audit.findings
        granted = [b for b in audit.blocks if b.offset > offset and b.broker_id == 101]
        assert granted and all(b.first_id >= counter for b in granted), audit.blocks
        assert max(ids_after) >= counter > max(ids_before)

        # --- a lost controller on a new directory is added back with Kafka's tool ---------
        new_dir = _format(reformatted, "--cluster-id", cluster_id, "--no-initial-controllers")
        rid = int(reformatted.properties["node.id"])
        reformatted.start(60)
        wait_for(lambda: (rid, parse_kafka_uuid(new_dir)) in {
            (o.replica_id, o.replica_directory_id) for o in describe_quorum(survivor).observers},
            60, "the reformatted controller fetching as an observer")
        added = run_tool("MetadataQuorumCommand", "--bootstrap-controller", survivor.controller,
                         "--command-config", str(reformatted.config_path), "add-controller",
                         timeout=120)
        assert added.returncode == 0, added.stdout + added.stderr
        assert f"Added controller {rid} with directory id {new_dir}" in added.stdout
        assert sorted(v.replica_id for v in describe_quorum(survivor).current_voters) == \
            sorted([me, rid])
        with KafkaConnection((HOST, survivor.controller_port)) as conn:
            old_self = conn.request(AddRaftVoterRequest(
                cluster_id=cluster_id, timeout_ms=30_000, voter_id=rid,
                voter_directory_id=parse_kafka_uuid(dirs[rid]),
                listeners=[Listener(name="CONTROLLER", host=HOST,
                                    port=reformatted.controller_port)]), 0)
        assert old_self.error_code == 42 and "declared lost" in old_self.error_message

        # --- the other one comes back on its old disk: refused, and it never leads -------
        oid = int(returning.properties["node.id"])
        shutil.copytree(old_disk, returning.data_dir)
        returning.start(60)
        wait_for(lambda: f"refusing Vote from replica {oid} (directory {dirs[oid]})"
                 in _log_since(survivor, mark), 60, "the old disk asking the survivor for votes")
        # It asked the other voter too (whose directory is new: INVALID_VOTER_KEY); within
        # another fetch timeout and two election timeouts nothing changes.
        deadline = time.monotonic() + 2 + 2 * 1
        while time.monotonic() < deadline:
            assert not is_quorum_leader(returning)
            assert describe_quorum(returning).error_code == 6  # NOT_LEADER_OR_FOLLOWER
            time.sleep(0.2)
        part = describe_quorum(survivor)
        assert (part.leader_id, part.leader_epoch) == (me, epoch + 1)
        assert oid not in {o.replica_id for o in part.observers}
        assert "active controller" not in returning.log_text().split("=== start 2 ===")[1]
        _produce(servers, ["last"])
    finally:
        for b in brokers:
            b.kill()
        for srv in controllers:
            srv.kill()
