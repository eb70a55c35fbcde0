"""KIP-730 producer-id blocks and this node's own blocks, against the control logic directly."""

from __future__ import annotations

import pytest
from kraftpy.controller.cluster_control import ReplayError
from kraftpy.controller.producer_id_control import INT64_MAX
from kraftpy.controller.settings import AdvertisedEndpoint
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.metadata_frame import decode_metadata_record, encode_metadata_record
from kraftpy.protocol.records.producer_ids_record import ProducerIdsRecord
from support.controller_harness import Harness, settings


def test_blocks_are_contiguous_disjoint_and_recorded():
    h = Harness()
    e2, e3 = h.unfenced_broker(2), h.unfenced_broker(3)
    starts = []
    for broker, epoch in [(2, e2), (3, e3), (2, e2), (3, e3)]:
        before = h.end
        reply = h.allocate(broker, epoch)
        assert reply.error_code == ErrorCode.NONE and reply.producer_id_len == 1000
        starts.append(reply.producer_id_start)
        record, version = h.qc.snapshot_records()[-1]
        assert version == 0 and record.next_producer_id == reply.producer_id_start + 1000
        written, _ = decode_metadata_record(h.records[before - h.snapshot_end][0])
        assert (written.broker_id, written.broker_epoch) == (broker, epoch)
    assert starts == [0, 1000, 2000, 3000]


def test_first_block_matches_kafka_record_bytes():
    # Kafka's first allocation for broker 1 at epoch 6 writes exactly these bytes.
    h = Harness(settings=settings(node_id=9))
    epoch = h.unfenced_broker(1)
    result = h.qc.handle(AllocateProducerIdsRequest(broker_id=1, broker_epoch=epoch), 0,
                         now_ms=h.now_ms, next_offset=h.end)
    (record, version), = result.records
    assert encode_metadata_record(record, version).hex() == (
        "010f00" "00000001" + f"{epoch:016x}" + "00000000000003e8" "00")


@pytest.mark.parametrize("broker,epoch", [(77, 1), (77, -1), (2, 0), (2, 99)])
def test_stale_or_unknown_broker_gets_stale_broker_epoch(broker, epoch):
    h = Harness()
    real = h.unfenced_broker(2)
    assert epoch != real
    end = h.end
    reply = h.allocate(broker, epoch)
    assert reply.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert (reply.producer_id_start, reply.producer_id_len) == (0, 0)
    assert h.end == end  # nothing written


def test_fenced_broker_with_current_epoch_still_allocates():
    # Kafka checks only the epoch, not the fencing state.
    h = Harness()
    epoch = h.register(2).broker_epoch
    assert h.allocate(2, epoch).error_code == ErrorCode.NONE


def test_exhaustion_near_int64_limit_is_unknown_server_error_never_a_wrap():
    h = Harness()
    epoch = h.unfenced_broker(2)
    h.qc.replay(ProducerIdsRecord(broker_id=2, broker_epoch=epoch,
                                  next_producer_id=INT64_MAX - 1999), 0, h.end)
    ok = h.allocate(2, epoch)
    assert ok.error_code == ErrorCode.NONE and ok.producer_id_start == INT64_MAX - 1999
    end = h.end
    bad = h.allocate(2, epoch)
    assert bad.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    assert h.end == end
    assert h.qc.producer_ids.next_producer_id == INT64_MAX - 999


@pytest.mark.parametrize("next_id", [0, 999, 1000])
def test_replay_refuses_a_non_increasing_next_producer_id(next_id):
    h = Harness()
    epoch = h.unfenced_broker(2)
    h.allocate(2, epoch)  # counter now 1000
    with pytest.raises(ReplayError):
        h.qc.replay(ProducerIdsRecord(broker_id=2, broker_epoch=epoch,
                                      next_producer_id=next_id), 0, h.end)
    assert h.qc.producer_ids.next_producer_id == 1000


def test_replay_refuses_zero_on_an_empty_counter():
    h = Harness()
    with pytest.raises(ReplayError):
        h.qc.replay(ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=0), 0, 5)


def test_snapshot_carries_the_counter_with_broker_minus_one():
    h = Harness()
    assert not [r for r, _ in h.qc.snapshot_records() if r.API_KEY == 15]
    epoch = h.unfenced_broker(2)
    h.allocate(2, epoch)
    (rec,) = [r for r, _ in h.qc.snapshot_records() if r.API_KEY == 15]
    assert (rec.broker_id, rec.broker_epoch, rec.next_producer_id) == (-1, -1, 1000)


def test_quota_throttles_with_throttle_time_and_refills():
    h = Harness(settings=settings(allocate_producer_ids_quota=2.0, quota_window_num=1,
                                  quota_window_size_seconds=1))
    epoch = h.unfenced_broker(2)
    other = h.unfenced_broker(3)
    assert [h.allocate(2, epoch).error_code for _ in range(2)] == [0, 0]
    end = h.end
    throttled = h.allocate(2, epoch)
    assert throttled.error_code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    assert throttled.throttle_time_ms == 500
    assert h.end == end
    assert h.allocate(3, other).error_code == ErrorCode.NONE  # quotas are per broker
    h.now_ms += 499
    assert h.allocate(2, epoch).throttle_time_ms == 1
    h.now_ms += 1
    assert h.allocate(2, epoch).error_code == ErrorCode.NONE


# --- this node's own blocks ----------------------------------------------------------------

def test_no_block_yet_is_coordinator_load_in_progress_never_not_coordinator():
    h = Harness()
    result = h.result(InitProducerIdRequest(transactional_id=None,
                                            transaction_timeout_ms=1000), 0)
    assert result.response.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert (result.response.producer_id, result.response.producer_epoch) == (-1, -1)
    assert result.respond_before_commit
    assert h.init().error_code == ErrorCode.NONE  # the claim rode along and was committed


def test_block_is_usable_only_once_its_record_is_committed():
    h = Harness(auto_commit=False)
    h.commit()
    h.tick()  # claims a block; not committed
    assert h.init().error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    h.commit()
    assert h.init().producer_id == 0


def test_prefetch_at_ninety_percent_means_no_request_waits():
    h = Harness(settings=settings(producer_id_block_size=10))
    h.ready_ids()
    ids = [h.init().producer_id for _ in range(35)]
    assert ids == list(range(35))  # blocks 0-9, 10-19, ... each claimed before the last ran out


def test_a_burst_that_outruns_the_claim_fsync_makes_the_node_keep_blocks_in_reserve():
    """Between two commits (one fsync round) a burst of 25 requests arrives. With Kafka's 90%
    prefetch alone a 10-id block cannot cover it; each round that ran dry makes the node keep
    a larger reserve, until no round runs dry. Every id handed out is distinct."""
    h = Harness(settings=settings(producer_id_block_size=10), auto_commit=False)
    h.commit()
    h.tick()
    h.commit()
    h.tick()  # the loop's tick after a commit: claims due blocks
    dry_rounds, ids = [], []
    for _ in range(12):
        replies = [h.init() for _ in range(25)]
        dry_rounds.append(sum(r.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
                              for r in replies))
        assert all(r.error_code in (ErrorCode.NONE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
                   for r in replies)
        ids += [r.producer_id for r in replies if r.error_code == ErrorCode.NONE]
        h.commit()
        h.tick()
    assert dry_rounds[0] > 0  # the first burst finds the 90% rule too late
    assert dry_rounds[-4:] == [0, 0, 0, 0], dry_rounds
    assert len(set(ids)) == len(ids)
    reserve = h.qc.own_ids
    assert reserve.low_water <= reserve.max_low_water


def test_the_reserve_grows_once_per_claim_and_is_capped():
    from kraftpy.controller.producer_id_manager import ProducerIdManager

    m = ProducerIdManager(1, 10, 0.9, max_reserve_blocks=5)
    assert m.low_water == 1  # Kafka's rule: claim once 90% of a block is used
    offset = first = 0
    marks = []
    for _ in range(6):
        m.claimed(offset)
        m.on_replay(ProducerIdsRecord(broker_id=1, broker_epoch=-1,
                                      next_producer_id=first + 10), offset)
        while m.next_id() is not None:  # use every id while the claim awaits its fsync
            pass
        before = m.low_water
        assert m.next_id() is None and m.low_water == before  # once per claim
        marks.append(before)
        m.on_committed(offset + 1)
        offset, first = offset + 1, first + 10
    assert marks == [11, 22, 44, 50, 50, 50]  # a block more, then doubled, capped at 5 blocks


def test_idempotent_ids_never_fall_inside_a_broker_block():
    h = Harness(settings=settings(producer_id_block_size=10))
    h.ready_ids()
    epoch = h.unfenced_broker(2)
    mine, theirs = [], []
    for i in range(60):
        if i % 7 == 0:
            r = h.allocate(2, epoch)
            theirs.append(range(r.producer_id_start, r.producer_id_start + r.producer_id_len))
        mine.append(h.init().producer_id)
    assert len(set(mine)) == len(mine)
    assert not any(pid in block for pid in mine for block in theirs)


def test_restart_takes_a_fresh_block_and_never_reuses_an_id():
    h = Harness()
    h.ready_ids()
    before = {h.init().producer_id for _ in range(5)}
    h.restart()
    h.ready_ids()
    after = h.init().producer_id
    assert after >= 1000 and after not in before


def _records(h: Harness) -> list:
    return [decode_metadata_record(value)[0] for value, _ in h.records]


def test_a_controller_only_node_claims_no_block_of_its_own():
    """No client listener, no InitProducerId to answer: no ProducerIdsRecord of its own, and
    the brokers' blocks start at 0."""
    controller_only = settings(advertised_listeners=(AdvertisedEndpoint("CONTROLLER", "h", 9093),),
                               controller_listener_names=("CONTROLLER",))
    h = Harness(settings=controller_only)
    for _ in range(5):
        h.advance(1000)
    assert not any(isinstance(r, ProducerIdsRecord) for r in _records(h))
    epoch = h.register(2).broker_epoch
    granted = h.allocate(2, epoch)
    assert (granted.error_code, granted.producer_id_start) == (ErrorCode.NONE, 0)
    combined = settings(advertised_listeners=(AdvertisedEndpoint("CONTROLLER", "h", 9093),
                                              AdvertisedEndpoint("PLAINTEXT", "h", 9092)),
                        controller_listener_names=("CONTROLLER",))
    h = Harness(settings=combined)
    h.advance(1000)
    assert [r.broker_id for r in _records(h) if isinstance(r, ProducerIdsRecord)] == [1]
