"""KIP-631 broker registration and the heartbeat state machine, case by case, fake clock."""

from __future__ import annotations

import uuid

import pytest
from kraftpy.controller.broker_heartbeat_manager import BrokerControlState as S
from kraftpy.controller.broker_heartbeat_manager import next_state
from kraftpy.controller.result import ControllerResult
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.unregister_broker_request import UnregisterBrokerRequest
from kraftpy.protocol.metadata_frame import decode_metadata_record
from kraftpy.protocol.records.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from kraftpy.protocol.records.no_op_record import NoOpRecord
from kraftpy.protocol.records.partition_change_record import PartitionChangeRecord
from kraftpy.protocol.records.partition_record import PartitionRecord
from kraftpy.protocol.records.topic_record import TopicRecord
from support.controller_harness import CLUSTER_ID, KAFKA_41_FEATURES, Harness, settings


def written(h: Harness, since: int) -> list[tuple[object, int]]:
    return [decode_metadata_record(v) for v, _ in h.records[since - h.snapshot_end:]]


# --- the state table (Kafka's calculateNextBrokerState), one row per case -------------------

ROWS = [
    # current, want_fence, want_shut_down, caught_up, has_leaderships, cs_offset, lowest, next
    (S.FENCED, False, True, False, False, -1, 0, S.SHUTDOWN_NOW),
    (S.FENCED, True, True, True, False, -1, 0, S.SHUTDOWN_NOW),
    (S.FENCED, False, False, True, False, -1, 0, S.UNFENCED),
    (S.FENCED, False, False, False, False, -1, 0, S.FENCED),
    (S.FENCED, True, False, True, False, -1, 0, S.FENCED),
    (S.UNFENCED, True, True, True, True, -1, 0, S.SHUTDOWN_NOW),
    (S.UNFENCED, True, False, True, True, -1, 0, S.FENCED),
    (S.UNFENCED, False, True, True, True, -1, 0, S.CONTROLLED_SHUTDOWN),
    (S.UNFENCED, False, True, True, False, -1, 0, S.SHUTDOWN_NOW),
    (S.UNFENCED, False, False, False, True, -1, 0, S.UNFENCED),
    (S.CONTROLLED_SHUTDOWN, False, True, True, True, 5, 100, S.CONTROLLED_SHUTDOWN),
    (S.CONTROLLED_SHUTDOWN, False, True, True, False, 5, 5, S.SHUTDOWN_NOW),
    (S.CONTROLLED_SHUTDOWN, False, True, True, False, 5, 4, S.CONTROLLED_SHUTDOWN),
    (S.CONTROLLED_SHUTDOWN, True, False, True, False, 5, 6, S.SHUTDOWN_NOW),
    (S.SHUTDOWN_NOW, False, False, True, False, -1, 0, S.SHUTDOWN_NOW),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r[0].name}->{r[-1].name}")
def test_state_table(row):
    cur, fence, shut, caught, leads, cs, lowest, expected = row
    assert next_state(cur, want_fence=fence, want_shut_down=shut, caught_up=caught,
                      has_leaderships=leads, controlled_shutdown_offset=cs,
                      lowest_active_offset=lowest) is expected


def test_state_flags_match_kafka():
    assert [(s.fenced, s.in_controlled_shutdown, s.should_shut_down) for s in S] == [
        (True, False, False), (False, False, False), (False, True, False), (True, False, True)]


# --- registration ---------------------------------------------------------------------------

def test_registration_epoch_is_the_offset_where_its_records_begin():
    h = Harness()
    start = h.end
    reply = h.register(2)
    assert reply.error_code == ErrorCode.NONE and reply.broker_epoch == start
    (rec, version), = written(h, start)
    assert rec.API_KEY == 0 and version == 3
    assert (rec.broker_id, rec.broker_epoch, rec.fenced, rec.in_controlled_shutdown) == \
        (2, start, True, False)
    assert rec.log_dirs and rec.end_points[0].port == 19094


def test_register_record_version_follows_metadata_version():
    h = Harness(settings=settings(metadata_version=14))  # 3.6-IV2, as the Kafka 3.6 sample
    start = h.end
    h.register(2)
    (_, version), = written(h, start)
    assert version == 2


def test_registration_before_bootstrap_is_retriable():
    from kraftpy.controller.quorum_controller import QuorumController
    from kraftpy.protocol.messages.broker_registration_request import BrokerRegistrationRequest
    qc = QuorumController(settings())
    result = qc.handle(BrokerRegistrationRequest(broker_id=2, cluster_id=CLUSTER_ID), 4,
                       now_ms=0, next_offset=0)
    assert result.response.error_code == ErrorCode.NOT_CONTROLLER and not result.records


@pytest.mark.parametrize("kwargs,code", [
    ({"cluster_id": "AAAAAAAAAAAAAAAAAAAAAA"}, ErrorCode.INCONSISTENT_CLUSTER_ID),
    ({"features": (("metadata.version", 7, 21),)}, ErrorCode.UNSUPPORTED_VERSION),
    ({"features": ()}, ErrorCode.UNSUPPORTED_VERSION),  # missing metadata.version -> [1, 1]
    ({"log_dirs": []}, ErrorCode.INVALID_REGISTRATION),
    ({"log_dirs": [uuid.UUID(int=1)]}, ErrorCode.INVALID_REGISTRATION),
    ({"log_dirs": [uuid.UUID(int=500)] * 2}, ErrorCode.INVALID_REGISTRATION),
])
def test_registration_refusals_write_nothing(kwargs, code):
    h = Harness()
    end = h.end
    reply = h.register(2, **kwargs)
    assert reply.error_code == code and reply.broker_epoch == -1
    assert h.end == end


def test_finalized_feature_missing_from_broker_counts_as_zero():
    h = Harness(settings=settings(bootstrap_features={"kraft.version": 0}))
    assert h.register(2, features=(("metadata.version", 7, 27),)).error_code == 0
    h2 = Harness()
    h2.qc.features.finalized["group.version"] = 1  # as if a Kafka log finalized it
    reply = h2.register(2, features=(("metadata.version", 7, 27),))
    assert reply.error_code == ErrorCode.UNSUPPORTED_VERSION


def test_our_own_node_id_and_zk_brokers_are_refused():
    h = Harness()
    assert h.register(1).error_code == ErrorCode.INVALID_REGISTRATION
    from kraftpy.protocol.messages.broker_registration_request import (
        BrokerRegistrationRequest,
        Feature,
    )
    reply = h.handle(BrokerRegistrationRequest(
        broker_id=5, cluster_id=CLUSTER_ID, incarnation_id=uuid.uuid4(),
        features=[Feature(name="metadata.version", min_supported_version=7,
                          max_supported_version=27)],
        is_migrating_zk_broker=True, log_dirs=[uuid.uuid4()]), 4)
    assert reply.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED


def test_a_registration_never_heard_from_may_be_replaced_at_once():
    h = Harness()
    first = h.register(2).broker_epoch
    second = h.register(2).broker_epoch  # no heartbeat named the first epoch: no session
    assert second > first


@pytest.mark.parametrize("how", ["unfenced", "want_fence", "controlled_shutdown"])
def test_a_new_incarnation_waits_out_the_session_of_the_registered_epoch(how):
    """Kafka 4.1 (BrokerHeartbeatTracker): the session belongs to (id, epoch) and lasts a
    session timeout from its last heartbeat, fenced or not: a broker restarted right after
    its controlled shutdown is refused until then, and gets in after."""
    h = Harness()
    epoch = h.unfenced_broker(2)
    if how == "want_fence":
        assert h.heartbeat(2, epoch, want_fence=True).is_fenced
    elif how == "controlled_shutdown":
        reply = h.heartbeat(2, epoch, want_shut_down=True)
        assert (reply.is_fenced, reply.should_shut_down) == (True, True)
    assert h.register(2).error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    h.now_ms += 4000
    beat = h.heartbeat(2, epoch, want_fence=how == "want_fence",
                       want_shut_down=how == "controlled_shutdown")
    assert beat.error_code == ErrorCode.NONE and beat.is_fenced == (how != "unfenced")
    h.now_ms += 9000
    assert h.register(2).error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    h.now_ms += 1
    reply = h.register(2)
    assert reply.error_code == ErrorCode.NONE and reply.broker_epoch > epoch


def test_a_heartbeat_naming_another_epoch_keeps_no_session_of_the_registered_one():
    h = Harness()
    first = h.unfenced_broker(2)
    h.now_ms += 9001
    second = h.register(2).broker_epoch  # the first one's session expired
    assert second > first
    h.heartbeat(2, first)  # STALE_BROKER_EPOCH, and a contact for the old epoch only
    assert h.register(2).error_code == ErrorCode.NONE


def test_activation_gives_unfenced_brokers_a_session_and_fenced_ones_none():
    h = Harness()
    e2 = h.unfenced_broker(2)
    e3 = h.unfenced_broker(3)
    h.heartbeat(3, e3, want_fence=True)
    h.now_ms += 60_000
    h.restart()  # a new active controller: contacts are soft state, seeded as Kafka's
    assert h.register(2).error_code == ErrorCode.DUPLICATE_BROKER_REGISTRATION
    assert h.register(3).error_code == ErrorCode.NONE
    h.now_ms += 9001
    assert h.register(2).broker_epoch > e2


def test_same_incarnation_keeps_epoch_and_state():
    h = Harness()
    inc = uuid.uuid4()
    epoch = h.register(2, incarnation=inc).broker_epoch
    assert not h.heartbeat(2, epoch).is_fenced
    start = h.end
    assert h.register(2, incarnation=inc).broker_epoch == epoch
    (rec, _), = written(h, start)
    assert rec.broker_epoch == epoch and rec.fenced is False


# --- heartbeats -----------------------------------------------------------------------------

def test_heartbeat_before_registration_or_with_stale_epoch():
    h = Harness()
    for broker, epoch in [(77, 1), (77, -1)]:
        r = h.heartbeat(broker, epoch)
        assert (r.error_code, r.is_caught_up, r.is_fenced, r.should_shut_down) == \
            (ErrorCode.STALE_BROKER_EPOCH, False, True, False)
    epoch = h.register(2).broker_epoch
    assert h.heartbeat(2, epoch + 1).error_code == ErrorCode.STALE_BROKER_EPOCH


def test_unfenced_only_once_caught_up_with_the_registration():
    h = Harness()
    epoch = h.register(2).broker_epoch
    behind = h.heartbeat(2, epoch, offset=epoch - 1)
    assert (behind.is_caught_up, behind.is_fenced) == (False, True)
    start = h.end
    reply = h.heartbeat(2, epoch, offset=epoch)
    assert (reply.is_caught_up, reply.is_fenced, reply.should_shut_down) == (True, False, False)
    (rec, version), = written(h, start)
    assert (rec.API_KEY, version, rec.broker_id, rec.broker_epoch, rec.fenced) == \
        (17, 0, 2, epoch, -1)
    assert h.heartbeat(2, epoch).is_fenced is False and h.end == start + 1


def test_want_fence_fences_and_want_shut_down_without_leaderships_shuts_down_now():
    h = Harness()
    epoch = h.unfenced_broker(2)
    start = h.end
    assert h.heartbeat(2, epoch, want_fence=True).is_fenced is True
    (rec, _), = written(h, start)
    assert rec.fenced == 1
    assert h.heartbeat(2, epoch, want_fence=True).is_fenced is True and h.end == start + 1
    h.heartbeat(2, epoch)  # unfence again
    reply = h.heartbeat(2, epoch, want_shut_down=True)
    assert (reply.is_fenced, reply.should_shut_down) == (True, True)


def test_session_expiry_fences_one_stale_broker_per_tick_oldest_first():
    h = Harness()
    e2 = h.unfenced_broker(2)
    h.now_ms += 10
    e3 = h.unfenced_broker(3)
    h.now_ms += 10
    e4 = h.unfenced_broker(4)
    h.advance(9000 - 20)  # broker 2 silent exactly 9000 ms: still valid
    assert not h.qc.cluster.brokers[2].fenced
    h.heartbeat(4, e4)
    start = h.end
    h.advance(15)  # 2 and 3 are now stale, 4 is not
    (rec, _), = written(h, start)
    assert (rec.broker_id, rec.broker_epoch, rec.fenced) == (2, e2, 1)
    assert not h.qc.cluster.brokers[3].fenced
    h.tick()
    assert h.qc.cluster.brokers[3].fenced and not h.qc.cluster.brokers[4].fenced
    assert written(h, start)[-1][0].broker_epoch == e3
    end = h.end
    h.tick()
    assert h.end == end  # fenced brokers are not fenced again


def test_frequent_ticks_fence_a_stale_broker_on_time_whatever_they_remember():
    """Ticks after every commit skip the look at each broker until the earliest expiry seen
    by the last look; heartbeats, registrations and fencing in between never make one late."""
    h = Harness()
    e2 = h.unfenced_broker(2)
    for _ in range(50):  # many quiet ticks: the earliest expiry is remembered
        h.advance(100)
    h.heartbeat(2, e2)  # broker 2's session now ends later than remembered
    h.now_ms += 500
    e3 = h.unfenced_broker(3)  # a new session, which ends later still
    fenced_at: dict[int, int] = {}
    for _ in range(300):
        h.advance(100)
        for b in (2, 3):
            if b not in fenced_at and h.qc.cluster.brokers[b].fenced:
                fenced_at[b] = h.now_ms
    contact = {b: h.qc.cluster.heartbeats.brokers[b].last_contact_ms for b in (2, 3)}
    for b in (2, 3):  # fenced at the first tick past contact + 9000 ms, not one later
        assert contact[b] + 9000 < fenced_at[b] <= contact[b] + 9000 + 100, (b, fenced_at)
    assert e3 != e2


def test_heartbeats_keep_the_session_alive():
    h = Harness()
    epoch = h.unfenced_broker(2)
    for _ in range(20):
        h.advance(2000)
        h.heartbeat(2, epoch)
    assert not h.qc.cluster.brokers[2].fenced


def test_activation_gives_unfenced_brokers_a_fresh_session():
    h = Harness()
    h.unfenced_broker(2)
    h.now_ms += 60_000
    h.restart()  # the tick at activation must not fence it
    assert not h.qc.cluster.brokers[2].fenced
    h.advance(9001)
    assert h.qc.cluster.brokers[2].fenced


def _with_partition(h: Harness, leader: int, isr: list[int]) -> uuid.UUID:
    topic_id = uuid.uuid4()
    h.qc.replay(TopicRecord(name="t", topic_id=topic_id), 0, h.end)
    h.qc.replay(PartitionRecord(partition_id=0, topic_id=topic_id, replicas=isr, isr=isr,
                                leader=leader, leader_epoch=0, partition_epoch=0), 0, h.end)
    return topic_id


def test_controlled_shutdown_moves_leaders_then_waits_for_the_others_to_catch_up():
    h = Harness()
    e2, e3 = h.unfenced_broker(2), h.unfenced_broker(3)
    _with_partition(h, leader=2, isr=[2, 3])
    start = h.end
    reply = h.heartbeat(2, e2, want_shut_down=True)
    assert (reply.is_fenced, reply.should_shut_down) == (False, False)
    (cs, v1), (move, v0) = written(h, start)
    assert (cs.API_KEY, v1, cs.in_controlled_shutdown, cs.fenced) == (17, 1, 1, 0)
    assert (move.API_KEY, move.leader, move.isr) == (5, 3, [3])
    part = next(h.qc.replication.partitions())
    assert (part.leader, part.leader_epoch, part.isr) == (3, 1, [3])
    batch_end = h.end - 1
    h.heartbeat(3, e3, offset=batch_end - 1)  # broker 3 has not seen the move yet
    still = h.heartbeat(2, e2, want_shut_down=True)
    assert (still.is_fenced, still.should_shut_down) == (False, False)
    h.heartbeat(3, e3, offset=batch_end)
    done = h.heartbeat(2, e2, want_shut_down=True)
    assert (done.is_fenced, done.should_shut_down) == (True, True)


def test_fencing_removes_the_broker_from_isrs_and_unfencing_elects_it():
    h = Harness()
    e2 = h.unfenced_broker(2)
    _with_partition(h, leader=2, isr=[2])
    start = h.end
    h.heartbeat(2, e2, want_fence=True)
    (change, _), (fence, _) = written(h, start)
    assert (change.leader, change.isr) == (-1, None)  # the last ISR member stays
    assert fence.fenced == 1
    start = h.end
    h.heartbeat(2, e2)
    (unfence, _), (elect, _) = written(h, start)
    assert unfence.fenced == -1 and elect.leader == 2
    assert next(h.qc.replication.partitions()).leader_epoch == 2


def test_new_incarnation_cleans_up_and_its_epoch_is_the_first_record():
    h = Harness()
    h.unfenced_broker(2)
    h.unfenced_broker(3)
    _with_partition(h, leader=2, isr=[2, 3])
    h.advance(9001)
    h.tick()
    h.heartbeat(3, h.qc.cluster.brokers[3].epoch)
    # broker 2 was session-fenced (left the ISR); make its ISR membership come back
    # as an unclean restart would find it, then re-register.
    part = next(h.qc.replication.partitions())
    h.qc.replay(PartitionChangeRecord(partition_id=0, topic_id=part.topic_id, isr=[2, 3],
                                      leader=2), 0, h.end)
    start = h.end
    reply = h.register(2)
    records = written(h, start)
    assert [r.API_KEY for r, _ in records] == [5, 0]
    assert reply.broker_epoch == start and records[1][0].broker_epoch == start


def test_unregister():
    h = Harness()
    r = h.handle(UnregisterBrokerRequest(broker_id=9), 0)
    assert r.error_code == ErrorCode.BROKER_ID_NOT_REGISTERED and r.error_message
    epoch = h.unfenced_broker(2)
    start = h.end
    assert h.handle(UnregisterBrokerRequest(broker_id=2), 0).error_code == ErrorCode.NONE
    (rec, _), = written(h, start)
    assert (rec.API_KEY, rec.broker_id, rec.broker_epoch) == (1, 2, epoch)
    assert h.heartbeat(2, epoch).error_code == ErrorCode.STALE_BROKER_EPOCH
    assert h.allocate(2, epoch).error_code == ErrorCode.STALE_BROKER_EPOCH


def test_kafka_41_broker_features_register():
    h = Harness()
    assert h.register(2, features=KAFKA_41_FEATURES).error_code == ErrorCode.NONE


@pytest.mark.parametrize("others", [0, 2])
def test_a_controlled_shutdown_counts_from_the_last_record_of_its_batch(others: int) -> None:
    """Alone (the single-record path of `apply`) or with records after it, a registration
    change into controlled shutdown is seen once its whole batch is: at the last offset."""
    h = Harness()
    e2 = h.unfenced_broker(2)
    start = h.end
    h.write(ControllerResult(None, [
        (BrokerRegistrationChangeRecord(broker_id=2, broker_epoch=e2, fenced=0,
                                        in_controlled_shutdown=1), 1),
        *[(NoOpRecord(), 0)] * others]))
    beat = h.qc.cluster.heartbeats.state(2, h.now_ms)
    assert beat.controlled_shutdown_offset == start + others
