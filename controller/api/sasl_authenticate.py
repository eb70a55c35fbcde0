"""SaslAuthenticate (key 36).

Versions served: 0-2. Listeners: client and CONTROLLER.
Behaviour: the exchange itself runs in the security layer before dispatch (see
sasl_handshake.py). What arrives here comes after authentication, or on a listener without
SASL: ILLEGAL_SASL_STATE, with Kafka's message.
Skipped: re-authentication (KIP-368); sessions do not expire (SessionLifetimeMs 0).
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from kraftpy.protocol.messages.sasl_authenticate_response import SaslAuthenticateResponse

API_KEY = 36
VERSIONS = (0, 2)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = SaslAuthenticateRequest


async def handle(
    node: api.Node, request: SaslAuthenticateRequest, ctx: api.RequestContext
) -> SaslAuthenticateResponse:
    return SaslAuthenticateResponse(
        error_code=ErrorCode.ILLEGAL_SASL_STATE,
        error_message="SaslAuthenticate request received after successful authentication",
        auth_bytes=b"",
    )
