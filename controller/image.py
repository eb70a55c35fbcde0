"""Read-only views of the controller state: describe() and the describing requests.

Nothing here changes state. DescribeCluster and DescribeQuorum follow Kafka's answers on a
combined node (checked against real Kafka 4.1 exchanges); DescribeProducers has no producer
state to show, since kraftpy leads no partition.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.describe_cluster_response import (
    DescribeClusterBroker,
    DescribeClusterResponse,
)
from kraftpy.protocol.messages.describe_producers_response import (
    DescribeProducersResponse,
    PartitionResponse,
    TopicResponse,
)

if TYPE_CHECKING:
    from kraftpy.controller.quorum_controller import QuorumController

UNKNOWN_TOPIC_OR_PARTITION = getattr(ErrorCode, "UNKNOWN_TOPIC_OR_PARTITION", 3)
NOT_LEADER_OR_FOLLOWER = getattr(ErrorCode, "NOT_LEADER_OR_FOLLOWER", 6)
MISMATCHED_ENDPOINT_TYPE = getattr(ErrorCode, "MISMATCHED_ENDPOINT_TYPE", 114)
UNSUPPORTED_ENDPOINT_TYPE = getattr(ErrorCode, "UNSUPPORTED_ENDPOINT_TYPE", 115)

METADATA_TOPIC = "__cluster_metadata"
BROKER_ENDPOINT, CONTROLLER_ENDPOINT = 1, 2
ENDPOINT_NAMES = {BROKER_ENDPOINT: "BROKER", CONTROLLER_ENDPOINT: "CONTROLLER"}
AUTHORIZED_OPERATIONS_OMITTED = -(1 << 31)
# Kafka's AclOperation codes allowed on the CLUSTER resource, reported when no authorizer
# narrows them: CREATE 5, ALTER 7, DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10,
# ALTER_CONFIGS 11, IDEMPOTENT_WRITE 12.
CLUSTER_OPERATIONS = sum(1 << op for op in (5, 7, 8, 9, 10, 11, 12))


def describe_cluster(qc: QuorumController, request: Any, api_version: int,
                     listener: str | None) -> DescribeClusterResponse:
    """Brokers on a client listener, controllers on a CONTROLLER one (KIP-919)."""
    settings = qc.settings
    wanted = request.endpoint_type if api_version >= 1 else BROKER_ENDPOINT
    if listener is None:
        here = wanted
    else:
        here = CONTROLLER_ENDPOINT if listener in settings.controller_listener_names \
            else BROKER_ENDPOINT
    if wanted not in ENDPOINT_NAMES:
        return DescribeClusterResponse(
            error_code=ErrorCode.INVALID_REQUEST if api_version == 0
            else UNSUPPORTED_ENDPOINT_TYPE,
            error_message=f"Unsupported endpoint type {wanted}")
    if wanted != here:
        return DescribeClusterResponse(
            error_code=ErrorCode.INVALID_REQUEST if api_version == 0
            else MISMATCHED_ENDPOINT_TYPE,
            error_message=f"The request was sent to an endpoint of type "
                          f"{ENDPOINT_NAMES[here]}, but we wanted an endpoint of type "
                          f"{ENDPOINT_NAMES[wanted]}")
    own = settings.controller_endpoints() if wanted == CONTROLLER_ENDPOINT \
        else settings.broker_endpoints()
    if listener is not None:
        own = tuple(e for e in own if e.name == listener) or own
    brokers = [DescribeClusterBroker(broker_id=settings.node_id, host=own[0].host,
                                     port=own[0].port, rack=settings.rack)] if own else []
    if wanted == BROKER_ENDPOINT and listener is not None:
        include_fenced = api_version >= 2 and getattr(request, "include_fenced_brokers", False)
        for reg in sorted(qc.cluster.brokers.values(), key=lambda r: r.broker_id):
            if reg.fenced and not include_fenced:
                continue
            for name, host, port, _ in reg.endpoints:
                if name == listener:
                    brokers.append(DescribeClusterBroker(broker_id=reg.broker_id, host=host,
                                                         port=port, rack=reg.rack,
                                                         is_fenced=reg.fenced))
    return DescribeClusterResponse(
        error_code=ErrorCode.NONE, endpoint_type=wanted, cluster_id=settings.cluster_id,
        controller_id=settings.node_id, brokers=brokers,
        cluster_authorized_operations=CLUSTER_OPERATIONS
        if request.include_cluster_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED)


def describe_producers(qc: QuorumController, request: Any) -> DescribeProducersResponse:
    """No partition is led here: known partitions are NOT_LEADER_OR_FOLLOWER."""
    replication = qc.replication
    out = []
    for t in request.topics:
        topic_id = replication.topics_by_name.get(t.name)
        topic = None if topic_id is None else replication.topics.get(topic_id)
        parts = []
        for index in t.partition_indexes:
            known = topic is not None and index in topic.partitions
            parts.append(PartitionResponse(
                partition_index=index,
                error_code=NOT_LEADER_OR_FOLLOWER if known else UNKNOWN_TOPIC_OR_PARTITION))
        out.append(TopicResponse(name=t.name, partitions=parts))
    return DescribeProducersResponse(throttle_time_ms=0, topics=out)


def describe(qc: QuorumController) -> dict[str, Any]:
    s = qc.settings
    producer_ids = qc.producer_ids.describe() | qc.own_ids.describe()
    return {
        "cluster_id": s.cluster_id,
        "node_id": s.node_id,
        "leader_epoch": qc.leader_epoch,
        "high_watermark": qc.high_watermark,
        "txn_high_watermark": qc.txn_high_watermark,
        "log_end_offset": qc.log_end_offset,
        "metadata_version": qc.features.metadata_version,
        "features": dict(sorted(qc.features.finalized.items())),
        "features_epoch": qc.features.epoch,
        "brokers": qc.cluster.describe(),
        "topics": qc.replication.describe(),
        "producer_ids": producer_ids,
        "transactions": qc.transactions.describe(),
        "acls": len(qc.acls.acls()),
    }
