"""A lone leader's answers to observers' Fetch and FetchSnapshot, as KafkaRaftClient gives them.

The Raft core (`RaftNode`) leads alone (one voter) and brokers fetch __cluster_metadata-0 from
it: Kafka's checks in its order (cluster id, topic and partition, the request's fields, the
leader epoch: FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH with CurrentLeader and, from v17,
NodeEndpoints), then DivergingEpoch, SnapshotId for an empty fetcher and one below the log
start, records from the fetch offset, the fetchers kept for DescribeQuorum. Every answer is
encoded at the version asked for, and its bytes decode and encode again to themselves.
"""

from __future__ import annotations

import random
import uuid

import pytest
from kraftpy.controller.raft import actions as a
from kraftpy.controller.raft import messages as m
from kraftpy.controller.raft.config import RaftConfig
from kraftpy.controller.raft.core import RaftNode
from kraftpy.controller.raft.log_state import RaftLog
from kraftpy.controller.raft.quorum_state import ElectionState
from kraftpy.controller.raft.roles import Role
from kraftpy.controller.raft.voters import VoterSet
from kraftpy.protocol.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from kraftpy.protocol.messages.fetch_request import FetchRequest
from kraftpy.protocol.messages.fetch_response import FetchResponse
from kraftpy.protocol.messages.fetch_snapshot_request import (
    FetchSnapshotRequest,
    PartitionSnapshot,
    SnapshotId,
    TopicSnapshot,
)
from kraftpy.protocol.messages.fetch_snapshot_response import FetchSnapshotResponse
from support.raft import CLUSTER, fetch

NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_REQUEST = 42
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
SNAPSHOT_NOT_FOUND = 98
POSITION_OUT_OF_RANGE = 99
INCONSISTENT_CLUSTER_ID = 104
HOST, PORT = "127.0.0.1", 9093


def lone_leader(log: RaftLog, end: int, *, epoch: int = 3, now: float = 0) -> RaftNode:
    """Node 1, the only voter, restarted on `log` after epoch `epoch - 1`: it elects itself in
    `epoch`, writes its LeaderChange at the log end, then records up to offset `end`, all on
    disk (the high watermark is `end`)."""
    n = RaftNode(config=RaftConfig(), node_id=1, directory_id=uuid.UUID(int=1),
                 cluster_id=CLUSTER, voters=VoterSet.static({1: (HOST, PORT)}), log=log,
                 election=ElectionState(epoch=epoch - 1), now_ms=now, rng=random.Random(1),
                 endpoints=(("CONTROLLER", HOST, PORT),))
    n._take()
    assert n.role is Role.LEADER and n.epoch == epoch
    n.on_flushed(log.end_offset, now)
    if end > log.end_offset:
        n.append([b"r"] * (end - log.end_offset), now)
        n.poll(now + n.config.append_linger_ms)
        n.on_flushed(end, now + n.config.append_linger_ms)
    assert n.high_watermark == n.log.end_offset == end
    return n


def leader() -> RaftNode:
    """Leader in epoch 3 of a log of 40 records: epoch 1 wrote 0-9, epoch 3 from 10 on."""
    return lone_leader(RaftLog(end_offset=10, flushed_offset=10, epochs=[(1, 0)],
                               high_watermark=10), 40)


def answer(n: RaftNode, request: FetchRequest, version: int = 18, now: float = 1000
           ) -> a.Respond | None:
    """The Respond to `request` (None: parked until new records or MaxWaitMs)."""
    responds = [x for x in n.handle_request("t", request, version, now)
                if isinstance(x, a.Respond)]
    if not responds:
        return None
    (respond,) = responds
    data = respond.response.encode(version)
    assert FetchResponse.decode(data, version).encode(version) == data
    return respond


def partition(respond: a.Respond | None):
    assert respond is not None
    return respond.response.responses[0].partitions[0]


def test_a_first_fetch_at_epoch_0_learns_the_leader_and_its_address() -> None:
    respond = answer(leader(), fetch(0, epoch=0, last_epoch=0))
    part = partition(respond)
    assert part.error_code == FENCED_LEADER_EPOCH and respond.read_from is None
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (1, 3)
    # buildEmptyFetchResponse: no high watermark in an error answer, the log start as ever.
    assert (part.high_watermark, part.log_start_offset, part.records) == (-1, 0, b"")
    assert [(e.node_id, e.host, e.port) for e in respond.response.node_endpoints] == [
        (1, HOST, PORT)]
    # Before v17 the address is not in the answer (the fetcher knows its voters).
    v16 = answer(leader(), fetch(0, epoch=0, last_epoch=0), version=16)
    assert partition(v16).error_code == FENCED_LEADER_EPOCH
    assert v16.response.node_endpoints == []


def test_a_fetch_from_a_later_epoch_is_unknown_leader_epoch() -> None:
    part = partition(answer(leader(), fetch(0, epoch=4, last_epoch=0)))
    assert (part.error_code, part.high_watermark) == (UNKNOWN_LEADER_EPOCH, -1)
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (1, 3)


@pytest.mark.parametrize("request_, top, part", [
    (fetch(0, cluster="other"), INCONSISTENT_CLUSTER_ID, None),
    (fetch(0, topic_id=uuid.UUID(int=5)), INVALID_REQUEST, None),
    (fetch(-1), NONE, INVALID_REQUEST),
    (fetch(5, last_epoch=4), NONE, INVALID_REQUEST),  # last fetched epoch above the leader's
    (fetch(5, last_epoch=-1), NONE, INVALID_REQUEST),
    (fetch(5, max_wait=-1), NONE, INVALID_REQUEST),
])
def test_bad_fetches(request_: FetchRequest, top: int, part: int | None) -> None:
    respond = answer(leader(), request_)
    assert respond is not None and respond.read_from is None
    response = respond.response
    assert response.error_code == top
    if part is None:
        # KafkaRaftClient answers a bad cluster id or partition with the top-level error alone.
        assert response.responses == [] and response.node_endpoints == []
    else:
        answered = response.responses[0].partitions[0]
        assert (answered.error_code, answered.high_watermark) == (part, -1)
        assert answered.current_leader.leader_id == 1


def test_a_fetch_by_topic_name_below_v13_is_an_invalid_request() -> None:
    """Before v13 a Fetch names topics, not ids; Kafka's raft leader checks the id alone
    (RaftUtil.hasValidTopicPartition), which such a request leaves at zero."""
    request = fetch(0, topic_id=uuid.UUID(int=0))
    request.topics[0].topic = "__cluster_metadata"
    respond = answer(leader(), request, version=12)
    assert respond is not None
    assert (respond.response.error_code, respond.response.responses) == (INVALID_REQUEST, [])


def observers(n: RaftNode, now: float) -> list[tuple[int, int, int, int]]:
    """DescribeQuorum's observers: (id, log end offset, last fetch, last caught up)."""
    request = DescribeQuorumRequest(topics=[TopicData(topic_name="__cluster_metadata",
                                                      partitions=[PartitionData()])])
    part = n.describe_quorum(request, 2, now).topics[0].partitions[0]
    return [(o.replica_id, o.log_end_offset, o.last_fetch_timestamp,
             o.last_caught_up_timestamp) for o in part.observers]


def test_a_valid_fetch_reads_from_its_offset_and_tracks_the_fetcher() -> None:
    n = leader()
    respond = answer(n, fetch(12, hwm=40))
    # There are records from 12 on, so the answer goes at once; the shell reads them.
    assert respond is not None and respond.read_from == 12
    part = partition(respond)
    assert (part.high_watermark, part.log_start_offset, part.error_code) == (40, 0, NONE)
    assert part.diverging_epoch.epoch == -1 and part.snapshot_id.epoch == -1
    assert observers(n, 1000) == [(7, 12, 1000, -1)]
    answer(n, fetch(40), now=1100)
    assert observers(n, 1100) == [(7, 40, 1100, 1100)]
    # A fetcher whose high watermark is behind the leader's is answered at once (KIP-1166).
    assert answer(n, fetch(40, hwm=30)) is not None
    # ... but only from v18 on, where the field is on the wire.
    assert answer(n, fetch(40, hwm=30), version=17) is None
    # A caught-up fetcher waits for new records (MaxWaitMs), unless it asked not to wait.
    assert answer(n, fetch(40, hwm=40)) is None
    assert answer(n, fetch(40, hwm=40, max_wait=0)) is not None


def responds(actions: list) -> list[a.Respond]:
    return [x for x in actions if isinstance(x, a.Respond)]


def test_a_parked_fetch_is_answered_by_new_records_a_new_high_watermark_or_max_wait() -> None:
    n = leader()
    assert answer(n, fetch(40, hwm=40, max_wait=500), now=1000) is None
    # New records at the leader complete it (maybeAppendBatches), before they are committed.
    n.append([b"new"], 1010)
    (respond,) = responds(n.poll(1010 + n.config.append_linger_ms))
    assert respond.read_from == 40 and partition(respond).high_watermark == 40
    # The fetcher has them; its next fetch waits until the high watermark moves past them.
    assert answer(n, fetch(41, hwm=40, max_wait=500), now=1040) is None
    (respond,) = responds(n.on_flushed(41, 1050))
    assert respond.read_from == 41 and partition(respond).high_watermark == 41
    # Nothing new: the answer goes empty when MaxWaitMs runs out, not before.
    assert answer(n, fetch(41, hwm=41, max_wait=500), now=2000) is None
    assert responds(n.poll(2499)) == []
    (respond,) = responds(n.poll(2500))
    assert respond.read_from == 41 and partition(respond).error_code == NONE


def test_a_fetcher_past_the_end_of_its_epoch_diverges() -> None:
    # Epoch 1 ended at offset 10; a fetcher at 12 whose last record is from epoch 1 (or from
    # epoch 2, which this leader never had) must truncate to 10.
    for last in (1, 2):
        respond = answer(leader(), fetch(12, last_epoch=last))
        assert respond is not None and respond.read_from is None
        diverging = partition(respond).diverging_epoch
        assert (diverging.epoch, diverging.end_offset) == (1, 10)
        assert partition(respond).high_watermark == 40
    respond = answer(leader(), fetch(9, last_epoch=1))
    assert respond is not None and respond.read_from == 9


def snapshotted() -> RaftNode:
    """Retention kept an older snapshot at the log start (25, epoch 2) beside the newest
    (30, epoch 3); epoch 2 began at 20, this leader's epoch 3 at 28."""
    n = lone_leader(RaftLog(start_offset=25, end_offset=28, flushed_offset=28,
                            epochs=[(2, 20)], snapshots=[(25, 2)], high_watermark=28), 40)
    n.on_snapshot((30, 3), delete_before=False, now_ms=1)
    assert n.log.epochs == [(2, 20), (3, 28)] and n.log.snapshots == [(25, 2), (30, 3)]
    return n


def test_snapshots_are_sent_for_an_empty_fetcher_and_one_below_the_log_start() -> None:
    # Empty; below the log start; at the start with another epoch; an epoch before the oldest.
    for offset, last in ((0, 0), (5, 1), (25, 1), (26, 1)):
        respond = answer(snapshotted(), fetch(offset, last_epoch=last))
        assert respond is not None and respond.read_from is None
        part = partition(respond)
        assert (part.snapshot_id.end_offset, part.snapshot_id.epoch) == (30, 3)
        assert (part.log_start_offset, part.high_watermark) == (25, 40)
    respond = answer(snapshotted(), fetch(31, last_epoch=3))
    assert respond is not None and respond.read_from == 31


def snapshot_request(end: int, epoch: int, position: int, *, leader_epoch: int = 3,
                     name: str = "__cluster_metadata", index: int = 0
                     ) -> FetchSnapshotRequest:
    return FetchSnapshotRequest(cluster_id=CLUSTER, replica_id=7, max_bytes=100, topics=[
        TopicSnapshot(name=name, partitions=[PartitionSnapshot(
            partition=index, current_leader_epoch=leader_epoch,
            snapshot_id=SnapshotId(end_offset=end, epoch=epoch), position=position)])])


def snapshot_answer(request: FetchSnapshotRequest, found: tuple[int, bytes] | None = None,
                    version: int = 1) -> FetchSnapshotResponse:
    """The core's answer, completed as the shell does when it asks for the file's bytes
    (`found`: the file's size and the bytes from the position, None for no file)."""
    (respond,) = [x for x in snapshotted().handle_request("t", request, version, 1000)
                  if isinstance(x, a.Respond)]
    response = respond.response
    if respond.snapshot is not None:
        sid, position, max_bytes = respond.snapshot
        part = request.topics[0].partitions[0]
        assert (sid, position) == ((part.snapshot_id.end_offset, part.snapshot_id.epoch),
                                   part.position)
        assert max_bytes == request.max_bytes
        m.fill_snapshot_chunk(response, found)
    data = response.encode(version)
    assert FetchSnapshotResponse.decode(data, version).encode(version) == data
    return response


def test_fetch_snapshot_answers() -> None:
    response = snapshot_answer(snapshot_request(30, 3, 10), (250, b"x" * 100))
    ok = response.topics[0].partitions[0]
    assert (ok.error_code, ok.size, ok.position, ok.unaligned_records) == (0, 250, 10, b"x" * 100)
    assert (ok.snapshot_id.end_offset, ok.snapshot_id.epoch) == (30, 3)
    assert (ok.current_leader.leader_id, ok.current_leader.leader_epoch) == (1, 3)
    assert [(e.node_id, e.host, e.port) for e in response.node_endpoints] == [(1, HOST, PORT)]
    assert snapshot_answer(snapshot_request(30, 3, 10), (250, b"x" * 100),
                           version=0).node_endpoints == []
    for request, found, code in (
            (snapshot_request(0, 0, 0), None, SNAPSHOT_NOT_FOUND),  # the bootstrap snapshot
            (snapshot_request(20, 2, 0), None, SNAPSHOT_NOT_FOUND),  # not on disk
            (snapshot_request(30, 3, 250), (250, b""), POSITION_OUT_OF_RANGE),
            (snapshot_request(30, 3, -1), (250, b""), POSITION_OUT_OF_RANGE),
            (snapshot_request(30, 3, 0, leader_epoch=2), None, FENCED_LEADER_EPOCH),
            (snapshot_request(30, 3, 0, leader_epoch=4), None, UNKNOWN_LEADER_EPOCH)):
        response = snapshot_answer(request, found)
        part = response.topics[0].partitions[0]
        assert part.error_code == code
        assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (1, 3)
        assert (part.snapshot_id.end_offset, part.snapshot_id.epoch, part.size,
                part.unaligned_records) == (0, 0, 0, b"")
        assert [e.node_id for e in response.node_endpoints] == [1]


def test_fetch_snapshot_of_another_partition_names_it_back() -> None:
    """handleFetchSnapshotRequest answers UNKNOWN_TOPIC_OR_PARTITION for the topic and
    partition asked for, with no CurrentLeader (only the NodeEndpoints)."""
    for name, index in (("other", 0), ("__cluster_metadata", 1)):
        response = snapshot_answer(snapshot_request(30, 3, 0, name=name, index=index))
        topic = response.topics[0]
        part = topic.partitions[0]
        assert (topic.name, part.index, part.error_code) == (name, index,
                                                              UNKNOWN_TOPIC_OR_PARTITION)
        assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (0, 0)
        assert [e.node_id for e in response.node_endpoints] == [1]


def test_fetch_snapshot_from_another_cluster_is_the_top_level_error_alone() -> None:
    request = snapshot_request(30, 3, 0)
    request.cluster_id = "other"
    response = snapshot_answer(request)
    assert (response.error_code, response.topics, response.node_endpoints) == (
        INCONSISTENT_CLUSTER_ID, [], [])
