"""FindCoordinator (key 10).

Versions served: 0-6 (v0-3 one key, v4+ batched). Listeners: client.
Behaviour: this node is the transaction coordinator for every transactional id, so a
transaction key gets this node at the advertised address of the request's listener. kraftpy
has no group or share coordinator: those keys get COORDINATOR_NOT_AVAILABLE, which clients
retry. An unknown key type gets INVALID_REQUEST. v0 has no key type and means a group.
Skipped: nothing else.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kraftpy.protocol.messages.find_coordinator_response import (
    Coordinator,
    FindCoordinatorResponse,
)

API_KEY = 10
VERSIONS = (0, 6)
LISTENERS = (api.BROKER,)
REQUEST = FindCoordinatorRequest

GROUP, TRANSACTION, SHARE = 0, 1, 2

# Kafka's Errors messages, sent as ErrorMessage in v1-3.
_MESSAGES = {
    ErrorCode.NONE: "NONE",
    ErrorCode.COORDINATOR_NOT_AVAILABLE: "The coordinator is not available.",
    ErrorCode.INVALID_REQUEST: (
        "This most likely occurs because of a request being malformed by the client library "
        "or the message was sent to an incompatible broker. See the broker logs for more "
        "details."
    ),
}


def _lookup(key_type: int) -> ErrorCode:
    if key_type == TRANSACTION:
        return ErrorCode.NONE
    if key_type in (GROUP, SHARE):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.INVALID_REQUEST


async def handle(
    node: api.Node, request: FindCoordinatorRequest, ctx: api.RequestContext
) -> FindCoordinatorResponse:
    here = node.config.advertised(ctx.listener)
    node_id = node.config.node_id
    error = _lookup(request.key_type)
    if ctx.api_version < 4:
        found = error == ErrorCode.NONE
        return FindCoordinatorResponse(
            throttle_time_ms=0,
            error_code=error,
            error_message=_MESSAGES[error],
            node_id=node_id if found else -1,
            host=here.host if found else "",
            port=here.port if found else -1,
        )
    coordinators = []
    for key in request.coordinator_keys:
        found = error == ErrorCode.NONE
        coordinators.append(Coordinator(
            key=key,
            node_id=node_id if found else -1,
            host=here.host if found else "",
            port=here.port if found else -1,
            error_code=error,
            error_message="" if found or error != ErrorCode.INVALID_REQUEST
            else _MESSAGES[error],
        ))
    return FindCoordinatorResponse(throttle_time_ms=0, coordinators=coordinators)
