"""UpdateRaftVoter (key 82, KIP-853): a voter's endpoints or kraft.version range change; answered once the
VotersRecord is appended, as Kafka does.

Versions served: 0. Listeners: CONTROLLER.
Behaviour: Kafka's checks and error codes by `controller/raft/dynamic.py` and the Raft core (a
static quorum, kraft.version 0, changes no voters: UNSUPPORTED_VERSION, as Kafka answers).
"""

from __future__ import annotations

from typing import Any

from kraftpy.controller import api
from kraftpy.protocol.messages.update_raft_voter_request import UpdateRaftVoterRequest

API_KEY = 82
VERSIONS = (0, 0)
LISTENERS = (api.CONTROLLER,)
REQUEST = UpdateRaftVoterRequest


async def handle(node: api.Node, request: UpdateRaftVoterRequest, ctx: api.RequestContext) -> Any:
    return node.quorum.voter_changes.update(request)  # type: ignore[attr-defined,no-any-return]
