"""FetchSnapshot (key 59): a snapshot of __cluster_metadata-0, by position, for a fetcher that
the leader's Fetch answer sent to a snapshot (its offset is below the log start).

Versions served: 0-1. Listeners: CONTROLLER.
Behaviour: the Raft core decides (`Quorum.raft_request`, KafkaRaftClient's
handleFetchSnapshotRequest): cluster id, topic and leader-epoch checks; SNAPSHOT_NOT_FOUND for
the bootstrap snapshot (0-0) and for ids not on disk; POSITION_OUT_OF_RANGE; otherwise the
file's bytes from Position (at most MaxBytes), its Size, CurrentLeader and (v1) NodeEndpoints.
CLUSTER_ACTION with an authorizer.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.controller.api.raft_rpc import to_raft
from kraftpy.protocol.messages.fetch_snapshot_request import FetchSnapshotRequest
from kraftpy.protocol.messages.fetch_snapshot_response import FetchSnapshotResponse

API_KEY = 59
VERSIONS = (0, 1)
LISTENERS = (api.CONTROLLER,)
REQUEST = FetchSnapshotRequest


async def handle(node: api.Node, request: FetchSnapshotRequest, ctx: api.RequestContext
                 ) -> FetchSnapshotResponse:
    return await to_raft(node, request, ctx)  # type: ignore[no-any-return]
