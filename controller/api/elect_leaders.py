"""ElectLeaders (key 43).

Versions served: 0-2. Listeners: client and CONTROLLER (a broker forwards it in an Envelope).
Behaviour: Kafka's electLeaders: PREFERRED (v0 always) moves leadership to the first replica
when it is alive and in sync, UNCLEAN elects a live replica for a leaderless partition even
outside the ISR (ISR reset to it, leader recovery state RECOVERING). Per partition:
UNKNOWN_TOPIC_OR_PARTITION, ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE or
ELIGIBLE_LEADERS_NOT_AVAILABLE; null partitions elect for every partition and leave out the
ones that need none; an unknown election type is INVALID_REQUEST on every partition. With an
authorizer, ALTER on the cluster (CLUSTER_AUTHORIZATION_FAILED on every partition).
Skipped: nothing.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.controller.partition_commands import PartitionCommands
from kraftpy.protocol.messages.elect_leaders_request import ElectLeadersRequest
from kraftpy.protocol.messages.elect_leaders_response import ElectLeadersResponse

API_KEY = 43
VERSIONS = (0, 2)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = ElectLeadersRequest


def error_response(request: ElectLeadersRequest, version: int, code: int
                   ) -> ElectLeadersResponse:
    """ElectLeadersRequest.getErrorResponse (no message for UNKNOWN_SERVER_ERROR)."""
    return PartitionCommands.elect_error(request, version, code, None)


async def handle(node: api.Node, request: ElectLeadersRequest, ctx: api.RequestContext
                 ) -> ElectLeadersResponse:
    return await api.through_controller(node, request, ctx,
                                        lambda code: error_response(request, ctx.api_version,
                                                                    code))
