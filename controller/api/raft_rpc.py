"""What Vote, BeginQuorumEpoch and EndQuorumEpoch share: the way to the Raft core.

In a quorum of several voters the core decides and the handler answers as it says
(`controller/raft/shell.py`, `RaftQuorum.raft_request`). A node that is the only voter has no
election to hold: it answers INCONSISTENT_VOTER_SET with its epoch and itself as leader, as
a Kafka leader of a one-voter quorum refuses a candidate.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kraftpy.controller import api

INCONSISTENT_VOTER_SET = 94


async def to_raft(node: api.Node, request: Any, ctx: api.RequestContext,
                  lone_voter_answer: Callable[[int, int, int], Any]) -> Any:
    """The core's answer, or `lone_voter_answer(error, epoch, leader id)` on a lone voter."""
    shell = getattr(node, "raft_shell", None)
    if shell is None:
        raft = getattr(node, "raft", None)
        return lone_voter_answer(INCONSISTENT_VOTER_SET, getattr(raft, "epoch", 0),
                                 node.config.node_id)
    response = await shell.raft_request(request, ctx.api_version)
    if response is None:
        raise RuntimeError("the raft quorum stopped before answering")
    return response
