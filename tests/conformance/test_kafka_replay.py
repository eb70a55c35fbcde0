"""Kafka 4.1's recorded requests replayed against a real kraftpy process.

The bytes Kafka answered are the reference. Where an answer carries state (the producer id
kraftpy chose, its cluster id, its ports), that value is substituted into Kafka's bytes and
into the replayed request; everything else must be byte-for-byte Kafka's.
"""

from __future__ import annotations

import json
import struct
import time

import pytest
from kraftpy.protocol.framing import decode_request, encode_request
from kraftpy.tools.kafka_connection import KafkaConnection
from support.paths import reference
from support.server import KraftpyServer, running_server

KAFKA_CLUSTER = b"G0dMBTBsQ--_v26MQTG0jA"
KAFKA_PID = 2  # what Kafka gave golden-txn


def exchanges() -> dict[tuple[str, str], dict]:
    path = reference("real-captures", "kafka-4.1", "wire-4.1.jsonl")
    out = {}
    for line in path.read_text().splitlines():
        if line.strip():
            e = json.loads(line)
            out[(e["listener"], e["name"])] = e
    return out


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with running_server(tmp_path_factory.mktemp("replay")) as srv:
        # Kafka's run was recorded once its id block was in place; wait for ours too.
        from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest

        with KafkaConnection((srv.host, srv.client_port)) as conn:
            deadline = time.monotonic() + 10
            while conn.request(InitProducerIdRequest(transaction_timeout_ms=1000),
                               4).error_code != 0 and time.monotonic() < deadline:
                time.sleep(0.05)
        yield srv


def replay(srv: KraftpyServer, ex: dict, *, pid: int | None = None) -> bytes:
    """Send Kafka's request (with `pid` in place of Kafka's producer id); our answer frame."""
    raw = bytes.fromhex(ex["request_hex"])
    if pid is not None:
        header, request = decode_request(raw[4:])
        request.producer_id = pid
        raw = encode_request(request, header.request_api_version, header.correlation_id,
                             header.client_id)
    port = srv.client_port if ex["listener"] == "client" else srv.controller_port
    with KafkaConnection((srv.host, port)) as conn:
        conn.send_raw(raw)
        return conn.recv_frame()


def kafka_answer(ex: dict, *, pid: int | None = None) -> bytes:
    data = bytes.fromhex(ex["response_hex"])[4:]
    if pid is not None:
        data = data.replace(struct.pack(">q", KAFKA_PID), struct.pack(">q", pid))
    return data


TXN_SEQUENCE = [  # (name, producer id in the request relative to ours, or None)
    ("InitProducerId v4 txn golden-txn first init (attempt 1)", None),
    ("InitProducerId v4 txn re-init with returned pid/epoch", 0),
    ("InitProducerId v4 txn re-init again (second bump)", 0),
    ("InitProducerId v4 txn re-init with previous epoch (retry of last bump)", 0),
    ("InitProducerId v4 txn re-init with stale epoch (current-2)", 0),
    ("InitProducerId v4 txn re-init with future epoch (current+5)", 0),
    ("InitProducerId v4 txn re-init with wrong producer id", 12345),
    ("InitProducerId v4 txn pid set, epoch -1", 0),
    ("InitProducerId v4 txn timeout above max (900001 ms)", None),
    ("InitProducerId v4 txn timeout 0 ms", None),
    ("InitProducerId v4 idempotent pid set, epoch -1", None),
]


def test_the_transactional_decision_table_answers_kafkas_bytes(server) -> None:
    ex = exchanges()
    first = replay(server, ex[("client", TXN_SEQUENCE[0][0])])
    ours = struct.unpack(">q", first[4 + 1 + 4 + 2:4 + 1 + 4 + 2 + 8])[0]  # header v1, body
    assert ours >= 0
    for name, offset in TXN_SEQUENCE:
        e = ex[("client", name)]
        got = first if offset is None and name == TXN_SEQUENCE[0][0] else replay(
            server, e, pid=None if offset is None else ours + offset)
        assert got.hex() == kafka_answer(e, pid=ours).hex(), name


@pytest.mark.parametrize("name", [
    "InitProducerId v0 idempotent (attempt 2)",
    "InitProducerId v4 idempotent",
    "InitProducerId v4 idempotent timeout above max",
])
def test_idempotent_answers_have_kafkas_shape(server, name: str) -> None:
    e = exchanges()[("client", name)]
    deadline = time.monotonic() + 10
    while True:
        got = replay(server, e)
        if got[-12:-10] != b"\x00\x0e" or time.monotonic() > deadline:  # 14: ids not ready
            break
        time.sleep(0.05)
    want = kafka_answer(e)
    assert len(got) == len(want)
    body = 5 if e["api_version"] >= 2 else 4  # response header v1 / v0
    # Same throttle, error code and epoch (0); only the producer id is ours.
    assert got[:body + 6] == want[:body + 6]
    assert got[body + 14:] == want[body + 14:]
    assert struct.unpack(">q", got[body + 6:body + 14])[0] >= 0


def test_pipelined_idempotent_answers_have_kafkas_shape(server) -> None:
    """Kafka's idempotent requests, 50 of each in one write (the later ones answered by their
    bytes): every answer is Kafka's but for the id, and the ids are fresh and distinct."""
    names = ["InitProducerId v0 idempotent (attempt 2)", "InitProducerId v4 idempotent",
             "InitProducerId v4 idempotent timeout above max"]
    sent = [exchanges()[("client", name)] for name in names] * 50
    with KafkaConnection((server.host, server.client_port)) as conn:
        conn.send_raw(b"".join(bytes.fromhex(e["request_hex"]) for e in sent))
        answers = [conn.recv_frame() for _ in sent]
    pids = []
    for e, got in zip(sent, answers, strict=True):
        want = kafka_answer(e)
        body = 5 if e["api_version"] >= 2 else 4
        assert len(got) == len(want) and got[:4] == want[:4]  # Kafka's correlation id
        if got[body + 4:body + 6] == b"\x00\x0e":  # no id ready yet: retriable, no id
            assert got[body + 6:] == bytes.fromhex("ff" * 10) + got[body + 16:]
            continue
        assert got[:body + 6] == want[:body + 6] and got[body + 14:] == want[body + 14:]
        pids.append(struct.unpack(">q", got[body + 6:body + 14])[0])
    assert len(pids) >= len(sent) // 2
    assert len(set(pids)) == len(pids) and min(pids) >= 0


@pytest.mark.parametrize("name", [
    "BrokerRegistration v3 wrong cluster id",
    "AllocateProducerIds v0 unregistered broker 77",
    "AllocateProducerIds v0 unregistered broker 77 epoch -1",
    "BrokerHeartbeat v1 unregistered broker 77",
    "DescribeCluster v1 endpoint_type=1 (brokers) on controller",
])
def test_broker_error_paths_answer_kafkas_bytes(server, name: str) -> None:
    e = exchanges()[("controller", name)]
    assert replay(server, e).hex() == kafka_answer(e).hex()


@pytest.mark.parametrize(("listener", "name"), [
    ("controller", "DescribeCluster v1 endpoint_type=2 (controllers)"),
    ("client", "DescribeCluster v1 endpoint_type=1 on client listener"),
])
def test_describe_cluster_answers_kafkas_bytes_with_our_id_and_port(server, listener, name
                                                                      ) -> None:
    e = exchanges()[(listener, name)]
    port = server.client_port if listener == "client" else server.controller_port
    kafka_port = 39092 if listener == "client" else 39093
    want = kafka_answer(e).replace(KAFKA_CLUSTER, server.cluster_id().encode()).replace(
        struct.pack(">i", kafka_port), struct.pack(">i", port))
    assert replay(server, e).hex() == want.hex()


@pytest.mark.parametrize("listener", ["client", "controller"])
def test_describe_quorum_has_kafkas_shape(server, listener: str) -> None:
    from kraftpy.protocol.framing import decode_response

    e = exchanges()[(listener, "DescribeQuorum v2 __cluster_metadata-0")]
    _, kafka = decode_response(kafka_answer(e), 55, 2)
    _, ours = decode_response(replay(server, e), 55, 2)

    def shape(r, port: int) -> dict:
        (topic,) = r.topics
        (part,) = topic.partitions
        return {
            "error": (r.error_code, r.error_message, part.error_code, part.error_message),
            "topic": (topic.topic_name, part.partition_index, part.leader_id),
            "voters": [(v.replica_id, v.replica_directory_id, v.log_end_offset == part.high_watermark,
                        v.last_fetch_timestamp > 0, v.last_caught_up_timestamp > 0)
                       for v in part.current_voters],
            "observers": part.observers,
            "nodes": [(n.node_id, [(li.name, li.host, li.port == port) for li in n.listeners])
                      for n in r.nodes],
        }

    assert shape(ours, server.controller_port) == shape(kafka, 39093)
    assert ours.topics[0].partitions[0].leader_epoch >= 1
