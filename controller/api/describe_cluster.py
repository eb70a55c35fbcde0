"""DescribeCluster (key 60).

Versions served: 0-2. Listeners: client and CONTROLLER.
Behaviour: answered by the controller from its image (KIP-919 endpoint types: brokers on a
client listener, controllers on the CONTROLLER listener; the other type gets
MISMATCHED_ENDPOINT_TYPE, as Kafka answers), given the listener the request came in on. In a quorum of several voters any voter answers
on a CONTROLLER listener, with the voters as controllers and the Raft leader's id.
Skipped: cluster authorized operations stay at Kafka's "not computed" value.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kraftpy.protocol.messages.describe_cluster_response import DescribeClusterResponse

API_KEY = 60
VERSIONS = (0, 2)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = DescribeClusterRequest


def error_response(code: int) -> DescribeClusterResponse:
    return DescribeClusterResponse(error_code=code, error_message=None)


async def handle(
    node: api.Node, request: DescribeClusterRequest, ctx: api.RequestContext
) -> DescribeClusterResponse:
    quorum = getattr(node, "quorum", None)
    if quorum is not None and ctx.listener_type == api.CONTROLLER:
        # Any voter answers (Kafka's controllers do), naming the Raft leader: what
        # `--bootstrap-controller` clients use to find the active controller.
        return quorum.describe_cluster(  # type: ignore[no-any-return]
            request, ctx.api_version, ctx.listener)
    return await api.through_controller(node, request, ctx, error_response)
