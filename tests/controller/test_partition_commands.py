"""Leader and ISR rules of a replicated cluster, sans-IO, through QuorumController: what a
fenced, shutting-down, unfenced, unregistered or uncleanly restarted broker does to the
partitions (with and without ELR), AlterPartition with each of Kafka's error codes,
ElectLeaders (preferred and unclean), the periodic elections, and reassignments from start
to completion or cancellation. Expectations follow Kafka 4.1's ReplicationControlManager and
its ReplicationControlManagerTest."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from kraftpy.controller.partition_change import NO_LEADER, RECOVERED, RECOVERING
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.alter_partition_reassignments_request import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from kraftpy.protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    PartitionData,
    TopicData,
)
from kraftpy.protocol.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kraftpy.protocol.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from kraftpy.protocol.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsTopics,
)
from kraftpy.protocol.messages.unregister_broker_request import UnregisterBrokerRequest
from kraftpy.protocol.metadata_frame import decode_metadata_record
from support.controller_harness import Harness, settings

ELR = {"eligible.leader.replicas.version": 1}


def cluster(brokers: int = 3, *, elr: bool = True, min_isr: int = 2, **props: str
            ) -> tuple[Harness, dict[int, int]]:
    """A controller with brokers 1..n unfenced (their epochs), Kafka 4.1's features."""
    h = Harness(settings=settings(node_id=100, bootstrap_features=ELR if elr else {},
                                  min_insync_replicas=min_isr, static_configs=props))
    return h, {b: h.unfenced_broker(b) for b in range(1, brokers + 1)}


def create(h: Harness, name: str, assignments: list[list[int]], **configs: str) -> uuid.UUID:
    reply = h.handle(CreateTopicsRequest(topics=[CreatableTopic(
        name=name, num_partitions=-1, replication_factor=-1,
        assignments=[CreatableReplicaAssignment(partition_index=i, broker_ids=a)
                     for i, a in enumerate(assignments)],
        configs=[CreatableTopicConfig(name=k.replace("_", "."), value=v)
                 for k, v in configs.items()])], timeout_ms=1000), 7)
    assert reply.topics[0].error_code == ErrorCode.NONE, reply.topics[0]
    return reply.topics[0].topic_id


def partition(h: Harness, topic_id: uuid.UUID, index: int = 0) -> Any:
    return h.qc.replication.topics[topic_id].partitions[index]


def written(h: Harness, since: int) -> list[Any]:
    return [decode_metadata_record(v)[0] for v, _ in h.records[since - h.snapshot_end:]]


def changes(h: Harness, since: int) -> list[Any]:
    return [r for r in written(h, since) if r.API_KEY == 5]


def alter(h: Harness, broker: int, epoch: int, topic_id: uuid.UUID, isr: list[int], *,
          version: int = 3, leader_epoch: int | None = None, partition_epoch: int | None = None,
          epochs: dict[int, int] | None = None, recovery: int = RECOVERED, index: int = 0
          ) -> Any:
    """An AlterPartition from `broker` for one partition (epochs default to the current)."""
    p = h.qc.replication.topics[topic_id].partitions.get(index)
    data = PartitionData(
        partition_index=index,
        leader_epoch=p.leader_epoch if leader_epoch is None else leader_epoch,
        partition_epoch=p.partition_epoch if partition_epoch is None else partition_epoch,
        leader_recovery_state=recovery)
    if version >= 3:
        data.new_isr_with_epochs = [BrokerState(broker_id=b, broker_epoch=(epochs or {}).get(
            b, h.qc.cluster.brokers[b].epoch if b in h.qc.cluster.brokers else -1))
            for b in isr]
    else:
        data.new_isr = list(isr)
    reply = h.handle(AlterPartitionRequest(broker_id=broker, broker_epoch=epoch, topics=[
        TopicData(topic_id=topic_id, partitions=[data])]), version)
    return reply


def fence(h: Harness, broker: int, epochs: dict[int, int]) -> None:
    h.heartbeat(broker, epochs[broker], want_fence=True)


# --- broker events --------------------------------------------------------------------------

def test_fencing_moves_leadership_to_the_next_in_sync_replica_and_isr_shrinks():
    h, e = cluster()
    t = create(h, "t", [[1, 2, 3]])
    start = h.end
    fence(h, 1, e)
    (move,) = changes(h, start)
    assert (move.leader, move.isr, move.eligible_leader_replicas) == (2, [2, 3], None)
    p = partition(h, t)
    assert (p.leader, p.leader_epoch, p.isr) == (2, 1, [2, 3])


def test_isr_below_min_isr_keeps_eligible_leader_replicas_and_the_last_leader():
    h, e = cluster()
    t = create(h, "t", [[1, 2, 3]])
    fence(h, 3, e)
    assert partition(h, t).eligible_leader_replicas == []  # ISR [1, 2] still meets min ISR 2
    start = h.end
    fence(h, 2, e)
    (shrink,) = changes(h, start)
    assert (shrink.isr, shrink.eligible_leader_replicas, shrink.leader) == ([1], [2], -2)
    start = h.end
    fence(h, 1, e)
    (offline,) = changes(h, start)
    assert (offline.leader, offline.isr, offline.eligible_leader_replicas,
            offline.last_known_elr) == (NO_LEADER, [], [1, 2], [1])
    # An ELR member coming back leads again, clean: the ISR is just it.
    start = h.end
    h.heartbeat(2, e[2])
    (back,) = changes(h, start)
    assert (back.leader, back.isr, back.eligible_leader_replicas, back.last_known_elr) == \
        (2, [2], [1], [])


def test_without_elr_the_last_isr_member_stays_and_the_partition_goes_offline():
    h, e = cluster(elr=False)
    t = create(h, "t", [[1, 2]])
    fence(h, 2, e)
    start = h.end
    fence(h, 1, e)
    (offline,) = changes(h, start)
    assert (offline.leader, offline.isr) == (NO_LEADER, None)
    assert partition(h, t).isr == [1]
    start = h.end
    h.heartbeat(1, e[1])
    (back,) = changes(h, start)
    assert back.leader == 1


def test_controlled_shutdown_leaves_every_isr_and_hands_leaderships_over():
    h, e = cluster()
    t = create(h, "t", [[1, 2, 3], [2, 1, 3], [3, 2, 1]])
    start = h.end
    reply = h.heartbeat(1, e[1], want_shut_down=True)
    assert not reply.should_shut_down
    records = written(h, start)
    assert records[0].API_KEY == 17 and records[0].in_controlled_shutdown == 1
    moves = {r.partition_id: (r.leader, r.isr) for r in records[1:]}
    assert moves == {0: (2, [2, 3]), 1: (-2, [2, 3]), 2: (-2, [3, 2])}
    assert not h.qc.replication.leads_partitions(1)
    assert all(1 not in partition(h, t, i).isr for i in range(3))
    # Once every active broker has seen the move, the broker may go.
    h.heartbeat(2, e[2])
    h.heartbeat(3, e[3])
    assert h.heartbeat(1, e[1], want_shut_down=True).should_shut_down


def test_unfencing_elects_leaderless_partitions_and_not_led_ones():
    h, e = cluster(elr=False)
    t = create(h, "t", [[1, 2]])
    fence(h, 1, e)
    fence(h, 2, e)
    assert partition(h, t).leader == NO_LEADER
    start = h.end
    h.heartbeat(1, e[1])  # 1 is out of the ISR ([2]): it may not lead
    assert changes(h, start) == []
    h.heartbeat(2, e[2])
    assert partition(h, t).leader == 2


def test_unregistration_leaves_the_isr():
    h, e = cluster()
    t = create(h, "t", [[1, 2, 3]])
    start = h.end
    assert h.handle(UnregisterBrokerRequest(broker_id=2), 0).error_code == ErrorCode.NONE
    records = written(h, start)
    assert [r.API_KEY for r in records] == [5, 1]
    assert (records[0].isr, partition(h, t).isr) == ([1, 3], [1, 3])
    # An ELR member outside the ISR keeps its place: the ELR pass targets the same ISR, and
    # the ELR is rebuilt from it (as Kafka 4.1's handleBrokerUnregistered does).
    fence(h, 3, e)
    assert partition(h, t).eligible_leader_replicas == [3]
    start = h.end
    assert h.handle(UnregisterBrokerRequest(broker_id=3), 0).error_code == ErrorCode.NONE
    assert [r.API_KEY for r in written(h, start)] == [1]


def _four_brokers_min_isr_3() -> tuple[Harness, dict[int, int], uuid.UUID]:
    h = Harness(settings=settings(node_id=100, bootstrap_features=ELR, min_insync_replicas=1))
    e = {b: h.unfenced_broker(b) for b in (0, 1, 2, 3)}
    t = create(h, "foo", [[0, 1, 2, 3]], min_insync_replicas="3")
    assert partition(h, t).leader == 0
    return h, e, t


def test_kafka_elr_broker_fence():
    """ReplicationControlManagerTest.testEligibleLeaderReplicas_BrokerFence."""
    h, e, t = _four_brokers_min_isr_3()
    for b in (2, 3):
        fence(h, b, e)
    assert (partition(h, t).eligible_leader_replicas, partition(h, t).last_known_elr) == \
        ([3], [])
    fence(h, 1, e)
    assert (partition(h, t).eligible_leader_replicas, partition(h, t).last_known_elr) == \
        ([1, 3], [])
    for b in (1, 2, 3):
        h.heartbeat(b, e[b])
    assert (partition(h, t).eligible_leader_replicas, partition(h, t).last_known_elr) == \
        ([1, 3], [])


def test_kafka_elr_clean_election():
    """ReplicationControlManagerTest.testEligibleLeaderReplicas_CleanElection."""
    h, e, t = _four_brokers_min_isr_3()
    for b in (1, 2, 3):
        fence(h, b, e)
    assert partition(h, t).eligible_leader_replicas == [2, 3]
    h.heartbeat(2, e[2])
    for b in (0, 1):
        fence(h, b, e)
    p = partition(h, t)
    assert (p.eligible_leader_replicas, p.isr, p.leader, p.last_known_elr) == \
        ([0, 3], [2], 2, [])


def test_kafka_elr_unclean_shutdown():
    """ReplicationControlManagerTest.testEligibleLeaderReplicas_UncleanShutdown."""
    h, e, t = _four_brokers_min_isr_3()
    for b in (1, 2, 3):
        fence(h, b, e)
    assert partition(h, t).eligible_leader_replicas == [2, 3]
    h.write(type(h.tick())(None, records=h.qc.replication.handle_broker_shutdown(3, False)))
    assert (partition(h, t).eligible_leader_replicas, partition(h, t).last_known_elr) == \
        ([2], [])
    h.write(type(h.tick())(None, records=h.qc.replication.handle_broker_shutdown(0, False)))
    assert (partition(h, t).eligible_leader_replicas, partition(h, t).last_known_elr) == \
        ([2], [0])


@pytest.mark.parametrize("clean", [True, False])
def test_a_new_incarnation_after_an_unclean_shutdown_loses_its_elr_place(clean):
    h, e = cluster()
    t = create(h, "t", [[1, 2, 3]])
    fence(h, 3, e)
    fence(h, 2, e)
    assert partition(h, t).eligible_leader_replicas == [2]
    start = h.end
    previous = e[2] if clean else e[2] - 1
    h.now_ms += 9001  # the old incarnation's session expires first (Kafka 4.1)
    req_epoch = h.register(2, version=3, previous_epoch=previous).broker_epoch
    assert req_epoch > e[2]
    elr_changes = changes(h, start)
    if clean:
        assert elr_changes == []
        assert partition(h, t).eligible_leader_replicas == [2]
    else:
        assert [c.eligible_leader_replicas for c in elr_changes] == [[]]
        assert (partition(h, t).eligible_leader_replicas, partition(h, t).last_known_elr) == \
            ([], [])


def test_min_isr_is_capped_at_the_replication_factor():
    h, e = cluster(min_isr=3)
    t = create(h, "t", [[1, 2]])
    assert h.qc.replication.effective_min_isr(h.qc.replication.topics[t]) == 2
    fence(h, 2, e)
    assert partition(h, t).eligible_leader_replicas == [2]
    t2 = create(h, "t2", [[1, 3]], min_insync_replicas="1")
    fence(h, 3, e)
    assert partition(h, t2).eligible_leader_replicas == []


# --- AlterPartition -------------------------------------------------------------------------

def test_alter_partition_shrinks_and_expands_the_isr():
    h, e = cluster()
    t = create(h, "t", [[1, 2, 3]])
    start = h.end
    reply = alter(h, 1, e[1], t, [1, 2])
    (p,) = reply.topics[0].partitions
    assert (p.error_code, p.leader_id, p.isr, p.leader_epoch, p.partition_epoch,
            p.leader_recovery_state) == (0, 1, [1, 2], 0, 1, 0)
    (record,) = changes(h, start)
    assert (record.isr, record.leader) == ([1, 2], -2)  # no leader epoch bump from 3.6-IV0
    reply = alter(h, 1, e[1], t, [1, 2, 3])
    assert reply.topics[0].partitions[0].isr == [1, 2, 3]
    assert partition(h, t).partition_epoch == 2
    # The same ISR again writes nothing and answers the current state.
    start = h.end
    assert alter(h, 1, e[1], t, [1, 2, 3]).topics[0].partitions[0].partition_epoch == 2
    assert h.end == start


def test_alter_partition_v2_takes_an_isr_without_epochs():
    h, e = cluster()
    t = create(h, "t", [[1, 2, 3]])
    assert alter(h, 1, e[1], t, [1, 3], version=2).topics[0].partitions[0].isr == [1, 3]


def _code(reply: Any) -> int:
    return reply.topics[0].partitions[0].error_code


def test_alter_partition_errors_in_kafkas_order():
    h, e = cluster()
    t = create(h, "t", [[1, 2, 3]])
    assert alter(h, 1, e[1] + 1, t, [1, 2]).error_code == ErrorCode.STALE_BROKER_EPOCH
    assert alter(h, 1, e[1], t, [1, 2], leader_epoch=5).topics[0].partitions[0].error_code \
        == ErrorCode.NOT_CONTROLLER
    assert _code(alter(h, 1, e[1], t, [1, 2], partition_epoch=5)) == ErrorCode.NOT_CONTROLLER
    assert _code(alter(h, 2, e[2], t, [1, 2])) == ErrorCode.INVALID_REQUEST  # not the leader
    assert _code(alter(h, 1, e[1], t, [1, 4])) == ErrorCode.INVALID_REQUEST  # not a replica
    assert _code(alter(h, 1, e[1], t, [2, 3])) == ErrorCode.INVALID_REQUEST  # leader left out
    assert _code(alter(h, 1, e[1], t, [1, 1])) == ErrorCode.INVALID_REQUEST  # repeated
    assert _code(alter(h, 1, e[1], t, [1, 2], recovery=RECOVERING)) == ErrorCode.INVALID_REQUEST
    assert _code(alter(h, 1, e[1], t, [1], recovery=RECOVERING)) == ErrorCode.INVALID_REQUEST
    assert _code(alter(h, 1, e[1], t, [1, 2], epochs={2: e[2] + 7})) == \
        ErrorCode.INELIGIBLE_REPLICA
    fence(h, 3, e)  # partition epoch 1, leader epoch 0
    assert _code(alter(h, 1, e[1], t, [1, 2, 3])) == ErrorCode.INELIGIBLE_REPLICA
    assert _code(alter(h, 1, e[1], t, [1, 2], partition_epoch=0)) == \
        ErrorCode.INVALID_UPDATE_VERSION
    fence(h, 1, e)  # leader moves: epoch 1
    assert _code(alter(h, 2, e[2], t, [2], leader_epoch=0)) == ErrorCode.FENCED_LEADER_EPOCH
    reply = h.handle(AlterPartitionRequest(broker_id=2, broker_epoch=e[2], topics=[TopicData(
        topic_id=uuid.uuid4(), partitions=[PartitionData(partition_index=0)])]), 3)
    assert _code(reply) == ErrorCode.UNKNOWN_TOPIC_ID
    assert _code(alter(h, 2, e[2], t, [2], index=0)) == ErrorCode.NONE
    reply = h.handle(AlterPartitionRequest(broker_id=2, broker_epoch=e[2], topics=[TopicData(
        topic_id=t, partitions=[PartitionData(partition_index=9)])]), 3)
    assert _code(reply) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_recovering_leader_may_only_clear_recovery():
    h, e = cluster(elr=False)
    t = create(h, "t", [[1, 2]], unclean_leader_election_enable="true")
    fence(h, 2, e)
    fence(h, 1, e)  # ISR [1], no leader
    h.heartbeat(2, e[2])  # unfenced: the topic allows an unclean election, so 2 leads
    p = partition(h, t)
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, [2], RECOVERING)
    reply = alter(h, 2, e[2], t, [2], recovery=RECOVERED)
    assert reply.topics[0].partitions[0].leader_recovery_state == RECOVERED
    assert partition(h, t).leader_recovery_state == RECOVERED


# --- ElectLeaders and the periodic elections ----------------------------------------------

def _elect(h: Harness, election_type: int, partitions: dict[str, list[int]] | None,
           version: int = 2) -> dict[tuple[str, int], tuple[int, str | None]]:
    request = ElectLeadersRequest(election_type=election_type, timeout_ms=1000,
                                  topic_partitions=None if partitions is None else [
                                      TopicPartitions(topic=n, partitions=ps)
                                      for n, ps in partitions.items()])
    reply = h.handle(request, version)
    return {(r.topic, p.partition_id): (p.error_code, p.error_message)
            for r in reply.replica_election_results for p in r.partition_result}


def test_preferred_election_brings_the_first_replica_back():
    h, e = cluster()
    t = create(h, "t", [[1, 2, 3], [2, 3, 1]])
    fence(h, 1, e)
    h.heartbeat(1, e[1])
    alter(h, 2, e[2], t, [2, 3, 1])
    assert partition(h, t).leader == 2
    assert _elect(h, 0, {"t": [0, 1], "nope": [0]}) == {
        ("t", 0): (0, None),
        ("t", 1): (ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic "
                                                  "partition."),
        ("nope", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such topic as nope")}
    assert partition(h, t).leader == 1
    assert _elect(h, 0, None) == {}  # every partition has its preferred leader
    assert _elect(h, 0, {"t": [7]}) == {("t", 7): (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "No such partition as t-7")}


def test_preferred_election_of_a_replica_out_of_the_isr_is_not_available():
    h, e = cluster()
    t = create(h, "t", [[1, 2, 3]])
    fence(h, 1, e)
    h.heartbeat(1, e[1])  # unfenced, but not back in the ISR
    assert partition(h, t).isr == [2, 3]
    assert _elect(h, 0, {"t": [0]}) == {("t", 0): (
        ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, "The preferred leader was not available.")}


def test_unclean_election_takes_a_live_replica_out_of_the_isr():
    h, e = cluster(elr=False)
    create(h, "t", [[1, 2]])
    fence(h, 2, e)
    fence(h, 1, e)
    assert _elect(h, 1, {"t": [0]}) == {("t", 0): (
        ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
        "Eligible topic partition leaders are not available.")}
    h.heartbeat(2, e[2])
    start = h.end
    assert _elect(h, 1, {"t": [0]}) == {("t", 0): (0, None)}
    (record,) = changes(h, start)
    assert (record.leader, record.isr, record.leader_recovery_state) == (2, [2], RECOVERING)
    assert _elect(h, 1, {"t": [0]})[("t", 0)][0] == ErrorCode.ELECTION_NOT_NEEDED


def test_elect_leaders_edge_answers():
    h, _ = cluster()
    create(h, "t", [[1, 2, 3]])
    reply = h.handle(ElectLeadersRequest(election_type=0, topic_partitions=[],
                                         timeout_ms=1), 2)
    assert reply.replica_election_results == []
    assert _elect(h, 5, {"t": [0]}) == {("t", 0): (ErrorCode.INVALID_REQUEST,
                                                   "Unknown election type 5")}
    assert _elect(h, 1, {"t": [0]}, version=0)[("t", 0)][0] == ErrorCode.ELECTION_NOT_NEEDED


def test_auto_leader_rebalance_runs_at_the_imbalance_check_interval():
    h, e = cluster(**{"leader.imbalance.check.interval.seconds": "5"})
    t = create(h, "t", [[1, 2, 3]])
    fence(h, 1, e)
    h.heartbeat(1, e[1])
    alter(h, 2, e[2], t, [2, 3, 1])
    h.now_ms += 1000
    h.tick()
    assert partition(h, t).leader == 2
    h.heartbeat(2, e[2])
    h.heartbeat(3, e[3])
    h.heartbeat(1, e[1])
    h.advance(5000)
    assert partition(h, t).leader == 1


def test_auto_leader_rebalance_disabled():
    h, e = cluster(**{"leader.imbalance.check.interval.seconds": "1",
                      "auto.leader.rebalance.enable": "false"})
    t = create(h, "t", [[1, 2, 3]])
    fence(h, 1, e)
    h.heartbeat(1, e[1])
    alter(h, 2, e[2], t, [2, 3, 1])
    for b in (1, 2, 3):
        h.heartbeat(b, e[b])
    h.advance(2000)
    assert partition(h, t).leader == 2


def test_periodic_unclean_election_only_where_the_topic_allows_it():
    h, e = cluster(elr=False, **{"unclean.leader.election.interval.ms": "1000"})
    t = create(h, "t", [[1, 2]], unclean_leader_election_enable="true")
    t2 = create(h, "t2", [[1, 2]])
    fence(h, 2, e)
    fence(h, 1, e)
    h.heartbeat(2, e[2])
    h.advance(1000)
    assert (partition(h, t).leader, partition(h, t).leader_recovery_state) == (2, RECOVERING)
    assert partition(h, t2).leader == NO_LEADER


def test_fencing_with_unclean_election_enabled_elects_out_of_the_isr():
    h, e = cluster(elr=False)
    t = create(h, "t", [[1, 2]], unclean_leader_election_enable="true")
    fence(h, 2, e)  # ISR [1]
    h.heartbeat(2, e[2])  # alive, not in the ISR
    fence(h, 1, e)
    p = partition(h, t)
    assert (p.leader, p.isr, p.leader_recovery_state) == (2, [2], RECOVERING)


# --- reassignments --------------------------------------------------------------------------

def _reassign(h: Harness, targets: dict[int, list[int] | None], version: int = 0,
              allow_rf_change: bool = True) -> dict[int, tuple[int, str | None]]:
    reply = h.handle(AlterPartitionReassignmentsRequest(
        timeout_ms=1000, allow_replication_factor_change=allow_rf_change,
        topics=[ReassignableTopic(name="t", partitions=[
            ReassignablePartition(partition_index=i, replicas=r) for i, r in targets.items()])]),
        version)
    return {p.partition_index: (p.error_code, p.error_message)
            for r in reply.responses for p in r.partitions}


def _listed(h: Harness, topics: list[str] | None = None) -> list[tuple[str, int, list[int],
                                                                          list[int], list[int]]]:
    reply = h.handle(ListPartitionReassignmentsRequest(
        timeout_ms=1000, topics=None if topics is None else [
            ListPartitionReassignmentsTopics(name=n, partition_indexes=[0, 1]) for n in topics]),
        0)
    return [(t.name, p.partition_index, p.replicas, p.adding_replicas, p.removing_replicas)
            for t in reply.topics for p in t.partitions]


def test_reassignment_adds_then_completes_when_the_isr_catches_up():
    h, e = cluster(4)
    t = create(h, "t", [[1, 2, 3], [2, 3, 4]])
    start = h.end
    assert _reassign(h, {0: [2, 3, 4]}) == {0: (0, None)}
    (record,) = changes(h, start)
    assert (record.replicas, record.adding_replicas, record.removing_replicas) == \
        ([2, 3, 4, 1], [4], [1])
    assert _listed(h) == [("t", 0, [2, 3, 4, 1], [4], [1])]
    assert _listed(h, ["t", "other"]) == _listed(h)
    # The leader (1) reports 4 in sync: the reassignment completes and moves the leader.
    start = h.end
    reply = alter(h, 1, e[1], t, [1, 2, 3, 4])
    assert _code(reply) == ErrorCode.NEW_LEADER_ELECTED
    (done,) = changes(h, start)
    assert (done.replicas, done.isr, done.leader, done.adding_replicas, done.removing_replicas) \
        == ([2, 3, 4], [2, 3, 4], 2, [], [])
    assert _listed(h) == []


def test_reassignment_that_only_reorders_completes_at_once():
    h, _ = cluster()
    t = create(h, "t", [[1, 2, 3]])
    start = h.end
    assert _reassign(h, {0: [3, 2, 1]}) == {0: (0, None)}
    (record,) = changes(h, start)
    assert (record.replicas, record.leader) == ([3, 2, 1], -2)
    assert partition(h, t).replicas == [3, 2, 1] and _listed(h) == []


def test_reassignment_cancelled_reverts():
    h, _ = cluster(4)
    t = create(h, "t", [[1, 2, 3]])
    _reassign(h, {0: [4, 2, 3]})
    assert _reassign(h, {0: None}) == {0: (0, None)}
    p = partition(h, t)  # the replicas the reassignment kept, then the ones it was removing
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ([2, 3, 1], [], [])
    assert _reassign(h, {0: None}) == {0: (ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                           "No partition reassignment is in progress.")}


def test_reassignment_errors():
    h, _ = cluster()
    create(h, "t", [[1, 2, 3]])
    assert _reassign(h, {0: [1, 2, 9]}) == {0: (
        ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition assignment includes broker "
        "9, but no such broker is registered.")}
    assert _reassign(h, {0: [1, 1, 2]})[0][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _reassign(h, {0: []})[0][0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert _reassign(h, {5: [1, 2, 3]}) == {5: (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                "Unable to find partition t:5.")}
    assert _reassign(h, {0: [1, 2]}, version=1, allow_rf_change=False) == {0: (
        ErrorCode.INVALID_REPLICATION_FACTOR, "The replication factor is changed from 3 to 2")}
    assert _reassign(h, {0: [1, 2]}, version=0, allow_rf_change=False) == {0: (0, None)}
    reply = h.handle(AlterPartitionReassignmentsRequest(timeout_ms=1, topics=[
        ReassignableTopic(name="x", partitions=[ReassignablePartition(partition_index=0,
                                                                      replicas=[1])])]), 0)
    assert (reply.responses[0].partitions[0].error_code,
            reply.responses[0].partitions[0].error_message) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find a topic named x.")


def test_state_survives_restart_and_snapshot():
    h, e = cluster(4)
    t = create(h, "t", [[1, 2, 3]])
    _reassign(h, {0: [2, 3, 4]})
    fence(h, 3, e)
    fence(h, 2, e)
    before = partition(h, t)
    fields = (before.replicas, before.isr, before.leader, before.leader_epoch,
              before.partition_epoch, before.adding_replicas, before.removing_replicas,
              before.eligible_leader_replicas, before.last_known_elr)
    for use_snapshot in (False, True):
        h.restart(use_snapshot=use_snapshot)
        p = partition(h, t)
        assert (p.replicas, p.isr, p.leader, p.leader_epoch, p.partition_epoch,
                p.adding_replicas, p.removing_replicas, p.eligible_leader_replicas,
                p.last_known_elr) == fields
