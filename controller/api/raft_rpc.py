"""What Vote, BeginQuorumEpoch and EndQuorumEpoch share: the way to the Raft core.

Every node runs the core (`controller/quorum.py`, `Quorum.raft_request`): it decides,
and the handler answers as it says. A lone voter's core answers too, as a Kafka leader of a
one-voter quorum does.
"""

from __future__ import annotations

from typing import Any

from kraftpy.controller import api


async def to_raft(node: api.Node, request: Any, ctx: api.RequestContext) -> Any:
    """The core's answer; a quorum stopping meanwhile is a server error (the connection's
    request gets the API's error response from dispatch)."""
    response = await node.quorum.raft_request(request, ctx.api_version)  # type: ignore[attr-defined]
    if response is None:
        raise RuntimeError("the raft quorum stopped before answering")
    return response
