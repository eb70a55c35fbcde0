"""SaslHandshake (key 17).

Versions served: 0-1. Listeners: client and CONTROLLER (Kafka advertises it everywhere).
Behaviour: on a SASL listener the handshake happens before any request is dispatched, in the
security layer (controller/security/layer.py), which is the only place that reaches this API
while a connection is unauthenticated. What arrives here is a handshake on a connection that
is already authenticated, or on a listener without SASL: Kafka answers both with
ILLEGAL_SASL_STATE and the enabled mechanisms (none here).
Skipped: nothing.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.sasl_handshake_request import SaslHandshakeRequest
from kraftpy.protocol.messages.sasl_handshake_response import SaslHandshakeResponse

API_KEY = 17
VERSIONS = (0, 1)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = SaslHandshakeRequest


async def handle(
    node: api.Node, request: SaslHandshakeRequest, ctx: api.RequestContext
) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=ErrorCode.ILLEGAL_SASL_STATE, mechanisms=[])
