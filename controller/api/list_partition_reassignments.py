"""ListPartitionReassignments (key 46).

Versions served: 0. Listeners: client and CONTROLLER (a broker forwards it in an Envelope).
Behaviour: the reassignments in flight (partition_commands.py): each partition's replicas,
adding and removing replicas; null topics list every reassigning partition, named ones only
those of them that are reassigning (`kafka-topics --describe` asks it of every topic it
shows; `kafka-reassign-partitions --verify` asks it too). With an authorizer, DESCRIBE on the
cluster is needed (the security layer's check).
Skipped: nothing.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from kraftpy.protocol.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
)

API_KEY = 46
VERSIONS = (0, 0)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = ListPartitionReassignmentsRequest


def error_response(code: int) -> ListPartitionReassignmentsResponse:
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=code, topics=[])


async def handle(node: api.Node, request: ListPartitionReassignmentsRequest,
                 ctx: api.RequestContext) -> ListPartitionReassignmentsResponse:
    return await api.through_controller(node, request, ctx, error_response)
