"""UnregisterBroker (key 64).

Versions served: 0. Listeners: client and CONTROLLER (as Kafka lists it).
Behaviour: the controller writes UnregisterBrokerRecord; an unknown broker gets
BROKER_ID_NOT_REGISTERED.
Skipped: nothing.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.messages.unregister_broker_request import UnregisterBrokerRequest
from kraftpy.protocol.messages.unregister_broker_response import UnregisterBrokerResponse

API_KEY = 64
VERSIONS = (0, 0)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = UnregisterBrokerRequest


def error_response(code: int) -> UnregisterBrokerResponse:
    return UnregisterBrokerResponse(error_code=code, error_message=None)


async def handle(
    node: api.Node, request: UnregisterBrokerRequest, ctx: api.RequestContext
) -> UnregisterBrokerResponse:
    return await api.through_controller(node, request, ctx, error_response)
