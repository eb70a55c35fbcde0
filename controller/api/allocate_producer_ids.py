"""AllocateProducerIds (key 67).

Versions served: 0. Listeners: CONTROLLER.
Behaviour: the controller hands the broker the next block of 1000 ids (KIP-730) and answers
once the ProducerIdsRecord is fsynced; an unregistered broker or a stale broker epoch gets
STALE_BROKER_EPOCH, exhaustion UNKNOWN_SERVER_ERROR; a broker over its quota gets the block with
ThrottleTimeMs set.
Skipped: authorization (CLUSTER_ACTION) is the security layer's.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraftpy.protocol.messages.allocate_producer_ids_response import AllocateProducerIdsResponse

API_KEY = 67
VERSIONS = (0, 0)
LISTENERS = (api.CONTROLLER,)
REQUEST = AllocateProducerIdsRequest


def error_response(code: int) -> AllocateProducerIdsResponse:
    return AllocateProducerIdsResponse(error_code=code, producer_id_start=0, producer_id_len=0)


async def handle(
    node: api.Node, request: AllocateProducerIdsRequest, ctx: api.RequestContext
) -> AllocateProducerIdsResponse:
    return await api.through_controller(node, request, ctx, error_response)
