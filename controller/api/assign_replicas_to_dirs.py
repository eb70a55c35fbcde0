"""AssignReplicasToDirs (key 73).

Versions served: 0. Listeners: CONTROLLER.
Behaviour: a broker with several log dirs (its new partitions carry the UNASSIGNED directory)
says which dir holds each replica; each replica whose directory changes gets a
PartitionChangeRecord with the new directories, all in one batch. A stale broker epoch is
STALE_BROKER_EPOCH, an unregistered broker BROKER_ID_NOT_REGISTERED; an unknown topic, an
unknown partition or a partition the broker does not replicate gets UNKNOWN_TOPIC_ID,
UNKNOWN_TOPIC_OR_PARTITION or NOT_LEADER_OR_FOLLOWER. CLUSTER_ACTION with an authorizer.
A replica assigned to a directory that is not one of the broker's online ones (LOST, or one
it never registered) leaves the ISR and its leadership moves, in the same batch.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.messages.assign_replicas_to_dirs_request import AssignReplicasToDirsRequest
from kraftpy.protocol.messages.assign_replicas_to_dirs_response import (
    AssignReplicasToDirsResponse,
)

API_KEY = 73
VERSIONS = (0, 0)
LISTENERS = (api.CONTROLLER,)
REQUEST = AssignReplicasToDirsRequest


def error_response(code: int) -> AssignReplicasToDirsResponse:
    return AssignReplicasToDirsResponse(throttle_time_ms=0, error_code=code, directories=[])


async def handle(node: api.Node, request: AssignReplicasToDirsRequest, ctx: api.RequestContext
                 ) -> AssignReplicasToDirsResponse:
    return await api.through_controller(node, request, ctx, error_response)
