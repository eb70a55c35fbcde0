"""AddRaftVoter (key 80, KIP-853): a controller joins the voters once it has caught up as an observer; answered after
the VotersRecord naming it commits.

Versions served: 0. Listeners: CONTROLLER.
Behaviour: in a dynamic quorum (`controller.quorum.bootstrap.servers`), Kafka's checks and
error codes by `controller/raft/dynamic.py` and the Raft core; on a lone static voter,
UNSUPPORTED_VERSION (its voters do not change).
"""

from __future__ import annotations

from typing import Any

from kraftpy.controller import api
from kraftpy.controller.raft.dynamic import lone_voter_answer
from kraftpy.protocol.messages.add_raft_voter_request import AddRaftVoterRequest

API_KEY = 80
VERSIONS = (0, 0)
LISTENERS = (api.CONTROLLER,)
REQUEST = AddRaftVoterRequest


async def handle(node: api.Node, request: AddRaftVoterRequest, ctx: api.RequestContext) -> Any:
    shell = getattr(node, "raft_shell", None)
    if shell is None:
        return lone_voter_answer(API_KEY)
    return await shell.voter_changes.add(request)
