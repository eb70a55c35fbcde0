"""Vote (key 52): a candidate (or, with PreVote, a prospective) asks for this voter's vote.

Versions served: 0-2. Listeners: CONTROLLER.
Behaviour: in a quorum of several voters the Raft core decides (the vote: epoch, last offset and epoch, one vote per epoch, pre-votes never persisted) and this
answers as it says (`controller/raft/shell.py`, `RaftQuorum.raft_request`). A node that is the
only voter has no election to hold: it answers INCONSISTENT_VOTER_SET (not granted) with its epoch and itself as leader
in the partition, as a Kafka leader of a one-voter quorum would refuse a candidate.
"""

from __future__ import annotations

from typing import Any

from kraftpy.controller import api
from kraftpy.controller.raft import messages as m
from kraftpy.protocol.messages.vote_request import VoteRequest

API_KEY = 52
VERSIONS = (0, 2)
LISTENERS = (api.CONTROLLER,)
REQUEST = VoteRequest
INCONSISTENT_VOTER_SET = 94


async def handle(node: api.Node, request: VoteRequest, ctx: api.RequestContext) -> Any:
    shell = getattr(node, "raft_shell", None)
    if shell is None:
        return m.vote_response(INCONSISTENT_VOTER_SET, _epoch(node), node.config.node_id, False, None)
    response = await shell.raft_request(request, ctx.api_version)
    if response is None:
        raise RuntimeError("the raft quorum stopped before answering")
    return response


def _epoch(node: api.Node) -> int:
    raft = getattr(node, "raft", None)
    return getattr(raft, "epoch", 0)
