"""DescribeQuorum (key 55).

Versions served: 0-2. Listeners: client and CONTROLLER (Kafka answers it on both).
Behaviour: by the Raft core (`controller/raft/describe.py`), a lone voter's too: the leader's
view of every voter and of every observer that fetched within Kafka's observer session (5
minutes), with fetch offsets and times; NOT_LEADER_OR_FOLLOWER on the other voters.
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
    return node.quorum.describe_quorum(request, ctx.api_version)  # type: ignore[attr-defined,no-any-return]
