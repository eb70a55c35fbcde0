"""Kafka's Raft requests and responses for __cluster_metadata-0 (RaftUtil's singletons).

Built with the generated codecs at their latest fields; the shell encodes at the version the
peer speaks. `partition(...)` pulls out the one partition a valid Raft message carries, or
None when the message names anything else (Kafka answers INVALID_REQUEST).
"""

from __future__ import annotations

import uuid
from typing import Any

from kraftpy.controller.raft.voters import ReplicaKey
from kraftpy.protocol.messages import (
    begin_quorum_epoch_request as bqe_req,
)
from kraftpy.protocol.messages import (
    begin_quorum_epoch_response as bqe_resp,
)
from kraftpy.protocol.messages import (
    end_quorum_epoch_request as eqe_req,
)
from kraftpy.protocol.messages import (
    end_quorum_epoch_response as eqe_resp,
)
from kraftpy.protocol.messages import fetch_request as f_req
from kraftpy.protocol.messages import fetch_response as f_resp
from kraftpy.protocol.messages import fetch_snapshot_request as fs_req
from kraftpy.protocol.messages import fetch_snapshot_response as fs_resp
from kraftpy.protocol.messages import vote_request as v_req
from kraftpy.protocol.messages import vote_response as v_resp
from kraftpy.protocol.uuid import METADATA_TOPIC_ID, ZERO_UUID

TOPIC = "__cluster_metadata"
PARTITION = 0
Endpoint = tuple[str, str, int]  # (listener name, host, port)


def _dir(key: ReplicaKey | None) -> uuid.UUID:
    return ZERO_UUID if key is None or key.directory_id is None else key.directory_id


def directory(value: uuid.UUID) -> uuid.UUID | None:
    return None if value == ZERO_UUID else value


def partition(message: Any, *, fetch: bool = False) -> Any | None:
    """The single __cluster_metadata-0 partition of a Raft message, else None."""
    topics = message.topics if hasattr(message, "topics") else message.responses
    if len(topics) != 1:
        return None
    topic = topics[0]
    if fetch:
        # By id alone (RaftUtil.hasValidTopicPartition): a Fetch below v13 names the topic
        # and leaves its id zero, so Kafka's raft answers it INVALID_REQUEST.
        if topic.topic_id != METADATA_TOPIC_ID:
            return None
    else:
        name = topic.topic_name if hasattr(topic, "topic_name") else topic.name
        if name != TOPIC:
            return None
    if len(topic.partitions) != 1:
        return None
    part = topic.partitions[0]
    index = next(getattr(part, f) for f in ("partition_index", "partition", "index")
                 if hasattr(part, f))
    return part if index == PARTITION else None


# --- Vote ---------------------------------------------------------------------------------
def vote_request(cluster_id: str, epoch: int, local: ReplicaKey, voter: ReplicaKey,
                 last_epoch: int, last_offset: int, pre_vote: bool) -> v_req.VoteRequest:
    return v_req.VoteRequest(cluster_id=cluster_id, voter_id=voter.id, topics=[
        v_req.TopicData(topic_name=TOPIC, partitions=[v_req.PartitionData(
            partition_index=PARTITION, replica_epoch=epoch, replica_id=local.id,
            replica_directory_id=_dir(local), voter_directory_id=_dir(voter),
            last_offset_epoch=last_epoch, last_offset=last_offset, pre_vote=pre_vote)])])


def vote_response(error: int, epoch: int, leader_id: int, granted: bool,
                  leader: tuple[int, str, int] | None, top_error: int = 0
                  ) -> v_resp.VoteResponse:
    if top_error:
        return v_resp.VoteResponse(error_code=top_error)
    return v_resp.VoteResponse(
        topics=[v_resp.TopicData(topic_name=TOPIC, partitions=[v_resp.PartitionData(
            partition_index=PARTITION, error_code=error, leader_id=leader_id,
            leader_epoch=epoch, vote_granted=granted)])],
        node_endpoints=[] if leader is None else [v_resp.NodeEndpoint(
            node_id=leader[0], host=leader[1], port=leader[2])])


# --- BeginQuorumEpoch ---------------------------------------------------------------------
def begin_quorum_epoch_request(cluster_id: str, epoch: int, leader_id: int,
                               endpoints: tuple[Endpoint, ...], voter: ReplicaKey
                               ) -> bqe_req.BeginQuorumEpochRequest:
    return bqe_req.BeginQuorumEpochRequest(
        cluster_id=cluster_id, voter_id=voter.id,
        topics=[bqe_req.TopicData(topic_name=TOPIC, partitions=[bqe_req.PartitionData(
            partition_index=PARTITION, voter_directory_id=_dir(voter), leader_id=leader_id,
            leader_epoch=epoch)])],
        leader_endpoints=[bqe_req.LeaderEndpoint(name=n, host=h, port=p)
                          for n, h, p in endpoints])


def begin_quorum_epoch_response(error: int, epoch: int, leader_id: int,
                                leader: tuple[int, str, int] | None, top_error: int = 0
                                ) -> bqe_resp.BeginQuorumEpochResponse:
    if top_error:
        return bqe_resp.BeginQuorumEpochResponse(error_code=top_error)
    return bqe_resp.BeginQuorumEpochResponse(
        topics=[bqe_resp.TopicData(topic_name=TOPIC, partitions=[bqe_resp.PartitionData(
            partition_index=PARTITION, error_code=error, leader_id=leader_id,
            leader_epoch=epoch)])],
        node_endpoints=[] if leader is None else [bqe_resp.NodeEndpoint(
            node_id=leader[0], host=leader[1], port=leader[2])])


# --- EndQuorumEpoch -----------------------------------------------------------------------
def end_quorum_epoch_request(cluster_id: str, epoch: int, leader_id: int,
                             successors: list[ReplicaKey], endpoints: tuple[Endpoint, ...]
                             ) -> eqe_req.EndQuorumEpochRequest:
    return eqe_req.EndQuorumEpochRequest(
        cluster_id=cluster_id,
        topics=[eqe_req.TopicData(topic_name=TOPIC, partitions=[eqe_req.PartitionData(
            partition_index=PARTITION, leader_id=leader_id, leader_epoch=epoch,
            preferred_successors=[k.id for k in successors],
            preferred_candidates=[eqe_req.ReplicaInfo(
                candidate_id=k.id, candidate_directory_id=_dir(k)) for k in successors])])],
        leader_endpoints=[eqe_req.LeaderEndpoint(name=n, host=h, port=p)
                          for n, h, p in endpoints])


def end_quorum_epoch_response(error: int, epoch: int, leader_id: int,
                              leader: tuple[int, str, int] | None, top_error: int = 0
                              ) -> eqe_resp.EndQuorumEpochResponse:
    if top_error:
        return eqe_resp.EndQuorumEpochResponse(error_code=top_error)
    return eqe_resp.EndQuorumEpochResponse(
        topics=[eqe_resp.TopicData(topic_name=TOPIC, partitions=[eqe_resp.PartitionData(
            partition_index=PARTITION, error_code=error, leader_id=leader_id,
            leader_epoch=epoch)])],
        node_endpoints=[] if leader is None else [eqe_resp.NodeEndpoint(
            node_id=leader[0], host=leader[1], port=leader[2])])


# --- Fetch --------------------------------------------------------------------------------
def fetch_request(cluster_id: str, local: ReplicaKey, epoch: int, fetch_offset: int,
                  last_fetched_epoch: int, high_watermark: int, max_wait_ms: int,
                  max_bytes: int) -> f_req.FetchRequest:
    return f_req.FetchRequest(
        cluster_id=cluster_id,
        replica_state=f_req.ReplicaState(replica_id=local.id, replica_epoch=-1),
        max_wait_ms=max_wait_ms, min_bytes=0, max_bytes=max_bytes,
        topics=[f_req.FetchTopic(topic=TOPIC, topic_id=METADATA_TOPIC_ID,
                                 partitions=[f_req.FetchPartition(
            partition=PARTITION, current_leader_epoch=epoch, fetch_offset=fetch_offset,
            last_fetched_epoch=last_fetched_epoch, log_start_offset=-1,
            partition_max_bytes=0, replica_directory_id=_dir(local),
            high_watermark=high_watermark)])])


def fetch_replica_id(request: f_req.FetchRequest, version: int) -> int:
    return request.replica_state.replica_id if version >= 15 else request.replica_id


def fetch_response(*, error: int, epoch: int, leader_id: int, high_watermark: int,
                   log_start_offset: int, leader: tuple[int, str, int] | None,
                   diverging: tuple[int, int] | None = None,
                   snapshot: tuple[int, int] | None = None,
                   top_error: int = 0) -> f_resp.FetchResponse:
    if top_error:
        return f_resp.FetchResponse(error_code=top_error)
    part = f_resp.PartitionData(
        partition_index=PARTITION, error_code=error, high_watermark=high_watermark,
        log_start_offset=log_start_offset,
        current_leader=f_resp.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=epoch),
        records=b"")
    if diverging is not None:
        part.diverging_epoch = f_resp.EpochEndOffset(epoch=diverging[0],
                                                     end_offset=diverging[1])
    if snapshot is not None:
        part.snapshot_id = f_resp.SnapshotId(end_offset=snapshot[0], epoch=snapshot[1])
    return f_resp.FetchResponse(
        responses=[f_resp.FetchableTopicResponse(topic=TOPIC, topic_id=METADATA_TOPIC_ID,
                                                 partitions=[part])],
        node_endpoints=[] if leader is None else [f_resp.NodeEndpoint(
            node_id=leader[0], host=leader[1], port=leader[2])])


# --- FetchSnapshot ------------------------------------------------------------------------
def fetch_snapshot_request(cluster_id: str, local: ReplicaKey, epoch: int,
                           snapshot_id: tuple[int, int], position: int, max_bytes: int
                           ) -> fs_req.FetchSnapshotRequest:
    return fs_req.FetchSnapshotRequest(
        cluster_id=cluster_id, replica_id=local.id, max_bytes=max_bytes,
        topics=[fs_req.TopicSnapshot(name=TOPIC, partitions=[fs_req.PartitionSnapshot(
            partition=PARTITION, current_leader_epoch=epoch,
            snapshot_id=fs_req.SnapshotId(end_offset=snapshot_id[0], epoch=snapshot_id[1]),
            position=position, replica_directory_id=_dir(local))])])


def fetch_snapshot_response(*, error: int, epoch: int, leader_id: int,
                            leader: tuple[int, str, int] | None, top_error: int = 0,
                            snapshot_id: tuple[int, int] | None = None, position: int = 0
                            ) -> fs_resp.FetchSnapshotResponse:
    if top_error:
        return fs_resp.FetchSnapshotResponse(error_code=top_error)
    part = fs_resp.PartitionSnapshot(
        index=PARTITION, error_code=error, unaligned_records=b"",
        current_leader=fs_resp.LeaderIdAndEpoch(leader_id=leader_id, leader_epoch=epoch))
    if snapshot_id is not None:
        part.snapshot_id = fs_resp.SnapshotId(end_offset=snapshot_id[0], epoch=snapshot_id[1])
        part.position = position
    return fs_resp.FetchSnapshotResponse(
        topics=[fs_resp.TopicSnapshot(name=TOPIC, partitions=[part])],
        node_endpoints=[] if leader is None else [fs_resp.NodeEndpoint(
            node_id=leader[0], host=leader[1], port=leader[2])])


def fill_snapshot_chunk(response: fs_resp.FetchSnapshotResponse,
                        found: tuple[int, bytes] | None) -> None:
    """Complete a FetchSnapshot answer with what the shell read: (file size, bytes from the
    position asked), or None when the snapshot is not there (SNAPSHOT_NOT_FOUND); a position
    past the end is POSITION_OUT_OF_RANGE, as Kafka answers."""
    part = response.topics[0].partitions[0]
    size, data = found if found is not None else (0, b"")
    if found is None or not 0 <= part.position < size:
        part.error_code = 98 if found is None else 99  # SNAPSHOT_NOT_FOUND, POSITION_OUT_OF_RANGE
        part.snapshot_id = fs_resp.SnapshotId()
        part.position = 0
        return
    part.size = size
    part.unaligned_records = data
