"""EndQuorumEpoch (key 54): a leader shutting down hands its epoch over.

Versions served: 0-1. Listeners: CONTROLLER.
Behaviour: decided by the Raft core (the election backoff by the successors named) (`api/raft_rpc.py`).
"""

from __future__ import annotations

from typing import Any

from kraftpy.controller import api
from kraftpy.controller.api.raft_rpc import to_raft
from kraftpy.protocol.messages.end_quorum_epoch_request import EndQuorumEpochRequest

API_KEY = 54
VERSIONS = (0, 1)
LISTENERS = (api.CONTROLLER,)
REQUEST = EndQuorumEpochRequest


async def handle(node: api.Node, request: EndQuorumEpochRequest, ctx: api.RequestContext) -> Any:
    return await to_raft(node, request, ctx)
