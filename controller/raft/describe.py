"""DescribeQuorum (55, v0-2) as a Raft leader answers it (KafkaRaftClient.handleDescribeQuorumRequest).

The answer is the leader's own view of the replicas (`roles.Leader.replicas` and `.observers`,
kept by the core as fetches come in), never a guess: a voter's log end offset is the offset it
last fetched from, its timestamps those of that fetch. The leader reports itself as fetched and
caught up now, at its log end offset. Observers (brokers, controllers
outside the voter set) silent for `OBSERVER_SESSION_TIMEOUT_MS` are dropped before the answer, as
LeaderState.clearInactiveObservers does. From v2 on each voter's directory id and a Node with
its listeners (from the voter set) are filled in.

A node that does not lead answers NOT_LEADER_OR_FOLLOWER in the partition; a request naming
anything but `__cluster_metadata-0` gets UNKNOWN_TOPIC_OR_PARTITION for every partition it
names. Both with Errors' messages, as Kafka's helpers build them.
"""

from __future__ import annotations

from typing import Any

from kraftpy.controller.raft.roles import Leader, ReplicaProgress
from kraftpy.controller.raft.voters import VoterSet
from kraftpy.protocol.messages.describe_quorum_response import (
    DescribeQuorumResponse,
    Listener,
    Node,
    PartitionData,
    ReplicaState,
    TopicData,
)
from kraftpy.protocol.uuid import ZERO_UUID

TOPIC = "__cluster_metadata"
PARTITION = 0
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
# LeaderState.OBSERVER_SESSION_TIMEOUT_MS: an observer silent this long leaves the answer.
OBSERVER_SESSION_TIMEOUT_MS = 300_000
MESSAGES = {
    UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    NOT_LEADER_OR_FOLLOWER: "For requests intended only for the leader, this error indicates "
    "that the broker is not the current leader. For requests intended for any replica, this "
    "error indicates that the broker is not a replica of the topic partition.",
}


def names_metadata_partition(request: Any) -> bool:
    """Kafka's hasValidTopicPartition: exactly one topic, ours, with exactly our partition."""
    topics = request.topics
    return (len(topics) == 1 and topics[0].topic_name == TOPIC
            and len(topics[0].partitions) == 1
            and topics[0].partitions[0].partition_index == PARTITION)


def unknown_partitions(request: Any) -> DescribeQuorumResponse:
    """DescribeQuorumRequest.getPartitionLevelErrorResponse: every partition asked for."""
    return DescribeQuorumResponse(topics=[
        TopicData(topic_name=t.topic_name, partitions=[
            PartitionData(partition_index=p.partition_index,
                          error_code=UNKNOWN_TOPIC_OR_PARTITION,
                          error_message=MESSAGES[UNKNOWN_TOPIC_OR_PARTITION])
            for p in t.partitions])
        for t in request.topics])


def not_leader() -> DescribeQuorumResponse:
    """DescribeQuorumResponse.singletonErrorResponse(NOT_LEADER_OR_FOLLOWER)."""
    return DescribeQuorumResponse(topics=[TopicData(topic_name=TOPIC, partitions=[
        PartitionData(partition_index=PARTITION, error_code=NOT_LEADER_OR_FOLLOWER,
                      error_message=MESSAGES[NOT_LEADER_OR_FOLLOWER])])])


def drop_inactive_observers(s: Leader, now_ms: int) -> None:
    for key, progress in list(s.observers.items()):
        if now_ms - progress.last_fetch_ms >= OBSERVER_SESSION_TIMEOUT_MS:
            del s.observers[key]


def leader_answer(s: Leader, voters: VoterSet, log_end: int, version: int, now_ms: int
                  ) -> DescribeQuorumResponse:
    """RaftUtil.singletonDescribeQuorumResponse from the leader's replica states. The
    leader's own end offset is its log's: Kafka's leader flushes as it appends, so the two
    are one there; ours flushes in the background and a follower may already have fetched
    past the flushed end (a lag of -1 to the tool if the flushed end were shown)."""
    drop_inactive_observers(s, now_ms)
    leader_id = s.local.id
    voter_states = [s.replicas[i] for i in sorted(s.replicas) if i in voters.voters]
    observers = sorted(s.observers.values(),
                       key=lambda p: (p.key.id, str(p.key.directory_id or ZERO_UUID)))

    def state(p: ReplicaProgress) -> ReplicaState:
        here = p.key.id == leader_id
        end = log_end if here else p.end_offset
        out = ReplicaState(
            replica_id=p.key.id,
            log_end_offset=-1 if end is None else end,
            last_fetch_timestamp=now_ms if here else p.last_fetch_ms,
            last_caught_up_timestamp=now_ms if here else p.last_caught_up_ms)
        if version >= 2:
            out.replica_directory_id = p.key.directory_id or ZERO_UUID
        return out

    partition = PartitionData(
        partition_index=PARTITION, error_code=NONE, leader_id=leader_id,
        leader_epoch=s.epoch,
        high_watermark=-1 if s.high_watermark is None else s.high_watermark,
        current_voters=[state(p) for p in voter_states],
        observers=[state(p) for p in observers])
    response = DescribeQuorumResponse(topics=[TopicData(topic_name=TOPIC,
                                                        partitions=[partition])])
    if version >= 2:
        response.nodes = [Node(node_id=p.key.id, listeners=[
            Listener(name=name, host=host, port=port)
            for name, host, port in voters.voters[p.key.id].listeners])
            for p in voter_states]
    return response
