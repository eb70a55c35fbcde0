"""DescribeQuorum (key 55).

Versions served: 0-2. Listeners: client and CONTROLLER (Kafka answers it on both).
Behaviour: in a quorum of several voters, by the Raft core (`controller/raft/describe.py`):
the leader's view of every voter and observer, NOT_LEADER_OR_FOLLOWER on the others. A node
that is its own only voter answers through the controller: this node, leading at the epoch
bumped at every start, with the high watermark of __cluster_metadata-0.
Observers: every broker that fetched the log within Kafka's observer session (5 minutes),
with its fetch offset and times, filled in by the raft leader (`controller/raft/leader.py`).
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.messages.describe_quorum_request import DescribeQuorumRequest
from kraftpy.protocol.messages.describe_quorum_response import DescribeQuorumResponse

API_KEY = 55
VERSIONS = (0, 2)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = DescribeQuorumRequest


def error_response(code: int) -> DescribeQuorumResponse:
    return DescribeQuorumResponse(error_code=code)


async def handle(
    node: api.Node, request: DescribeQuorumRequest, ctx: api.RequestContext
) -> DescribeQuorumResponse:
    shell = getattr(node, "raft_shell", None)
    if shell is not None:
        return shell.describe_quorum(request, ctx.api_version)  # type: ignore[no-any-return]
    response = await api.through_controller(node, request, ctx, error_response)
    raft = getattr(node, "raft", None)
    if raft is not None and response.error_code == 0:
        raft.add_observers(response, ctx.api_version, node.clock_ms())  # type: ignore[attr-defined]
    return response
