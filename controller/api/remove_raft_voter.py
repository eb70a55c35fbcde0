"""RemoveRaftVoter (key 81, KIP-853): a voter leaves; answered after the VotersRecord without it commits, and a leader
that removed itself resigns.

Versions served: 0. Listeners: CONTROLLER.
Behaviour: in a dynamic quorum (`controller.quorum.bootstrap.servers`), Kafka's checks and
error codes by `controller/raft/dynamic.py` and the Raft core; on a lone static voter,
UNSUPPORTED_VERSION (its voters do not change).
"""

from __future__ import annotations

from typing import Any

from kraftpy.controller import api
from kraftpy.controller.raft.dynamic import lone_voter_answer
from kraftpy.protocol.messages.remove_raft_voter_request import RemoveRaftVoterRequest

API_KEY = 81
VERSIONS = (0, 0)
LISTENERS = (api.CONTROLLER,)
REQUEST = RemoveRaftVoterRequest


async def handle(node: api.Node, request: RemoveRaftVoterRequest, ctx: api.RequestContext) -> Any:
    shell = getattr(node, "raft_shell", None)
    if shell is None:
        return lone_voter_answer(API_KEY)
    return await shell.voter_changes.remove(request)
