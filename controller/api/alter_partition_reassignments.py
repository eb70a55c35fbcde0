"""AlterPartitionReassignments (key 45).

Versions served: 0-1. Listeners: client and CONTROLLER (a broker forwards it in an Envelope).
Behaviour: Kafka's alterPartitionReassignments (partition_commands.py): per partition a
target replica list starts (or changes) a reassignment, null cancels one; the new replicas
join as adding, the leaving ones stay as removing until the leader's AlterPartition shows
every target replica in sync, and the controller then finishes it. Errors per partition:
UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT (empty, repeated or unregistered
brokers; a cancel that would need an unclean election the topic forbids),
NO_REASSIGNMENT_IN_PROGRESS, and from v1 INVALID_REPLICATION_FACTOR when
AllowReplicationFactorChange is false and the count changes. All records in one batch.
With an authorizer, ALTER on the cluster.
Skipped: nothing.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
)
from kraftpy.protocol.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)

API_KEY = 45
VERSIONS = (0, 1)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = AlterPartitionReassignmentsRequest


def error_response(request: AlterPartitionReassignmentsRequest, code: int
                   ) -> AlterPartitionReassignmentsResponse:
    """AlterPartitionReassignmentsRequest.getErrorResponse: the error on every partition."""
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=code, error_message=None, responses=[
            ReassignableTopicResponse(name=t.name, partitions=[
                ReassignablePartitionResponse(partition_index=p.partition_index,
                                              error_code=code, error_message=None)
                for p in t.partitions])
            for t in request.topics])


async def handle(node: api.Node, request: AlterPartitionReassignmentsRequest,
                 ctx: api.RequestContext) -> AlterPartitionReassignmentsResponse:
    return await api.through_controller(node, request, ctx,
                                        lambda code: error_response(request, code))
