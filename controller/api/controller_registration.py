"""ControllerRegistration (key 70).

Versions served: 0. Listeners: CONTROLLER.
Behaviour: every controller of a quorum (KIP-919) tells the active controller its listeners
and supported feature ranges once per process; the active controller writes a
RegisterControllerRecord and answers once it is committed. A Kafka controller that follows a
kraftpy leader sends this after it has caught up; elsewhere the answer is NOT_CONTROLLER and
the sender retries with the new leader.
Skipped: nothing (ZK migration readiness is always written false, as Kafka 4.1 does).
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.messages.controller_registration_request import (
    ControllerRegistrationRequest,
)
from kraftpy.protocol.messages.controller_registration_response import (
    ControllerRegistrationResponse,
)

API_KEY = 70
VERSIONS = (0, 0)
LISTENERS = (api.CONTROLLER,)
REQUEST = ControllerRegistrationRequest


def error_response(code: int) -> ControllerRegistrationResponse:
    return ControllerRegistrationResponse(error_code=code)


async def handle(
    node: api.Node, request: ControllerRegistrationRequest, ctx: api.RequestContext
) -> ControllerRegistrationResponse:
    return await api.through_controller(node, request, ctx, error_response)
