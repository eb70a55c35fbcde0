"""EndQuorumEpoch (key 54): a leader shutting down hands its epoch over.

Versions served: 0-1. Listeners: CONTROLLER.
Behaviour: in a quorum of several voters the Raft core decides (the election backoff by the successors named) and this
answers as it says (`controller/raft/shell.py`, `RaftQuorum.raft_request`). A node that is the
only voter has no election to hold: it answers INCONSISTENT_VOTER_SET with its epoch and itself as leader
in the partition, as a Kafka leader of a one-voter quorum would refuse a candidate.
"""

from __future__ import annotations

from typing import Any

from kraftpy.controller import api
from kraftpy.controller.raft import messages as m
from kraftpy.protocol.messages.end_quorum_epoch_request import EndQuorumEpochRequest

API_KEY = 54
VERSIONS = (0, 1)
LISTENERS = (api.CONTROLLER,)
REQUEST = EndQuorumEpochRequest
INCONSISTENT_VOTER_SET = 94


async def handle(node: api.Node, request: EndQuorumEpochRequest, ctx: api.RequestContext) -> Any:
    shell = getattr(node, "raft_shell", None)
    if shell is None:
        return m.end_quorum_epoch_response(INCONSISTENT_VOTER_SET, _epoch(node), node.config.node_id, None)
    response = await shell.raft_request(request, ctx.api_version)
    if response is None:
        raise RuntimeError("the raft quorum stopped before answering")
    return response


def _epoch(node: api.Node) -> int:
    raft = getattr(node, "raft", None)
    return getattr(raft, "epoch", 0)
