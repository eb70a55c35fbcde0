"""Vote (key 52): a candidate (or, with PreVote, a prospective) asks for this voter's vote.

Versions served: 0-2. Listeners: CONTROLLER.
Behaviour: decided by the Raft core (the vote: epoch, last offset and epoch, one vote per epoch,
pre-votes never persisted) (`api/raft_rpc.py`).
"""

from __future__ import annotations

from typing import Any

from kraftpy.controller import api
from kraftpy.controller.api.raft_rpc import to_raft
from kraftpy.protocol.messages.vote_request import VoteRequest

API_KEY = 52
VERSIONS = (0, 2)
LISTENERS = (api.CONTROLLER,)
REQUEST = VoteRequest


async def handle(node: api.Node, request: VoteRequest, ctx: api.RequestContext) -> Any:
    return await to_raft(node, request, ctx)
