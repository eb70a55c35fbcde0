"""The raft leader's answers to observers: Fetch and FetchSnapshot of __cluster_metadata-0.

Sans-IO, as KafkaRaftClient decides them (handleFetchRequest, tryCompleteFetchRequest,
handleFetchSnapshotRequest): the request and a `LogState` in, a `FetchPlan` out, whose
records the shell reads from the log; the shell also parks a plan that `may_wait` until the
high watermark moves or the fetcher's MaxWaitMs runs out, then plans again. This node leads
alone (one voter), so the high watermark is what is durable on its disk, and only records
below it are served: a fetcher never sees a record that could still be lost.

Brokers find the leader through this: their first Fetch carries epoch 0 and gets
FENCED_LEADER_EPOCH with CurrentLeader and (v17+) NodeEndpoints. Every fetcher's offset is
kept (`replicas`) for DescribeQuorum's observers.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kraftpy.controller.raft.log_state import (  # noqa: F401 (re-exported)
    BOOTSTRAP_SNAPSHOT,
    LogState,
    end_offset_for_epoch,
    validate_offset_and_epoch,
)
from kraftpy.protocol.messages.describe_quorum_response import DescribeQuorumResponse
from kraftpy.protocol.messages.describe_quorum_response import (
    ReplicaState as DescribeQuorumReplica,
)
from kraftpy.protocol.messages.fetch_request import FetchRequest
from kraftpy.protocol.messages.fetch_response import (
    EpochEndOffset,
    FetchableTopicResponse,
    FetchResponse,
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionData,
    SnapshotId,
)
from kraftpy.protocol.messages.fetch_snapshot_request import FetchSnapshotRequest
from kraftpy.protocol.messages.fetch_snapshot_response import (
    FetchSnapshotResponse,
    PartitionSnapshot,
    TopicSnapshot,
)
from kraftpy.protocol.messages.fetch_snapshot_response import (
    LeaderIdAndEpoch as SnapshotLeader,
)
from kraftpy.protocol.messages.fetch_snapshot_response import (
    NodeEndpoint as SnapshotNodeEndpoint,
)
from kraftpy.protocol.messages.fetch_snapshot_response import (
    SnapshotId as SnapshotIdField,
)

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = uuid.UUID(int=1)  # Kafka's Uuid.METADATA_TOPIC_ID, AAAAAAAAAAAAAAAAAAAAAQ
METADATA_PARTITION = 0
# KafkaRaftClient's MAX_FETCH_SIZE_BYTES: what the leader reads at most per Fetch.
MAX_FETCH_BYTES = 8 * 1024 * 1024

NONE = 0
UNKNOWN_SERVER_ERROR = -1
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
BROKER_NOT_AVAILABLE = 8
INVALID_REQUEST = 42
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
SNAPSHOT_NOT_FOUND = 98
POSITION_OUT_OF_RANGE = 99
INCONSISTENT_CLUSTER_ID = 104


# LeaderState.OBSERVER_SESSION_TIMEOUT_MS: an observer silent this long leaves DescribeQuorum.
OBSERVER_SESSION_TIMEOUT_MS = 300_000


@dataclass
class ReplicaState:
    """A fetcher as the leader last saw it (DescribeQuorum's ReplicaState)."""

    replica_id: int
    directory_id: uuid.UUID
    log_end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    # The leader's log end at this fetcher's previous fetch (Kafka's lastFetchLeaderLogEndOffset).
    last_fetch_leader_end: int = -1


@dataclass
class FetchPlan:
    """How to answer one Fetch: an error, a divergence, a snapshot, or records from an offset."""

    top_error: int = NONE
    error: int = NONE
    high_watermark: int = -1
    read_from: int | None = None
    diverging: tuple[int, int] | None = None  # (epoch, end offset)
    snapshot: tuple[int, int] | None = None  # (end offset, epoch)
    fetcher_high_watermark: int = 2**63 - 1

    def answer_now(self, max_wait_ms: int) -> bool:
        """Whether the answer goes at once even without records (Kafka's six reasons but the
        records, which only the read knows)."""
        return (self.top_error != NONE or self.error != NONE or max_wait_ms == 0
                or self.diverging is not None or self.snapshot is not None
                or self.fetcher_high_watermark < self.high_watermark)


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int


class RaftLeader:
    """This node leading __cluster_metadata-0 at `epoch`, alone in its voter set."""

    def __init__(self, *, cluster_id: str, node_id: int, epoch: int) -> None:
        self.cluster_id = cluster_id
        self.node_id = node_id
        self.epoch = epoch
        self.replicas: dict[int, ReplicaState] = {}

    # --- Fetch ---------------------------------------------------------------------------------
    def plan_fetch(self, request: FetchRequest, version: int, log: LogState, now_ms: int
                   ) -> FetchPlan:
        if request.cluster_id is not None and request.cluster_id != self.cluster_id:
            return FetchPlan(top_error=INCONSISTENT_CLUSTER_ID)
        if not _one_metadata_partition(request, version):
            return FetchPlan(top_error=INVALID_REQUEST)
        part = request.topics[0].partitions[0]
        if (request.max_wait_ms < 0 or part.fetch_offset < 0 or part.last_fetched_epoch < 0
                or part.last_fetched_epoch > part.current_leader_epoch):
            return FetchPlan(error=INVALID_REQUEST)
        error = self._leader_only(part.current_leader_epoch)
        if error != NONE:
            return FetchPlan(error=error)
        hwm = log.high_watermark
        plan = FetchPlan(high_watermark=hwm, fetcher_high_watermark=(
            part.high_watermark if version >= 18 else 2**63 - 1))
        latest = log.snapshots[-1] if log.snapshots else None
        if part.fetch_offset == 0 and latest is not None and latest != BOOTSTRAP_SNAPSHOT:
            plan.snapshot = latest
            return plan
        kind, where = validate_offset_and_epoch(log, part.fetch_offset, part.last_fetched_epoch)
        if kind == "snapshot":
            plan.snapshot = where
        elif kind == "diverging":
            plan.diverging = where
        else:
            plan.read_from = part.fetch_offset
            self._saw(_replica_id(request, version), getattr(part, "replica_directory_id", None),
                      part.fetch_offset, hwm, now_ms)
        return plan

    def fetch_response(self, request: FetchRequest, version: int, plan: FetchPlan,
                       records: bytes, log_start_offset: int,
                       endpoint: Endpoint | None) -> FetchResponse:
        """The answer to `request` by `plan`, with the records read for it."""
        partition = PartitionData(
            partition_index=METADATA_PARTITION, error_code=plan.error,
            high_watermark=plan.high_watermark, log_start_offset=log_start_offset,
            current_leader=LeaderIdAndEpoch(leader_id=self.node_id, leader_epoch=self.epoch),
            records=records)
        if plan.diverging is not None:
            partition.diverging_epoch = EpochEndOffset(epoch=plan.diverging[0],
                                                       end_offset=plan.diverging[1])
        if plan.snapshot is not None:
            partition.snapshot_id = SnapshotId(end_offset=plan.snapshot[0],
                                               epoch=plan.snapshot[1])
        topic = (FetchableTopicResponse(topic_id=METADATA_TOPIC_ID, partitions=[partition])
                 if version >= 13 else
                 FetchableTopicResponse(topic=METADATA_TOPIC, partitions=[partition]))
        response = FetchResponse(error_code=plan.top_error, responses=[topic])
        if plan.top_error != NONE:
            # KafkaRaftClient answers a bad cluster id or partition with the top-level error
            # alone.
            response.responses = []
        elif version >= 17 and endpoint is not None:
            response.node_endpoints = [NodeEndpoint(node_id=self.node_id, host=endpoint.host,
                                                    port=endpoint.port)]
        return response

    # --- FetchSnapshot -------------------------------------------------------------------------
    def snapshot_to_send(self, request: FetchSnapshotRequest
                         ) -> tuple[int, tuple[int, int] | None, int]:
        """(error, the snapshot id asked for, the position) before the file is read."""
        if request.cluster_id is not None and request.cluster_id != self.cluster_id:
            return INCONSISTENT_CLUSTER_ID, None, 0
        topics = request.topics
        if len(topics) != 1 or len(topics[0].partitions) != 1:
            return INVALID_REQUEST, None, 0
        part = topics[0].partitions[0]
        if topics[0].name != METADATA_TOPIC or part.partition != METADATA_PARTITION:
            return UNKNOWN_TOPIC_OR_PARTITION, None, 0
        error = self._leader_only(part.current_leader_epoch)
        if error != NONE:
            return error, None, 0
        sid = (part.snapshot_id.end_offset, part.snapshot_id.epoch)
        if sid == BOOTSTRAP_SNAPSHOT:
            return SNAPSHOT_NOT_FOUND, sid, part.position
        return NONE, sid, part.position

    def fetch_snapshot_response(self, request: FetchSnapshotRequest, version: int,
                                error: int, found: tuple[int, bytes] | None,
                                endpoint: Endpoint | None) -> FetchSnapshotResponse:
        """The answer: `found` is (file size, bytes from the position), None for no file."""
        if error in (INCONSISTENT_CLUSTER_ID, INVALID_REQUEST):
            return FetchSnapshotResponse(error_code=error)
        topic = request.topics[0]
        part = topic.partitions[0]
        if error == NONE and found is None:
            error = SNAPSHOT_NOT_FOUND
        size, data = found if found is not None else (0, b"")
        if error == NONE and not 0 <= part.position < size:
            error = POSITION_OUT_OF_RANGE
        out = PartitionSnapshot(index=part.partition, error_code=error, unaligned_records=b"",
                                current_leader=SnapshotLeader(leader_id=self.node_id,
                                                              leader_epoch=self.epoch))
        if error == NONE:
            out.snapshot_id = SnapshotIdField(end_offset=part.snapshot_id.end_offset,
                                              epoch=part.snapshot_id.epoch)
            out.size = size
            out.position = part.position
            out.unaligned_records = data
        response = FetchSnapshotResponse(topics=[TopicSnapshot(name=topic.name,
                                                               partitions=[out])])
        if version >= 1 and endpoint is not None:
            response.node_endpoints = [SnapshotNodeEndpoint(
                node_id=self.node_id, host=endpoint.host, port=endpoint.port)]
        return response

    # --- state ---------------------------------------------------------------------------------
    def _leader_only(self, request_epoch: int) -> int:
        if request_epoch < self.epoch:
            return FENCED_LEADER_EPOCH
        if request_epoch > self.epoch:
            return UNKNOWN_LEADER_EPOCH
        return NONE

    def _saw(self, replica_id: int, directory_id: uuid.UUID | None, fetch_offset: int,
             high_watermark: int, now_ms: int) -> None:
        if replica_id < 0:
            return
        state = self.replicas.get(replica_id)
        if state is None:
            state = self.replicas[replica_id] = ReplicaState(
                replica_id, directory_id or uuid.UUID(int=0))
        # LeaderState.updateFollowerState: caught up now if at the leader's end; or caught up
        # as of the previous fetch if it reached the end the leader had then.
        if fetch_offset >= high_watermark:
            state.last_caught_up_ms = max(state.last_caught_up_ms, now_ms)
        elif state.last_fetch_leader_end > 0 and fetch_offset >= state.last_fetch_leader_end:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.last_fetch_leader_end = high_watermark
        state.log_end_offset = fetch_offset
        state.last_fetch_ms = max(state.last_fetch_ms, now_ms)

    def observers(self, now_ms: int) -> list[ReplicaState]:
        """The fetchers seen within the observer session timeout, by id (others are dropped)."""
        for replica_id, state in list(self.replicas.items()):
            if now_ms - state.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS:
                del self.replicas[replica_id]
        return [self.replicas[k] for k in sorted(self.replicas)]

    def add_observers(self, response: DescribeQuorumResponse, version: int, now_ms: int) -> None:
        """Fill DescribeQuorum's observers: the brokers fetching this log (the controller, which
        answers the rest, knows nothing of raft fetchers)."""
        for topic in response.topics:
            for partition in topic.partitions:
                if topic.topic_name != METADATA_TOPIC or partition.partition_index != 0 \
                        or partition.error_code != NONE:
                    continue
                partition.observers = [DescribeQuorumReplica(
                    replica_id=o.replica_id,
                    replica_directory_id=o.directory_id if version >= 2 else uuid.UUID(int=0),
                    log_end_offset=o.log_end_offset, last_fetch_timestamp=o.last_fetch_ms,
                    last_caught_up_timestamp=o.last_caught_up_ms)
                    for o in self.observers(now_ms)]


def _replica_id(request: FetchRequest, version: int) -> int:
    return request.replica_state.replica_id if version >= 15 else request.replica_id


def _one_metadata_partition(request: FetchRequest, version: int) -> bool:
    topics = request.topics
    if len(topics) != 1 or len(topics[0].partitions) != 1:
        return False
    topic = topics[0]
    named = topic.topic_id == METADATA_TOPIC_ID if version >= 13 else topic.topic == METADATA_TOPIC
    return named and topic.partitions[0].partition == METADATA_PARTITION
