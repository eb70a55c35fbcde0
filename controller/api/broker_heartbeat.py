"""BrokerHeartbeat (key 63).

Versions served: 0-1. Listeners: CONTROLLER.
Behaviour: KIP-631's broker state machine in the controller (FENCED, UNFENCED, controlled
shutdown, SHUTDOWN_NOW); a state change is answered after its BrokerRegistrationChangeRecord is
fsynced, a heartbeat that changes nothing at once. Unknown broker or stale epoch:
STALE_BROKER_EPOCH. OfflineLogDirs (metadata.version 3.7-IV2 on): each newly offline
directory of the broker hands the leaderships of its partitions to other in-sync replicas and
drops the broker from their ISRs, and a BrokerRegistrationChangeRecord keeps the online ones
(KIP-858); the answer then waits for those records.
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
