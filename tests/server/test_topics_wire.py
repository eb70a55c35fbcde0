"""Topics and configs through a running `kraftpy serve`: kafka-python's admin client on the
client listener, a registered broker (the broker simulator) to place replicas on, and an
Envelope built by hand on the CONTROLLER listener, as a Kafka broker forwards an admin request."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import InvalidConfigurationError, TopicAlreadyExistsError
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.framing import decode_response, encode_request
from kraftpy.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraftpy.protocol.messages.default_principal_data import DefaultPrincipalData
from kraftpy.protocol.messages.envelope_request import EnvelopeRequest
from kraftpy.protocol.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from kraftpy.tools.kafka_connection import KafkaConnection
from support.broker_sim import BrokerSim
from support.paths import REFERENCE
from support.server import KraftpyServer, running_server


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[KraftpyServer, BrokerSim]]:
    with running_server(tmp_path) as srv:
        broker = BrokerSim(srv.controller, broker_id=2)
        broker.register()
        broker.wait_unfenced()
        yield srv, broker
        broker.close()


def test_admin_client_creates_describes_alters_grows_and_deletes(
        cluster: tuple[KraftpyServer, BrokerSim]) -> None:
    srv, broker = cluster
    admin = KafkaAdminClient(bootstrap_servers=srv.bootstrap, request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic("t1", 3, 1, topic_configs={"retention.ms": "60000"})])
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic("t1", 1, 1)])
        with pytest.raises(InvalidConfigurationError):
            admin.create_topics([NewTopic("t2", 1, 1, topic_configs={"no.such": "1"})])
        configs = describe(admin)
        assert len(configs) == 33
        assert configs["retention.ms"]["value"] == "60000"
        assert configs["segment.bytes"]["value"] == "1073741824"
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "t1",
                                            configs={"cleanup.policy": "compact"})])
        configs = describe(admin)  # kafka-python sends IncrementalAlterConfigs here
        assert (configs["cleanup.policy"]["value"], configs["retention.ms"]["value"]) == \
            ("compact", "60000")
        admin.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "t1",
                                            configs={"segment.ms": "1000"})], incremental=False)
        configs = describe(admin)  # AlterConfigs, with the client's other keys filled in
        assert [configs[k]["value"] for k in ("segment.ms", "cleanup.policy")] == \
            ["1000", "compact"]
        admin.create_partitions({"t1": NewPartitions(total_count=5)})
        admin.delete_topics(["t1"])
    finally:
        admin.close()
    # Every change is in the log the server keeps; the broker fetches it from there.
    state = srv.log_text()
    assert "Created topic t1" in state and "Deleted topic t1" in state


def describe(admin: KafkaAdminClient) -> dict[str, dict]:
    answer = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "t1")],
                                    config_filter="all")
    [by_name] = answer.values()
    return by_name["t1"]


def _principal(kind: str, name: str) -> bytes:
    return struct.pack(">h", 0) + DefaultPrincipalData(
        type=kind, name=name, token_authenticated=False).encode(0)


def _envelope(conn: KafkaConnection, inner: bytes, principal: bytes | None,
              address: bytes = bytes([10, 1, 2, 3])) -> tuple[int, bytes | None]:
    reply = conn.request(EnvelopeRequest(request_data=inner, request_principal=principal,
                                         client_host_address=address), 0)
    return reply.error_code, reply.response_data


def test_envelope_carries_a_forwarded_create_topics(
        cluster: tuple[KraftpyServer, BrokerSim]) -> None:
    srv, _ = cluster
    inner = encode_request(CreateTopicsRequest(topics=[
        CreatableTopic(name="fwd", num_partitions=2, replication_factor=1, assignments=[],
                       configs=[])], timeout_ms=30000, validate_only=False), 7, 41,
        "adminclient-1")[4:]
    with KafkaConnection(srv.controller) as conn:
        code, data = _envelope(conn, inner, _principal("User", "alice"))
        assert code == ErrorCode.NONE and data is not None
        correlation, response = decode_response(data, 19, 7)
        assert correlation == 41
        [t] = response.topics
        assert (t.name, t.error_code, t.num_partitions, t.replication_factor) == ("fwd", 0, 2, 1)
        # Not forwardable (ApiVersions), unparsable, no principal, a bad address:
        api_versions = bytes.fromhex("0012000300000001") + b"\x00\x01x\x00\x00\x00"
        assert _envelope(conn, api_versions, _principal("User", "a"))[0] == \
            ErrorCode.INVALID_REQUEST
        assert _envelope(conn, b"\x00", _principal("User", "a"))[0] == \
            ErrorCode.UNSUPPORTED_VERSION
        assert _envelope(conn, inner, None)[0] == ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE
        assert _envelope(conn, inner, _principal("User", "a"), b"\x01\x02")[0] == \
            ErrorCode.INVALID_REQUEST
        listing = encode_request(ListPartitionReassignmentsRequest(
            timeout_ms=1000, topics=None), 0, 7, "c")[4:]
        code, data = _envelope(conn, listing, _principal("User", "a"))
        assert code == ErrorCode.NONE and decode_response(data, 46, 0)[1].topics == []
        # The connection still serves: nothing above closed it.
        assert conn.request(EnvelopeRequest(request_data=listing,
                                            request_principal=_principal("User", "a"),
                                            client_host_address=b"\x7f\x00\x00\x01"),
                            0).error_code == 0


def test_a_real_brokers_envelope_from_the_capture(
        cluster: tuple[KraftpyServer, BrokerSim]) -> None:
    """The Envelope a Kafka 4.1 broker sent for `kafka-topics --create t1 --partitions 3`."""
    path = REFERENCE / "real-captures" / "kafka-4.1-broker-controller" / \
        "real-controller-static-voters" / "Envelope-v0-CreateTopics-v7-1.req"
    if not path.is_file():
        pytest.skip(f"reference material not present: {path}")
    srv, _ = cluster
    with KafkaConnection(srv.controller) as conn:
        conn.send_raw(path.read_bytes())
        frame = conn.recv_frame()
    _, envelope = decode_response(frame, 58, 0)
    assert envelope.error_code == 0
    _, response = decode_response(envelope.response_data, 19, 7)
    assert [(t.name, t.error_code, t.num_partitions) for t in response.topics] == [("t1", 0, 3)]


def test_an_inner_not_controller_is_the_envelopes_own_error() -> None:
    """As Kafka's RequestChannel answers a forwarded request a non-leader refused: the
    Envelope itself carries NOT_CONTROLLER (NOT_LEADER_OR_FOLLOWER for DescribeQuorum), so the
    broker's forwarding channel finds the leader again instead of passing it to its client."""
    from kraftpy.controller.api.envelope import _redirects
    from kraftpy.protocol.framing import frame_response
    from kraftpy.protocol.messages.create_topics_response import (
        CreatableTopicResult,
        CreateTopicsResponse,
    )
    from kraftpy.protocol.messages.describe_quorum_response import (
        DescribeQuorumResponse,
        PartitionData,
        TopicData,
    )

    def framed(response: object, version: int) -> bytes:
        return frame_response(7, True, response, version)[4:]

    def created(code: int) -> bytes:
        return framed(CreateTopicsResponse(topics=[CreatableTopicResult(
            name="t", error_code=code)]), 7)

    assert _redirects(created(ErrorCode.NOT_CONTROLLER), 19, 7)
    assert not _redirects(created(ErrorCode.NONE), 19, 7)
    assert not _redirects(created(ErrorCode.TOPIC_ALREADY_EXISTS), 19, 7)

    def quorum(code: int) -> bytes:
        return framed(DescribeQuorumResponse(topics=[TopicData(
            topic_name="__cluster_metadata", partitions=[PartitionData(error_code=code)])]), 2)

    assert _redirects(quorum(ErrorCode.NOT_LEADER_OR_FOLLOWER), 55, 2)
    assert not _redirects(quorum(ErrorCode.NOT_CONTROLLER), 55, 2)
    assert not _redirects(b"\x00", 19, 7)  # an answer that does not decode stays as it is
