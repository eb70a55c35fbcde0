"""AddRaftVoter (key 80, KIP-853): a controller joins the voters once it has caught up as an observer; answered after
the VotersRecord naming it commits.

Versions served: 0. Listeners: CONTROLLER.
Behaviour: Kafka's checks and error codes by `controller/raft/dynamic.py` and the Raft core (a
static quorum, kraft.version 0, changes no voters: UNSUPPORTED_VERSION, as Kafka answers).
"""

from __future__ import annotations

from typing import Any

from kraftpy.controller import api
from kraftpy.protocol.messages.add_raft_voter_request import AddRaftVoterRequest

API_KEY = 80
VERSIONS = (0, 0)
LISTENERS = (api.CONTROLLER,)
REQUEST = AddRaftVoterRequest


async def handle(node: api.Node, request: AddRaftVoterRequest, ctx: api.RequestContext) -> Any:
    return await node.quorum.voter_changes.add(request)
