"""The requests that once failed kraftpy's encoder, sent to a real Kafka 4.1 node and to
`kraftpy serve`: Metadata v10 and v11 asking by topic id get the same error answer, byte for
byte; v12 the same UNKNOWN_TOPIC_ID; DescribeQuorum v0 and v1 the same shape on both
listeners (no Nodes, LastFetchTimestamp only from v1)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kraftpy.protocol.framing import encode_request
from kraftpy.protocol.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from kraftpy.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kraftpy.tools.kafka_connection import KafkaConnection
from support.kafka import KafkaNode
from support.server import KraftpyServer, running_server

pytestmark = pytest.mark.slow

TOPIC_ID = uuid.UUID(int=0x6b7261667470790a)


@pytest.fixture(scope="module")
def kraftpy(tmp_path_factory: pytest.TempPathFactory, kafka_jars: Path
            ) -> Iterator[KraftpyServer]:
    with running_server(tmp_path_factory.mktemp("kraftpy-answers")) as srv:
        yield srv


def _address(server: KafkaNode | KraftpyServer, listener: str) -> tuple[str, int]:
    host, port = (server.bootstrap if listener == "client" else server.controller).split(":")
    return host, int(port)


def _raw(address: tuple[str, int], request: object, version: int) -> bytes:
    with KafkaConnection(address, timeout=20) as conn:
        conn.send_raw(encode_request(request, version, 41, "oracle"))
        return conn.recv_frame()


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_by_topic_id_before_v12_is_kafkas_error_answer(
        kafka_oracle: KafkaNode, kraftpy: KraftpyServer, version: int) -> None:
    request = MetadataRequest(topics=[MetadataRequestTopic(topic_id=TOPIC_ID, name=None),
                                      MetadataRequestTopic(name="not-there")],
                              allow_auto_topic_creation=False)
    theirs = _raw(_address(kafka_oracle, "client"), request, version)
    ours = _raw(_address(kraftpy, "client"), request, version)
    assert ours == theirs


def test_metadata_by_topic_id_at_v12_is_unknown_topic_id(
        kafka_oracle: KafkaNode, kraftpy: KraftpyServer) -> None:
    request = MetadataRequest(topics=[MetadataRequestTopic(topic_id=TOPIC_ID, name=None),
                                      MetadataRequestTopic(name="not-there")],
                              allow_auto_topic_creation=False)
    answers = []
    for server in (kafka_oracle, kraftpy):
        with KafkaConnection(_address(server, "client"), timeout=20) as conn:
            response = conn.request(request, 12)
        answers.append([(t.error_code, t.name, t.topic_id, t.partitions)
                        for t in response.topics])
    assert answers[0] == answers[1] == [(100, None, TOPIC_ID, [])]


@pytest.mark.parametrize("listener", ["client", "controller"])
def test_describe_quorum_v0_and_v1_have_kafkas_shape(
        kafka_oracle: KafkaNode, kraftpy: KraftpyServer, listener: str) -> None:
    request = DescribeQuorumRequest(topics=[TopicData(
        topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])])
    for version in (0, 1):
        shapes = []
        for server in (kafka_oracle, kraftpy):
            with KafkaConnection(_address(server, listener), timeout=20) as conn:
                response = conn.request(request, version)
            (topic,) = response.topics
            (part,) = topic.partitions
            shapes.append((response.error_code, response.nodes, topic.topic_name,
                           part.partition_index, part.error_code, len(part.current_voters),
                           [v.last_fetch_timestamp > 0 for v in part.current_voters],
                           part.observers == []))
        assert shapes[0] == shapes[1], version
