"""The checks. Each opens its own connection(s), sends requests, and asserts on what comes back.

Expectations are Apache Kafka 4.1's answers (error codes, closes, and every value that does
not depend on the server's state); ids, epochs, cluster ids and offsets may differ.
"""

from __future__ import annotations

import random
import struct
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kraftpy.protocol.framing import encode_frame as frame
from kraftpy.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraftpy.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kraftpy.protocol.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from kraftpy.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kraftpy.tools.broker_sim import registration_request
from kraftpy.tools.kafka_connection import ClientError, KafkaConnection

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
UNSUPPORTED_VERSION = 35
NOT_COORDINATOR = 16
INVALID_REQUEST = 42
INVALID_PRODUCER_EPOCH = 47
INVALID_TRANSACTION_TIMEOUT = 50
STALE_BROKER_EPOCH = 77
PRODUCER_FENCED = 90
INCONSISTENT_CLUSTER_ID = 104
UNKNOWN_TOPIC_ID = 100
MISMATCHED_ENDPOINT_TYPE = 114
# What a client retries while a transaction coordinator loads or its topic is being created.
COORDINATOR_RETRIABLE = frozenset({COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
                                   NOT_COORDINATOR})
ZERO_UUID = uuid.UUID(int=0)


class CheckFailed(AssertionError):
    pass


@dataclass
class Target:
    """The server under test."""

    client: tuple[str, int]
    controller: tuple[str, int] | None = None
    transaction_max_timeout_ms: int = 900000
    socket_request_max_bytes: int = 104857600
    timeout: float = 5.0
    # How long a bad input may take to be answered by a close, and how long an incomplete
    # frame must be waited for without a close.
    close_wait: float = 3.0
    incomplete_wait: float = 1.0
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:10])
    # Client settings (security.protocol, sasl.*, ssl.*) per listener: every check's
    # connection does TLS and SASL first, then speaks as on a PLAINTEXT listener.
    client_settings: dict[str, str] = field(default_factory=dict)
    controller_settings: dict[str, str] = field(default_factory=dict)
    # When a list is given, every typed answer is kept in it as an Exchange, so that two
    # servers' answers to the same checks can be compared field by field.
    transcript: list[Exchange] | None = None
    current_check: str = ""

    def connect(self, listener: str) -> KafkaConnection:
        client = listener == "client"
        address = self.client if client else self.controller
        assert address is not None
        conn = KafkaConnection(address, self.client_settings if client
                               else self.controller_settings, timeout=self.timeout,
                               client_id="kraftpy-conformance")
        if self.transcript is not None:
            transcript, check_name = self.transcript, self.current_check
            conn.on_response = lambda key, version, request, response: transcript.append(
                Exchange(check_name, listener, key, version, request, response))
        return conn


@dataclass
class Exchange:
    """One typed request and the answer it got, during the check named."""

    check: str
    listener: str
    api_key: int
    version: int
    request: Any
    response: Any


@dataclass
class CheckResult:
    name: str
    listener: str
    status: str  # "pass" | "fail" | "skip"
    detail: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class Check:
    name: str
    listener: str
    run: Callable[[Target], None]


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def expect_eq(got: object, want: object, what: str) -> None:
    if got != want:
        raise CheckFailed(f"{what}: got {got!r}, expected {want!r}")


CHECKS: list[Check] = []


def check(name: str, *listeners: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    def register(fn: Callable[..., None]) -> Callable[..., None]:
        for listener in listeners:
            CHECKS.append(Check(name, listener,
                                lambda t, fn=fn, listener=listener: fn(t, listener)))
        return fn

    return register


# --- raw frames ---------------------------------------------------------------------------------

def header_v1(key: int, version: int, correlation: int, client_id: bytes = b"conformance"
              ) -> bytes:
    return struct.pack(">hhih", key, version, correlation, len(client_id)) + client_id


def header_v2(key: int, version: int, correlation: int, client_id: bytes = b"conformance"
              ) -> bytes:
    return header_v1(key, version, correlation, client_id) + b"\x00"


def compact_string(s: bytes) -> bytes:
    return bytes([len(s) + 1]) + s


def api_versions_v3_body() -> bytes:
    return compact_string(b"conformance") + compact_string(b"1.0") + b"\x00"


def read_correlation(raw: bytes) -> int:
    return struct.unpack(">i", raw[:4])[0]


def decode_api_versions_v0(raw: bytes) -> tuple[int, list[tuple[int, int, int]]]:
    """Header v0 + ApiVersions v0 body, read by hand: the KIP-511 answer must be exactly this."""
    pos = 4
    error, count = struct.unpack(">hi", raw[pos : pos + 6])
    pos += 6
    keys = [struct.unpack(">hhh", raw[pos + 6 * i : pos + 6 * i + 6]) for i in range(count)]
    pos += 6 * count
    expect_eq(len(raw) - pos, 0, "bytes after the ApiVersions v0 body")
    return error, keys


def still_serving(conn: KafkaConnection) -> None:
    response = conn.request(ApiVersionsRequest(client_software_name="conformance",
                                               client_software_version="1.0"), 3)
    expect_eq(response.error_code, NONE, "ApiVersions v3 error on the same connection")


# --- ApiVersions --------------------------------------------------------------------------------

def _ranges(response: object) -> dict[int, tuple[int, int]]:
    return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}


CLIENT_NEEDS = {  # what real clients need to be offered (CLIENT-FACTS section 2)
    18: (0, 3), 3: (1, 12), 10: (1, 4), 22: (0, 4),
}
CONTROLLER_NEEDS = {18: (0, 3), 62: (0, 0), 63: (0, 0), 67: (0, 0)}


@check("ApiVersions v0, v3, v4 list what clients and brokers need", "client", "controller")
def api_versions_ranges(t: Target, listener: str) -> None:
    needs = CLIENT_NEEDS if listener == "client" else CONTROLLER_NEEDS
    with t.connect(listener) as conn:
        for version in (0, 3, 4):
            response = conn.request(ApiVersionsRequest(client_software_name="conformance",
                                                       client_software_version="1.0"), version)
            expect_eq(response.error_code, NONE, f"v{version} error code")
            ranges = _ranges(response)
            for key, (lo, hi) in needs.items():
                expect(key in ranges, f"v{version}: api key {key} is not advertised")
                got = ranges[key]
                expect(got[0] <= lo and got[1] >= hi,
                       f"v{version}: api key {key} advertised {got}, clients need {lo}-{hi}")
            expect_eq(ranges[18][0], 0, "ApiVersions min version")


@check("ApiVersions at an unknown version (header v2 + v3 body): KIP-511 v0 answer",
       "client", "controller")
def api_versions_kip511(t: Target, listener: str) -> None:
    with t.connect(listener) as conn:
        for correlation, body in ((104, api_versions_v3_body()), (105, b"")):
            conn.send_raw(frame(header_v2(18, 99, correlation) + body))
            raw = conn.recv_frame()
            expect_eq(read_correlation(raw), correlation, "correlation id")
            error, keys = decode_api_versions_v0(raw)
            expect_eq(error, UNSUPPORTED_VERSION, "error code")
            expect_eq(len(keys), 1, "number of api keys in the KIP-511 answer")
            expect_eq(keys[0][:2], (18, 0), "api key and min version")
            expect(keys[0][2] >= 3, f"ApiVersions max version {keys[0][2]} < 3")
        still_serving(conn)


@check("ApiVersions v3 with an invalid client software name gets INVALID_REQUEST",
       "client", "controller")
def api_versions_bad_software(t: Target, listener: str) -> None:
    with t.connect(listener) as conn:
        response = conn.request(ApiVersionsRequest(client_software_name="-bad name-",
                                                   client_software_version="1.0"), 3)
        expect_eq(response.error_code, INVALID_REQUEST, "error code")
        still_serving(conn)


# --- Metadata and FindCoordinator ---------------------------------------------------------------

def _metadata(conn: KafkaConnection, version: int) -> object:
    response = conn.request(MetadataRequest(topics=[]), version)
    ids = {b.node_id for b in response.brokers}
    expect(bool(ids), f"Metadata v{version} lists no broker")
    expect(response.controller_id in ids,
           f"Metadata v{version} controller id {response.controller_id} is not a listed broker")
    for b in response.brokers:
        expect(b.port > 0 and b.host != "", f"broker {b.node_id} has no reachable address")
    return response


@check("Metadata v1 and v12 list a broker that is also the controller", "client")
def metadata(t: Target, listener: str) -> None:
    with t.connect(listener) as conn:
        _metadata(conn, 1)
        response = _metadata(conn, 12)
        expect(response.cluster_id is not None and len(response.cluster_id) == 22,
               f"cluster id {response.cluster_id!r} is not a Kafka uuid")
        expect_eq(response.topics, [], "topics")


@check("Metadata v10 and v11 by topic id: INVALID_REQUEST for each topic; v12: UNKNOWN_TOPIC_ID",
       "client")
def metadata_by_topic_id(t: Target, listener: str) -> None:
    tid = uuid.UUID(int=0x6b72616674707921)
    by_id = MetadataRequestTopic(topic_id=tid, name=None)
    with t.connect(listener) as conn:
        for version in (10, 11):
            response = conn.request(MetadataRequest(topics=[by_id, MetadataRequestTopic(
                name=f"conformance-{t.run_id}")], allow_auto_topic_creation=False), version)
            expect_eq([(x.error_code, x.name, x.topic_id) for x in response.topics],
                      [(INVALID_REQUEST, "", tid), (INVALID_REQUEST, f"conformance-{t.run_id}",
                                                    ZERO_UUID)], f"v{version} topics")
            expect_eq((response.brokers, response.controller_id, response.cluster_id),
                      ([], -1, None), f"v{version} error answer")
        response = conn.request(MetadataRequest(topics=[by_id], allow_auto_topic_creation=False),
                                12)
        expect_eq([(x.error_code, x.name, x.topic_id) for x in response.topics],
                  [(UNKNOWN_TOPIC_ID, None, tid)], "v12 topics")
        still_serving(conn)


def _retry(fn: Callable[[], object], retriable: Callable[[object], bool], wait: float = 10.0
           ) -> object:
    deadline = time.monotonic() + wait
    while True:
        result = fn()
        if not retriable(result) or time.monotonic() > deadline:
            return result
        time.sleep(0.1)


@check("FindCoordinator v1, v2 and v4 (batched) find the transaction coordinator", "client")
def find_coordinator(t: Target, listener: str) -> None:
    with t.connect(listener) as conn:
        brokers = {(b.node_id, b.host, b.port) for b in _metadata(conn, 12).brokers}
        key = f"conformance-{t.run_id}"
        for version in (1, 2):
            response = _retry(
                lambda v=version: conn.request(FindCoordinatorRequest(key=key, key_type=1), v),
                lambda r: r.error_code == COORDINATOR_NOT_AVAILABLE)
            expect_eq(response.error_code, NONE, f"v{version} error code")
            expect((response.node_id, response.host, response.port) in brokers,
                   f"v{version} coordinator {response.node_id} is not in Metadata")
        response = _retry(
            lambda: conn.request(FindCoordinatorRequest(
                key_type=1, coordinator_keys=[key, key + "-2"]), 4),
            lambda r: any(c.error_code == COORDINATOR_NOT_AVAILABLE for c in r.coordinators))
        expect_eq([c.key for c in response.coordinators], [key, key + "-2"], "v4 keys")
        for c in response.coordinators:
            expect_eq(c.error_code, NONE, f"v4 error code for {c.key}")
            expect((c.node_id, c.host, c.port) in brokers, f"v4 coordinator of {c.key}")


# --- InitProducerId -----------------------------------------------------------------------------

def init_pid(conn: KafkaConnection, version: int, txn: str | None, *, pid: int = -1, epoch: int = -1,
             timeout_ms: int = 60000) -> object:
    return conn.request(InitProducerIdRequest(
        transactional_id=txn, transaction_timeout_ms=timeout_ms, producer_id=pid,
        producer_epoch=epoch), version)


def init_ok(conn: KafkaConnection, version: int, txn: str | None, **kw: int) -> tuple[int, int]:
    if txn:  # as a client does: find the coordinator first (Kafka creates its topic then)
        _retry(lambda: conn.request(FindCoordinatorRequest(key=txn, key_type=1), 1),
               lambda r: r.error_code in COORDINATOR_RETRIABLE)
    response = _retry(lambda: init_pid(conn, version, txn, **kw),
                      lambda r: r.error_code in COORDINATOR_RETRIABLE)
    expect_eq(response.error_code, NONE, f"InitProducerId v{version} ({txn}) error code")
    return response.producer_id, response.producer_epoch


def expect_error(response: object, code: int, what: str) -> None:
    expect_eq(response.error_code, code, f"{what}: error code")
    expect_eq((response.producer_id, response.producer_epoch), (-1, -1),
              f"{what}: producer id and epoch")


@check("InitProducerId idempotent (v0, v4): fresh ids at epoch 0", "client")
def init_idempotent(t: Target, listener: str) -> None:
    with t.connect(listener) as conn:
        seen = set()
        for version in (0, 1, 3, 4):
            pid, epoch = init_ok(conn, version, None)
            expect_eq(epoch, 0, f"v{version} epoch")
            expect(pid >= 0 and pid not in seen, f"v{version} producer id {pid} reused")
            seen.add(pid)
        pid, epoch = init_ok(conn, 4, None, timeout_ms=t.transaction_max_timeout_ms + 1)
        expect(epoch == 0 and pid not in seen, "idempotent init ignores the timeout")
        expect_error(init_pid(conn, 4, None, pid=5), INVALID_REQUEST,
                     "idempotent with producer id set and epoch -1")


@check("InitProducerId transactional: the KIP-360 decision table", "client")
def init_transactional(t: Target, listener: str) -> None:
    txn = f"conformance-txn-{t.run_id}"
    with t.connect(listener) as conn:
        pid, epoch = init_ok(conn, 4, txn)
        expect_eq(epoch, 0, "first init epoch")
        expect_eq(init_ok(conn, 4, txn, pid=pid, epoch=0), (pid, 1), "bump with current epoch")
        expect_eq(init_ok(conn, 4, txn, pid=pid, epoch=1), (pid, 2), "second bump")
        expect_eq(init_ok(conn, 4, txn, pid=pid, epoch=1), (pid, 2),
                  "retry of the last bump (previous epoch)")
        expect_error(init_pid(conn, 4, txn, pid=pid, epoch=0), PRODUCER_FENCED, "stale epoch")
        expect_error(init_pid(conn, 4, txn, pid=pid, epoch=7), PRODUCER_FENCED, "future epoch")
        expect_error(init_pid(conn, 4, txn, pid=pid + 12345, epoch=2), PRODUCER_FENCED,
                     "wrong producer id")
        expect_error(init_pid(conn, 3, txn, pid=pid, epoch=0), INVALID_PRODUCER_EPOCH,
                     "stale epoch before v4")
        expect_error(init_pid(conn, 4, txn, pid=pid), INVALID_REQUEST, "producer id, epoch -1")
        expect_error(init_pid(conn, 4, txn, epoch=2), INVALID_REQUEST, "producer id -1, epoch")
        expect_eq(init_ok(conn, 4, txn), (pid, 3), "re-init without producer id bumps")
        # An older client (v0) re-initialising the same id bumps the epoch too.
        expect_eq(init_ok(conn, 0, txn), (pid, 4), "v0 re-init")


@check("InitProducerId transactional: timeout and id validation", "client")
def init_transactional_invalid(t: Target, listener: str) -> None:
    txn = f"conformance-timeout-{t.run_id}"
    with t.connect(listener) as conn:
        expect_error(init_pid(conn, 4, txn, timeout_ms=t.transaction_max_timeout_ms + 1),
                     INVALID_TRANSACTION_TIMEOUT, "timeout above transaction.max.timeout.ms")
        expect_error(init_pid(conn, 4, txn, timeout_ms=0), INVALID_TRANSACTION_TIMEOUT,
                     "timeout 0")
        expect_error(init_pid(conn, 4, txn, timeout_ms=-5), INVALID_TRANSACTION_TIMEOUT,
                     "negative timeout")
        expect_error(init_pid(conn, 4, ""), INVALID_REQUEST, "empty transactional id")
        expect_error(init_pid(conn, 0, ""), INVALID_REQUEST, "empty transactional id (v0)")


# --- broker RPCs on the CONTROLLER listener -----------------------------------------------------

def _unregistered_broker(t: Target) -> int:
    return 2_000_000_000 + random.Random(t.run_id).randrange(100_000_000)


@check("BrokerRegistration with a wrong cluster id: INCONSISTENT_CLUSTER_ID", "controller")
def registration_wrong_cluster(t: Target, listener: str) -> None:
    with t.connect(listener) as conn:
        response = conn.request(registration_request(
            _unregistered_broker(t), "AAAAAAAAAAAAAAAAAAAAAA", uuid.uuid4(), uuid.uuid4()), 3)
        expect_eq(response.error_code, INCONSISTENT_CLUSTER_ID, "error code")
        expect_eq(response.broker_epoch, -1, "broker epoch")


@check("AllocateProducerIds and BrokerHeartbeat from an unregistered broker: "
       "STALE_BROKER_EPOCH", "controller")
def unregistered_broker(t: Target, listener: str) -> None:
    broker = _unregistered_broker(t)
    with t.connect(listener) as conn:
        for epoch in (1, -1):
            response = conn.request(AllocateProducerIdsRequest(broker_id=broker,
                                                               broker_epoch=epoch), 0)
            expect_eq(response.error_code, STALE_BROKER_EPOCH, f"allocate (epoch {epoch})")
            expect_eq((response.producer_id_start, response.producer_id_len), (0, 0),
                      "allocate block")
        for version in (0, 1):
            response = conn.request(BrokerHeartbeatRequest(
                broker_id=broker, broker_epoch=1, current_metadata_offset=0), version)
            expect_eq(response.error_code, STALE_BROKER_EPOCH, f"heartbeat v{version}")
            expect_eq((response.is_caught_up, response.is_fenced, response.should_shut_down),
                      (False, True, False), "heartbeat flags")


# --- DescribeCluster and DescribeQuorum ---------------------------------------------------------

@check("DescribeCluster: endpoint types per listener (KIP-919)", "client", "controller")
def describe_cluster(t: Target, listener: str) -> None:
    ours, other = (1, 2) if listener == "client" else (2, 1)
    with t.connect(listener) as conn:
        response = conn.request(DescribeClusterRequest(endpoint_type=ours), 1)
        expect_eq(response.error_code, NONE, "error code")
        expect_eq(response.endpoint_type, ours, "endpoint type")
        expect(len(response.cluster_id) == 22, f"cluster id {response.cluster_id!r}")
        ids = {b.broker_id for b in response.brokers}
        expect(response.controller_id in ids or listener == "client",
               "controller id is not among the listed controllers")
        if listener == "controller":
            addresses = {(b.host, b.port) for b in response.brokers}
            expect(t.controller in addresses or t.controller[0] in ("0.0.0.0", "localhost"),
                   f"this controller {t.controller} is not among {sorted(addresses)}")
        if listener == "controller":
            response = conn.request(DescribeClusterRequest(endpoint_type=other), 1)
            expect_eq(response.error_code, MISMATCHED_ENDPOINT_TYPE, "mismatched type")
            expect_eq(response.error_message,
                      "The request was sent to an endpoint of type CONTROLLER, but we wanted "
                      "an endpoint of type BROKER", "error message")
            expect_eq((response.cluster_id, response.controller_id, response.brokers),
                      ("", -1, []), "fields of the error answer")


@check("DescribeQuorum v2 of __cluster_metadata-0", "client", "controller")
def describe_quorum(t: Target, listener: str) -> None:
    with t.connect(listener) as conn:
        response = conn.request(DescribeQuorumRequest(topics=[TopicData(
            topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]), 2)
        expect_eq(response.error_code, NONE, "error code")
        expect_eq(len(response.topics), 1, "topics")
        (part,) = response.topics[0].partitions
        expect_eq(part.error_code, NONE, "partition error code")
        voters = {v.replica_id for v in part.current_voters}
        expect(part.leader_id in voters, f"leader {part.leader_id} is not a voter {voters}")
        expect(part.leader_epoch >= 1, f"leader epoch {part.leader_epoch}")
        expect(part.high_watermark > 0, f"high watermark {part.high_watermark}")
        nodes = {n.node_id: n for n in response.nodes}
        expect(part.leader_id in nodes, "the leader is not among nodes")
        expect(any(li.port > 0 for li in nodes[part.leader_id].listeners),
               "the leader has no listener")


@check("DescribeQuorum v0 and v1 are answered, without the Nodes of v2", "client", "controller")
def describe_quorum_old_versions(t: Target, listener: str) -> None:
    with t.connect(listener) as conn:
        for version in (0, 1):
            response = conn.request(DescribeQuorumRequest(topics=[TopicData(
                topic_name="__cluster_metadata",
                partitions=[PartitionData(partition_index=0)])]), version)
            expect_eq(response.error_code, NONE, f"v{version} error code")
            (part,) = response.topics[0].partitions
            expect_eq(part.error_code, NONE, f"v{version} partition error code")
            expect(part.leader_id in {v.replica_id for v in part.current_voters},
                   f"v{version}: leader {part.leader_id} is not a voter")
            stamped = [v.last_fetch_timestamp > 0 for v in part.current_voters]
            expect_eq(stamped, [version >= 1] * len(stamped),
                      f"v{version} LastFetchTimestamp set (v1+ only)")
        still_serving(conn)


# --- bad input: Kafka closes the connection -----------------------------------------------------

def _closes(t: Target, listener: str, data: bytes, what: str) -> None:
    with t.connect(listener) as conn:
        conn.send_raw(data)
        expect(conn.closed_within(t.close_wait), f"{what}: the connection stayed open")
    with t.connect(listener) as conn:  # and the server still serves everyone else
        still_serving(conn)


BAD_INPUT: list[tuple[str, str, Callable[[Target], bytes]]] = [
    ("unknown api key 9999 (header v1 shape)", "both",
     lambda t: frame(struct.pack(">hhih", 9999, 0, 8, 0))),
    ("unknown api key 9999 (header v2 shape)", "both",
     lambda t: frame(header_v2(9999, 0, 9) + b"\x00")),
    ("ApiVersions at an unknown version, header v1 shape", "both",
     lambda t: frame(struct.pack(">hhih", 18, 99, 7, 4) + b"test")),
    ("Metadata at version 999", "both", lambda t: frame(header_v1(3, 999, 10))),
    ("AllocateProducerIds on the client listener", "client",
     lambda t: frame(header_v2(67, 0, 11) + struct.pack(">iq", 77, 1) + b"\x00")),
    ("InitProducerId on the CONTROLLER listener", "controller",
     lambda t: frame(header_v2(22, 4, 12) + b"\x00" + struct.pack(">iqh", 60000, -1, -1)
                     + b"\x00")),
    ("Metadata v12 on the CONTROLLER listener", "controller",
     lambda t: frame(header_v2(3, 12, 13) + b"\x01\x00\x00\x00")),
    ("frame size 2,000,000,000", "both", lambda t: struct.pack(">i", 2_000_000_000)),
    ("frame size just above socket.request.max.bytes", "both",
     lambda t: struct.pack(">i", t.socket_request_max_bytes + 1)),
    ("negative frame size", "both", lambda t: struct.pack(">i", -1)),
    ("zero-length frame", "both", lambda t: struct.pack(">i", 0)),
    ("1-byte frame", "both", lambda t: frame(b"\x00")),
    ("6-byte frame (half a correlation id)", "both", lambda t: frame(b"\x00\x12\x00\x03\x00\x01")),
    ("client id longer than the frame", "both",
     lambda t: frame(struct.pack(">hhih", 18, 3, 12, 20) + b"gold")),
    ("ApiVersions v3 with a garbage body", "both",
     lambda t: frame(header_v2(18, 3, 14) + b"\xff\xff\xff\xff\xff")),
    ("InitProducerId v4 with a truncated body", "client",
     lambda t: frame(header_v2(22, 4, 15) + b"\x00\x00\x00")),
]


def _bad_input_check(name: str, make: Callable[[Target], bytes]) -> Callable[[Target, str], None]:
    def run(t: Target, listener: str) -> None:
        _closes(t, listener, make(t), name)

    return run


for _name, _where, _make in BAD_INPUT:
    _listeners = ("client", "controller") if _where == "both" else (_where,)
    check(f"bad input closes the connection: {_name}", *_listeners)(
        _bad_input_check(_name, _make))


@check("an incomplete frame is waited for, not closed", "client", "controller")
def incomplete_frame(t: Target, listener: str) -> None:
    with t.connect(listener) as conn:
        conn.send_raw(struct.pack(">i", 30) + struct.pack(">hhi", 18, 3, 13))
        expect(not conn.closed_within(t.incomplete_wait),
               "the server closed a connection with a frame still arriving")


@check("pipelined requests are answered in order", "client", "controller")
def pipelined(t: Target, listener: str) -> None:
    with t.connect(listener) as conn:
        n = 20
        conn.send_raw(b"".join(
            frame(header_v2(18, 3, 1000 + i) + api_versions_v3_body()) for i in range(n)))
        got = [read_correlation(conn.recv_frame()) for _ in range(n)]
        expect_eq(got, [1000 + i for i in range(n)], "correlation ids in order")


# --- running ------------------------------------------------------------------------------------

def run_checks(target: Target, names: Callable[[str], bool] = lambda _: True
               ) -> list[CheckResult]:
    results = []
    for c in CHECKS:
        if not names(c.name):
            continue
        if c.listener == "controller" and target.controller is None:
            results.append(CheckResult(c.name, c.listener, "skip", "no --controller given"))
            continue
        start = time.monotonic()
        target.current_check = c.name
        try:
            c.run(target)
            status, detail = "pass", ""
        except CheckFailed as exc:
            status, detail = "fail", str(exc)
        except ClientError as exc:  # the connection failed: its message says all there is
            status, detail = "fail", f"{type(exc).__name__}: {exc}"
        except Exception as exc:
            status, detail = "fail", f"{type(exc).__name__}: {exc}\n" + "".join(
                traceback.format_exception(exc)[-3:])
        results.append(CheckResult(c.name, c.listener, status, detail,
                                   time.monotonic() - start))
    return results
