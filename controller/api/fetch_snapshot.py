"""FetchSnapshot (key 59): a snapshot of __cluster_metadata-0, by position, for a fetcher that
the leader's Fetch answer sent to a snapshot (its offset is below the log start).

Versions served: 0-1. Listeners: CONTROLLER.
Behaviour: KafkaRaftClient's handleFetchSnapshotRequest (`controller/raft/leader.py`): cluster
id, topic and leader-epoch checks; SNAPSHOT_NOT_FOUND for the bootstrap snapshot (0-0) and for
ids not on disk; POSITION_OUT_OF_RANGE; otherwise the file's bytes from Position (at most
MaxBytes), its Size, CurrentLeader and (v1) NodeEndpoints. CLUSTER_ACTION with an authorizer.
In a quorum of several voters the Raft core answers (`RaftQuorum.raft_request`).
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.controller.api.fetch import endpoint
from kraftpy.controller.log.snapshots import SnapshotId
from kraftpy.controller.raft.leader import MAX_FETCH_BYTES, NONE
from kraftpy.protocol.messages.fetch_snapshot_request import FetchSnapshotRequest
from kraftpy.protocol.messages.fetch_snapshot_response import FetchSnapshotResponse

API_KEY = 59
VERSIONS = (0, 1)
LISTENERS = (api.CONTROLLER,)
REQUEST = FetchSnapshotRequest


async def handle(node: api.Node, request: FetchSnapshotRequest, ctx: api.RequestContext
                 ) -> FetchSnapshotResponse:
    shell = getattr(node, "raft_shell", None)
    if shell is not None:
        response = await shell.raft_request(request, ctx.api_version)
        if response is None:
            raise RuntimeError("the raft quorum stopped before answering")
        return response
    raft = node.raft  # type: ignore[attr-defined]
    error, sid, position = raft.snapshot_to_send(request)
    found = None
    if error == NONE and sid is not None:
        found = node.raft_log.read_snapshot(  # type: ignore[attr-defined]
            SnapshotId(*sid), position, min(max(request.max_bytes, 0), MAX_FETCH_BYTES))
    return raft.fetch_snapshot_response(request, ctx.api_version, error, found,
                                        endpoint(node, ctx))
