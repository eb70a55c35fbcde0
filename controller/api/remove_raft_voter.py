"""RemoveRaftVoter (key 81, KIP-853): a voter leaves; answered after the VotersRecord without it commits, and a leader
that removed itself resigns.

Versions served: 0. Listeners: CONTROLLER.
Behaviour: Kafka's checks and error codes by `controller/raft/dynamic.py` and the Raft core (a
static quorum, kraft.version 0, changes no voters: UNSUPPORTED_VERSION, as Kafka answers).
"""

from __future__ import annotations

from typing import Any

from kraftpy.controller import api
from kraftpy.protocol.messages.remove_raft_voter_request import RemoveRaftVoterRequest

API_KEY = 81
VERSIONS = (0, 0)
LISTENERS = (api.CONTROLLER,)
REQUEST = RemoveRaftVoterRequest


async def handle(node: api.Node, request: RemoveRaftVoterRequest, ctx: api.RequestContext) -> Any:
    return await node.quorum.voter_changes.remove(request)
