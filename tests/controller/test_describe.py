"""Read-only answers and the image: DescribeCluster, DescribeQuorum, DescribeProducers,
describe(), the log lines, and requests the controller does not answer."""

from __future__ import annotations

import json
import uuid

import pytest
from kraftpy.controller.quorum_controller import UnsupportedRequest
from kraftpy.controller.settings import AdvertisedEndpoint, ControllerSettings
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraftpy.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kraftpy.protocol.messages.describe_producers_request import (
    DescribeProducersRequest,
    TopicRequest,
)
from kraftpy.protocol.records.partition_record import PartitionRecord
from kraftpy.protocol.records.topic_record import TopicRecord
from support.controller_harness import CLUSTER_ID, Harness


def node() -> Harness:
    return Harness(settings=ControllerSettings(
        cluster_id=CLUSTER_ID, node_id=1, rack="r1",
        advertised_listeners=(AdvertisedEndpoint("PLAINTEXT", "10.0.0.1", 9092),
                              AdvertisedEndpoint("CONTROLLER", "10.0.0.1", 9093))))


def test_describe_cluster_lists_this_node_and_live_brokers_on_the_client_listener():
    h = node()
    h.unfenced_broker(2)
    h.register(3)  # fenced
    r = h.handle(DescribeClusterRequest(endpoint_type=1), 1, listener="PLAINTEXT")
    assert (r.error_code, r.cluster_id, r.controller_id, r.endpoint_type) == (0, CLUSTER_ID, 1, 1)
    assert [(b.broker_id, b.host, b.port, b.rack) for b in r.brokers] == [
        (1, "10.0.0.1", 9092, "r1"), (2, "127.0.0.1", 19094, None)]
    r2 = h.handle(DescribeClusterRequest(endpoint_type=1, include_fenced_brokers=True), 2,
                  listener="PLAINTEXT")
    assert [(b.broker_id, b.is_fenced) for b in r2.brokers] == [(1, False), (2, False),
                                                                (3, True)]


def test_describe_cluster_endpoint_types():
    h = node()
    c = h.handle(DescribeClusterRequest(endpoint_type=2), 1, listener="CONTROLLER")
    assert [(b.broker_id, b.port) for b in c.brokers] == [(1, 9093)]
    bad = h.handle(DescribeClusterRequest(endpoint_type=2), 1, listener="PLAINTEXT")
    assert bad.error_code == 114 and "BROKER" in bad.error_message
    v0 = h.handle(DescribeClusterRequest(), 0, listener="CONTROLLER")
    assert v0.error_code == ErrorCode.INVALID_REQUEST
    unknown = h.handle(DescribeClusterRequest(endpoint_type=7), 1, listener="PLAINTEXT")
    assert unknown.error_code == 115 and unknown.error_message == "Unsupported endpoint type 7"
    ops = h.handle(DescribeClusterRequest(endpoint_type=1,
                                          include_cluster_authorized_operations=True), 1,
                   listener="PLAINTEXT")
    assert ops.cluster_authorized_operations > 0


def test_describe_producers_has_no_partitions_to_lead():
    h = node()
    tid = uuid.uuid4()
    h.qc.replay(TopicRecord(name="known", topic_id=tid), 0, h.end)
    h.qc.replay(PartitionRecord(partition_id=0, topic_id=tid, replicas=[2], isr=[2],
                                leader=2), 0, h.end)
    r = h.handle(DescribeProducersRequest(topics=[
        TopicRequest(name="known", partition_indexes=[0, 1]),
        TopicRequest(name="nope", partition_indexes=[0])]), 0)
    assert [[p.error_code for p in t.partitions] for t in r.topics] == [[6, 3], [3]]


def test_describe_is_plain_json_data():
    h = node()
    h.ready_ids()
    h.unfenced_broker(2)
    h.init("t")
    image = json.loads(json.dumps(h.qc.describe()))
    assert image["metadata_version"] == 27 and image["features"] == {"metadata.version": 27}
    assert image["brokers"][0]["state"] == "UNFENCED"
    assert image["producer_ids"]["own_block"] == [0, 999]
    assert image["transactions"][0]["transactional_id"] == "t"


def test_every_state_change_and_block_is_a_log_line():
    h = node()
    h.ready_ids()
    epoch = h.register(2).broker_epoch
    unfence = h.qc.handle(BrokerHeartbeatRequest(broker_id=2, broker_epoch=epoch,
                                                 current_metadata_offset=h.end), 1,
                          now_ms=h.now_ms, next_offset=h.end)
    assert unfence.event_lines() == [f"Broker 2 (epoch {epoch}): FENCED -> UNFENCED"]
    h.write(unfence)
    alloc = h.result(AllocateProducerIdsRequest(broker_id=2, broker_epoch=epoch), 0)
    assert alloc.event_lines() == [f"Producer ids [1000, 1999] to broker 2 (epoch {epoch})"]
    h.now_ms += 9001
    fenced = h.tick()
    assert fenced.events[0].startswith(f"Broker 2 (epoch {epoch}): UNFENCED -> FENCED")


def test_unserved_requests_are_refused_not_answered():
    h = node()
    with pytest.raises(UnsupportedRequest):
        h.qc.handle(ApiVersionsRequest(), 3, now_ms=0, next_offset=h.end)
