"""The raft leader's Fetch and FetchSnapshot decisions (sans-IO), as KafkaRaftClient makes them."""

from __future__ import annotations

import uuid

import pytest
from kraftpy.controller.raft.leader import (
    FENCED_LEADER_EPOCH,
    INCONSISTENT_CLUSTER_ID,
    INVALID_REQUEST,
    NONE,
    POSITION_OUT_OF_RANGE,
    SNAPSHOT_NOT_FOUND,
    UNKNOWN_LEADER_EPOCH,
    UNKNOWN_TOPIC_OR_PARTITION,
    Endpoint,
    LogState,
    RaftLeader,
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

EP = Endpoint("127.0.0.1", 9093)


def leader(epoch: int = 3) -> RaftLeader:
    return RaftLeader(cluster_id=CLUSTER, node_id=1, epoch=epoch)


LOG = LogState(start_offset=0, high_watermark=40, epochs=[(1, 0), (3, 10)])


def answer(plan_of: RaftLeader, request: FetchRequest, log: LogState = LOG, version: int = 18
           ) -> tuple[object, FetchResponse]:
    plan = plan_of.plan_fetch(request, version, log, now_ms=1000)
    response = plan_of.fetch_response(request, version, plan, b"", log.start_offset, EP)
    # Every answer encodes at the version asked for, and decodes back to itself.
    assert FetchResponse.decode(response.encode(version), version) == response
    return plan, response


def test_a_first_fetch_at_epoch_0_learns_the_leader_and_its_address() -> None:
    plan, response = answer(leader(), fetch(0, epoch=0, last_epoch=0))
    part = response.responses[0].partitions[0]
    assert part.error_code == FENCED_LEADER_EPOCH
    assert (part.current_leader.leader_id, part.current_leader.leader_epoch) == (1, 3)
    assert [(e.node_id, e.host, e.port) for e in response.node_endpoints] == [(1, "127.0.0.1", 9093)]
    assert plan.answer_now(500)
    # Before v17 the address is not in the answer (the fetcher knows its voters).
    _, v16 = answer(leader(), fetch(0, epoch=0, last_epoch=0), version=16)
    assert v16.node_endpoints == []


def test_a_fetch_from_a_later_epoch_is_unknown_leader_epoch() -> None:
    _, response = answer(leader(), fetch(0, epoch=4, last_epoch=0))
    assert response.responses[0].partitions[0].error_code == UNKNOWN_LEADER_EPOCH


@pytest.mark.parametrize("request_, top, part", [
    (fetch(0, cluster="other"), INCONSISTENT_CLUSTER_ID, None),
    (fetch(0, topic_id=uuid.UUID(int=5)), INVALID_REQUEST, None),
    (fetch(-1), NONE, INVALID_REQUEST),
    (fetch(5, last_epoch=4), NONE, INVALID_REQUEST),  # last fetched epoch above the leader's
    (fetch(5, max_wait=-1), NONE, INVALID_REQUEST),
])
def test_bad_fetches(request_: FetchRequest, top: int, part: int | None) -> None:
    _, response = answer(leader(), request_)
    assert response.error_code == top
    if part is None:
        assert response.responses == []
    else:
        assert response.responses[0].partitions[0].error_code == part


def test_a_valid_fetch_reads_from_its_offset_and_tracks_the_fetcher() -> None:
    raft = leader()
    plan, response = answer(raft, fetch(12, hwm=40))
    assert plan.read_from == 12 and not plan.answer_now(500)
    part = response.responses[0].partitions[0]
    assert (part.high_watermark, part.log_start_offset, part.error_code) == (40, 0, NONE)
    assert raft.replicas[7].log_end_offset == 12 and raft.replicas[7].last_caught_up_ms == -1
    answer(raft, fetch(40))
    assert raft.replicas[7].last_caught_up_ms == 1000
    # A fetcher whose high watermark is behind the leader's is answered at once (KIP-1166).
    plan, _ = answer(raft, fetch(40, hwm=30))
    assert plan.answer_now(500)
    plan, _ = answer(raft, fetch(40, hwm=40))
    assert not plan.answer_now(500) and plan.answer_now(0)


def test_a_fetcher_past_the_end_of_its_epoch_diverges() -> None:
    # Epoch 1 ended at offset 10; a fetcher at 12 whose last record is from epoch 1 (or from
    # epoch 2, which this leader never had) must truncate to 10.
    for last in (1, 2):
        plan, response = answer(leader(), fetch(12, last_epoch=last))
        assert plan.diverging == (1, 10)
        diverging = response.responses[0].partitions[0].diverging_epoch
        assert (diverging.epoch, diverging.end_offset) == (1, 10)
    plan, _ = answer(leader(), fetch(9, last_epoch=1))
    assert plan.read_from == 9


def test_snapshots_are_sent_for_an_empty_fetcher_and_one_below_the_log_start() -> None:
    # Retention kept an older snapshot at the log start (25, epoch 2) beside the newest.
    log = LogState(start_offset=25, high_watermark=40, epochs=[(2, 20), (3, 28)],
                   snapshots=[(25, 2), (30, 3)])
    # Empty; below the log start; at the start with another epoch; an epoch before the oldest.
    for offset, last in ((0, 0), (5, 1), (25, 1), (26, 1)):
        plan, response = answer(leader(), fetch(offset, last_epoch=last), log)
        assert plan.snapshot == (30, 3)
        sid = response.responses[0].partitions[0].snapshot_id
        assert (sid.end_offset, sid.epoch) == (30, 3)
    plan, _ = answer(leader(), fetch(31, last_epoch=3), log)
    assert plan.read_from == 31


def snapshot_request(end: int, epoch: int, position: int, *, leader_epoch: int = 3,
                     name: str = "__cluster_metadata") -> FetchSnapshotRequest:
    return FetchSnapshotRequest(cluster_id=CLUSTER, replica_id=7, max_bytes=100, topics=[
        TopicSnapshot(name=name, partitions=[PartitionSnapshot(
            partition=0, current_leader_epoch=leader_epoch,
            snapshot_id=SnapshotId(end_offset=end, epoch=epoch), position=position)])])


def snapshot_answer(request: FetchSnapshotRequest, found: tuple[int, bytes] | None
                    ) -> FetchSnapshotResponse:
    raft = leader()
    error, _, _ = raft.snapshot_to_send(request)
    response = raft.fetch_snapshot_response(request, 1, error, found, EP)
    assert FetchSnapshotResponse.decode(response.encode(1), 1) == response
    return response


def test_fetch_snapshot_answers() -> None:
    ok = snapshot_answer(snapshot_request(30, 3, 10), (250, b"x" * 100)).topics[0].partitions[0]
    assert (ok.error_code, ok.size, ok.position, ok.unaligned_records) == (0, 250, 10, b"x" * 100)
    for request, found, code in (
            (snapshot_request(0, 0, 0), None, SNAPSHOT_NOT_FOUND),  # the bootstrap snapshot
            (snapshot_request(20, 2, 0), None, SNAPSHOT_NOT_FOUND),  # not on disk
            (snapshot_request(30, 3, 250), (250, b""), POSITION_OUT_OF_RANGE),
            (snapshot_request(30, 3, 0, leader_epoch=2), None, FENCED_LEADER_EPOCH),
            (snapshot_request(30, 3, 0, name="other"), None, UNKNOWN_TOPIC_OR_PARTITION)):
        part = snapshot_answer(request, found).topics[0].partitions[0]
        assert part.error_code == code
        assert part.current_leader.leader_id == 1
