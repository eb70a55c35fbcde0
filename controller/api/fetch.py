"""Fetch (key 1): a voter or an observer (a broker, a controller joining) fetching
__cluster_metadata-0 from the Raft leader.

Versions served: 4-18. Listeners: CONTROLLER (where a Kafka controller serves raft Fetch).
Behaviour: the Raft core decides (`Quorum.raft_request`, KafkaRaftClient's checks in its
order): cluster id and topic checks, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH with
CurrentLeader and NodeEndpoints (how a broker finds the leader), DivergingEpoch, SnapshotId,
whole batches from the fetch offset (observers below the high watermark), HighWatermark and
LogStartOffset; a voter's fetch moves the high watermark. A fetch that finds nothing new is
parked until there is or MaxWaitMs runs out. CLUSTER_ACTION when an authorizer is on.
Skipped: fetch sessions (raft fetchers do not use them), partitions other than the metadata
log (INVALID_REQUEST, as Kafka's raft client answers).
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.controller.api.raft_rpc import to_raft
from kraftpy.protocol.messages.fetch_request import FetchRequest
from kraftpy.protocol.messages.fetch_response import FetchResponse

API_KEY = 1
VERSIONS = (4, 18)
LISTENERS = (api.CONTROLLER,)
REQUEST = FetchRequest


async def handle(node: api.Node, request: FetchRequest, ctx: api.RequestContext
                 ) -> FetchResponse:
    return await to_raft(node, request, ctx)  # type: ignore[no-any-return]
