"""BrokerHeartbeat (key 63).

Versions served: 0-1. Listeners: CONTROLLER.
Behaviour: KIP-631's broker state machine in the controller (FENCED, UNFENCED, controlled
shutdown, SHUTDOWN_NOW); a state change is answered after its BrokerRegistrationChangeRecord is
fsynced, a heartbeat that changes nothing at once. Unknown broker or stale epoch:
STALE_BROKER_EPOCH.
Skipped: OfflineLogDirs are accepted and ignored (no partitions live here).
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraftpy.protocol.messages.broker_heartbeat_response import BrokerHeartbeatResponse

API_KEY = 63
VERSIONS = (0, 1)
LISTENERS = (api.CONTROLLER,)
REQUEST = BrokerHeartbeatRequest


def error_response(code: int) -> BrokerHeartbeatResponse:
    return BrokerHeartbeatResponse(error_code=code, is_caught_up=False, is_fenced=True, should_shut_down=False)


async def handle(
    node: api.Node, request: BrokerHeartbeatRequest, ctx: api.RequestContext
) -> BrokerHeartbeatResponse:
    return await api.through_controller(node, request, ctx, error_response)
