"""InitProducerId (key 22).

Versions served: 0-5. Listeners: client.
Behaviour: decided by the controller (KIP-98/360 decision table, id blocks prefetched so no
request waits on a disk write; COORDINATOR_LOAD_IN_PROGRESS while no id is ready). The answer
to a transactional id is sent only after its __transaction_state record is fsynced. Before v4
PRODUCER_FENCED does not exist: it is sent as INVALID_PRODUCER_EPOCH, as Kafka does.
Skipped: v6 (KIP-939 two-phase commit); Kafka 4.1 does not serve it either.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.messages.init_producer_id_response import InitProducerIdResponse

API_KEY = 22
VERSIONS = (0, 5)
LISTENERS = (api.BROKER,)
REQUEST = InitProducerIdRequest


def error_response(code: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)


async def handle(
    node: api.Node, request: InitProducerIdRequest, ctx: api.RequestContext
) -> InitProducerIdResponse:
    try:  # api.through_controller, inlined on the busiest path
        response = await node.submit(request, ctx.api_version, ctx)
    except Exception:
        api.controller_failed(request, ctx)
        return error_response(-1)
    if ctx.api_version < 4 and response.error_code == ErrorCode.PRODUCER_FENCED:
        response.error_code = ErrorCode.INVALID_PRODUCER_EPOCH
    return response
