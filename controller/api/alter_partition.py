"""AlterPartition (key 56).

Versions served: 2-3 (Kafka 4.1's). Listeners: CONTROLLER.
Behaviour: a partition leader asks for a new ISR (shrink or expand) and leader recovery state;
Kafka's checks in its order (partition_commands.py): an empty request is an empty answer, a
stale broker epoch STALE_BROKER_EPOCH for the whole request, then per partition
UNKNOWN_TOPIC_ID, UNKNOWN_TOPIC_OR_PARTITION, NOT_CONTROLLER (epochs newer than ours),
FENCED_LEADER_EPOCH, INVALID_REQUEST (not the leader, an ISR outside the replicas or without
the leader, a bad recovery state), INVALID_UPDATE_VERSION, INELIGIBLE_REPLICA (v3 broker
epochs, fenced or shutting-down members); an accepted change is one PartitionChangeRecord and
the answer carries the partition's new leader, epochs, ISR and recovery state. An ISR that
completes a reassignment and moves the leader is written and answered NEW_LEADER_ELECTED.
CLUSTER_ACTION with an authorizer.
Skipped: nothing.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.messages.alter_partition_request import AlterPartitionRequest
from kraftpy.protocol.messages.alter_partition_response import AlterPartitionResponse

API_KEY = 56
VERSIONS = (2, 3)
LISTENERS = (api.CONTROLLER,)
REQUEST = AlterPartitionRequest


def error_response(code: int) -> AlterPartitionResponse:
    return AlterPartitionResponse(throttle_time_ms=0, error_code=code, topics=[])


async def handle(node: api.Node, request: AlterPartitionRequest, ctx: api.RequestContext
                 ) -> AlterPartitionResponse:
    return await api.through_controller(node, request, ctx, error_response)
