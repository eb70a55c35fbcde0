"""UpdateRaftVoter (key 82, KIP-853): a voter's endpoints or kraft.version range change; answered once the
VotersRecord is appended, as Kafka does.

Versions served: 0. Listeners: CONTROLLER.
Behaviour: in a dynamic quorum (`controller.quorum.bootstrap.servers`), Kafka's checks and
error codes by `controller/raft/dynamic.py` and the Raft core; on a lone static voter,
UNSUPPORTED_VERSION (its voters do not change).
"""

from __future__ import annotations

from typing import Any

from kraftpy.controller import api
from kraftpy.controller.raft.dynamic import lone_voter_answer
from kraftpy.protocol.messages.update_raft_voter_request import UpdateRaftVoterRequest

API_KEY = 82
VERSIONS = (0, 0)
LISTENERS = (api.CONTROLLER,)
REQUEST = UpdateRaftVoterRequest


async def handle(node: api.Node, request: UpdateRaftVoterRequest, ctx: api.RequestContext) -> Any:
    shell = getattr(node, "raft_shell", None)
    if shell is None:
        return lone_voter_answer(API_KEY)
    return shell.voter_changes.update(request)
