"""Properties over random operation sequences, simulated crashes and snapshots included."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraftpy.controller.quorum_controller import QuorumController
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.metadata_frame import decode_metadata_record
from support.controller_harness import Harness
from support.controller_harness import settings as controller_settings

OPS = st.lists(st.one_of(
    st.tuples(st.just("register"), st.integers(2, 4)),
    st.tuples(st.just("heartbeat"), st.integers(2, 4)),
    st.tuples(st.just("shutdown"), st.integers(2, 4)),
    st.tuples(st.just("allocate"), st.integers(2, 4)),
    st.tuples(st.just("init"), st.none()),
    st.tuples(st.just("init"), st.sampled_from(["a", "b"])),
    st.tuples(st.just("advance"), st.integers(1, 12_000)),
    st.tuples(st.just("tick"), st.none()),
    st.tuples(st.just("uncommitted"), st.booleans()),
    st.tuples(st.just("crash"), st.booleans()),
), max_size=60)

FAST = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


def stable(qc: QuorumController) -> dict:
    image = qc.describe()
    for b in image["brokers"]:
        b.pop("last_contact_ms")
    for key in ("log_end_offset", "features_epoch", "high_watermark", "txn_high_watermark",
                "leader_epoch"):
        image.pop(key)
    image["producer_ids"] = image["producer_ids"]["next_producer_id"]
    return image


class Run:
    """Applies operations; records only what a client would have been told."""

    def __init__(self) -> None:
        self.h = Harness(settings=controller_settings(producer_id_block_size=5))
        self.h.ready_ids()
        self.ids: list[int] = []  # producer ids acknowledged to clients
        self.blocks: list[range] = []  # blocks acknowledged to brokers
        self.epochs: dict[str, tuple[int, int]] = {}

    def acknowledged(self, result) -> bool:
        return result.respond_before_commit or self.h.auto_commit

    def apply(self, op: str, arg) -> None:
        h = self.h
        if op == "register":
            h.register(arg)
        elif op in ("heartbeat", "shutdown"):
            reg = h.qc.cluster.brokers.get(arg)
            if reg is not None:
                reply = h.heartbeat(arg, reg.epoch, want_shut_down=op == "shutdown")
                after = h.qc.cluster.brokers[arg]  # the answer is what the records made durable
                assert reply.error_code == 0 and reply.is_fenced == after.fenced
                assert reply.is_caught_up
                assert not reply.should_shut_down or after.fenced
        elif op == "allocate":
            reg = h.qc.cluster.brokers.get(arg)
            if reg is not None:
                from kraftpy.protocol.messages.allocate_producer_ids_request import (
                    AllocateProducerIdsRequest,
                )
                result = h.result(AllocateProducerIdsRequest(broker_id=arg,
                                                             broker_epoch=reg.epoch), 0)
                r = result.response
                if r.error_code == 0 and self.acknowledged(result):
                    self.blocks.append(range(r.producer_id_start,
                                             r.producer_id_start + r.producer_id_len))
        elif op == "init":
            from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
            pid, epoch = self.epochs.get(arg, (-1, -1)) if arg else (-1, -1)
            result = h.result(InitProducerIdRequest(
                transactional_id=arg, transaction_timeout_ms=1000, producer_id=pid,
                producer_epoch=epoch), 4)
            r = result.response
            if r.error_code == ErrorCode.NONE and self.acknowledged(result):
                if arg is None or r.producer_id != pid:
                    self.ids.append(r.producer_id)
                if arg is not None:
                    old = self.epochs.get(arg)
                    if old is not None and old[0] == r.producer_id:
                        assert r.producer_epoch == old[1] + 1
                    self.epochs[arg] = (r.producer_id, r.producer_epoch)
            else:
                assert r.error_code in (ErrorCode.NONE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
                                        ErrorCode.CONCURRENT_TRANSACTIONS,
                                        ErrorCode.PRODUCER_FENCED), r
                if r.error_code == ErrorCode.PRODUCER_FENCED:
                    self.epochs.pop(arg, None)  # a lost bump: start over as a new instance
        elif op == "advance":
            h.advance(arg)
        elif op == "tick":
            h.tick()
        elif op == "uncommitted":
            h.auto_commit = not arg
            if h.auto_commit:
                h.commit()
        elif op == "crash":
            h.auto_commit = True
            h.restart(use_snapshot=arg)

    def check(self) -> None:
        assert len(set(self.ids)) == len(self.ids), "a producer id was handed out twice"
        for pid in self.ids:
            assert not any(pid in block for block in self.blocks), pid
        starts = sorted(b.start for b in self.blocks)
        assert len(set(starts)) == len(starts)


@FAST
@given(OPS)
def test_ids_are_never_handed_out_twice_across_crashes(ops):
    run = Run()
    for op, arg in ops:
        run.apply(op, arg)
        run.check()


@FAST
@given(OPS, st.integers(0, 60))
def test_snapshot_plus_suffix_equals_full_replay(ops, cut):
    run = Run()
    for i, (op, arg) in enumerate(ops):
        if op != "crash":
            run.apply(op, arg)
        if i == cut:
            snap_at = run.h.end
            snapshot = list(run.h.qc.snapshot_records())
    h = run.h
    full = QuorumController(h.settings)
    decoded = [(decode_metadata_record(v), off) for v, off in h.records]
    for (record, version), offset in decoded:
        full.replay(record, version, offset)
    if cut >= len(ops):
        snap_at, snapshot = 0, []
    partial = QuorumController(h.settings)
    for record, version in snapshot:
        partial.replay(record, version, snap_at - 1)
    for (record, version), offset in decoded:
        if offset >= snap_at:
            partial.replay(record, version, offset)
    assert stable(partial) == stable(full)
    assert stable(full) == {**stable(h.qc), "transactions": []}
