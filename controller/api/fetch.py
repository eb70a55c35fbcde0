"""Fetch (key 1), as the raft leader answers observers fetching __cluster_metadata-0.

Versions served: 4-18. Listeners: CONTROLLER (where a Kafka controller serves raft Fetch).
Behaviour: KafkaRaftClient's leader side (`controller/raft/leader.py` decides): cluster id and
topic checks, FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH with CurrentLeader and NodeEndpoints
(how a broker finds the leader), DivergingEpoch, SnapshotId, whole batches from the fetch
offset below the high watermark (what is durable), HighWatermark and LogStartOffset. A fetch
that finds nothing new is parked until the high watermark moves or MaxWaitMs runs out (each
parked fetch is one sleeping task: nothing while idle); it is answered at once when the
fetcher's HighWatermark (v18) is behind. CLUSTER_ACTION when an authorizer is on. In a quorum
of several voters the Raft core answers instead (`RaftQuorum.raft_request`): voters' fetches
move its high watermark, and it serves the log up to its end to them.
Skipped: fetch sessions (raft fetchers do not use them), partitions other than the metadata
log (INVALID_REQUEST, as Kafka's raft client answers).
"""

from __future__ import annotations

import trio
from kraftpy.controller import api
from kraftpy.controller.raft.leader import MAX_FETCH_BYTES, Endpoint
from kraftpy.protocol.messages.fetch_request import FetchRequest
from kraftpy.protocol.messages.fetch_response import FetchResponse

API_KEY = 1
VERSIONS = (4, 18)
LISTENERS = (api.CONTROLLER,)
REQUEST = FetchRequest


def endpoint(node: api.Node, ctx: api.RequestContext) -> Endpoint | None:
    """Where fetchers reach this node on the listener the request came in on."""
    try:
        ep = node.config.advertised(ctx.listener)
    except KeyError:
        return None
    return Endpoint(ep.host, ep.port)


async def handle(node: api.Node, request: FetchRequest, ctx: api.RequestContext
                 ) -> FetchResponse:
    shell = getattr(node, "raft_shell", None)
    if shell is not None:
        response = await shell.raft_request(request, ctx.api_version)
        if response is None:
            raise RuntimeError("the raft quorum stopped before answering")
        return response
    raft = node.raft  # type: ignore[attr-defined]
    version = ctx.api_version
    max_bytes = min(max(request.max_bytes, 1), MAX_FETCH_BYTES)
    waited = False
    for _ in range(4):  # a plan is made again only when a snapshot trimmed the log meanwhile
        view = node.raft_log_state()  # type: ignore[attr-defined]
        plan = raft.plan_fetch(request, version, view, node.clock_ms())  # type: ignore[attr-defined]
        records = b""
        if plan.read_from is not None:
            read = node.raft_log.read(plan.read_from, view.high_watermark, max_bytes)  # type: ignore[attr-defined]
            if read is None:  # trimmed by a snapshot since the plan: plan again
                continue
            records = read
        if records or waited or plan.answer_now(request.max_wait_ms):
            return raft.fetch_response(request, version, plan, records,
                                       node.raft_log.log_start_offset,  # type: ignore[attr-defined]
                                       endpoint(node, ctx))
        waited = True
        with trio.move_on_after(request.max_wait_ms / 1000):
            await node.wait_for_high_watermark(view.high_watermark)  # type: ignore[attr-defined]
    raise RuntimeError("the log kept moving below the fetch offset")
