"""BrokerRegistration (key 62).

Versions served: 0-4. Listeners: CONTROLLER.
Behaviour: the controller checks cluster id, duplicate live incarnation and feature ranges,
writes a fenced RegisterBrokerRecord and answers its broker epoch (the offset where the
operation's records begin) once fsynced.
Skipped: ZK migration (IsMigratingZkBroker is refused by the controller).
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.messages.broker_registration_request import BrokerRegistrationRequest
from kraftpy.protocol.messages.broker_registration_response import BrokerRegistrationResponse

API_KEY = 62
VERSIONS = (0, 4)
LISTENERS = (api.CONTROLLER,)
REQUEST = BrokerRegistrationRequest


def error_response(code: int) -> BrokerRegistrationResponse:
    return BrokerRegistrationResponse(error_code=code, broker_epoch=-1)


async def handle(
    node: api.Node, request: BrokerRegistrationRequest, ctx: api.RequestContext
) -> BrokerRegistrationResponse:
    return await api.through_controller(node, request, ctx, error_response)
