"""BeginQuorumEpoch (key 53): a new leader tells the voters of its epoch.

Versions served: 0-1. Listeners: CONTROLLER.
Behaviour: decided by the Raft core (whether to follow it) (`api/raft_rpc.py`).
"""

from __future__ import annotations

from typing import Any

from kraftpy.controller import api
from kraftpy.controller.api.raft_rpc import to_raft
from kraftpy.protocol.messages.begin_quorum_epoch_request import BeginQuorumEpochRequest

API_KEY = 53
VERSIONS = (0, 1)
LISTENERS = (api.CONTROLLER,)
REQUEST = BeginQuorumEpochRequest


async def handle(node: api.Node, request: BeginQuorumEpochRequest, ctx: api.RequestContext) -> Any:
    return await to_raft(node, request, ctx)
