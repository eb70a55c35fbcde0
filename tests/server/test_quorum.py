"""The quorum's release rule and failure rule, with a scripted controller and storage."""

from __future__ import annotations

import threading

import pytest
import trio
from kraftpy.controller.quorum import NodeStopped, Quorum
from kraftpy.controller.result import ControllerResult


class Controller:
    def __init__(self) -> None:
        self.applied: list[tuple[int, list]] = []
        self.committed: list[tuple[int, int]] = []
        self.ticks = 0

    def handle(self, request, api_version, *, now_ms, next_offset, listener=None):
        kind, n = request
        records = [("rec", 0)] * n
        return ControllerResult(response=(kind, next_offset), records=records,
                                respond_before_commit=(kind == "early"))

    def tick(self, *, now_ms, next_offset):
        self.ticks += 1
        return ControllerResult()

    def apply(self, result, *, offset, txn_offset):
        self.applied.append((offset, result.records))

    def on_committed(self, hwm, txn_hwm):
        self.committed.append((hwm, txn_hwm))


class Storage:
    def __init__(self) -> None:
        self.end = 0
        self.durable = 0
        self.gate = threading.Event()
        self.gate.set()
        self.fail = False
        self.snapshots_at: list[int] = []

    def metadata_end_offset(self):
        return self.end

    def txn_end_offset(self):
        return 0

    def append(self, result, now_ms):
        base = self.end
        self.end += len(result.records)
        return base, 0

    def flush(self):
        self.gate.wait(10)
        if self.fail:
            raise OSError(5, "Input/output error")
        self.durable = self.end
        return self.durable, 0

    def after_commit(self, controller, now_ms):
        self.snapshots_at.append(self.durable)


async def test_answers_wait_for_the_fsync_that_covers_them() -> None:
    controller, storage = Controller(), Storage()
    quorum = Quorum(controller, storage)
    storage.gate.clear()
    got: dict[str, object] = {}
    async with trio.open_nursery() as nursery:
        await nursery.start(quorum.run)

        async def ask(name, request):
            got[name] = await quorum.submit(request, 0)

        for name, request in (("write", ("late", 2)), ("read", ("late", 0)),
                              ("early", ("early", 1))):
            nursery.start_soon(ask, name, request)
            await trio.sleep(0.01)
        await trio.sleep(0.3)
        # The early answer is out; the write and the read after it wait for the fsync.
        assert set(got) == {"early"}
        assert controller.applied and controller.applied[0][0] == 0
        storage.gate.set()
        await trio.sleep(0.3)
        assert got["write"] == ("late", 0) and got["read"] == ("late", 2)
        assert controller.committed[-1][0] == 3
        assert storage.snapshots_at and storage.snapshots_at[-1] == 3
        quorum.stop()
    with pytest.raises(NodeStopped):
        await quorum.submit(("late", 0), 0)


async def test_a_failed_fsync_stops_the_node_and_fails_the_waiters() -> None:
    controller, storage = Controller(), Storage()
    quorum = Quorum(controller, storage)
    storage.fail = True
    errors: list[BaseException] = []

    async def ask():
        try:
            await quorum.submit(("late", 1), 0)
        except NodeStopped as exc:
            errors.append(exc)

    with pytest.raises(BaseExceptionGroup) as failure:
        async with trio.open_nursery() as nursery:
            await nursery.start(quorum.run)
            nursery.start_soon(ask)
            await trio.sleep(1)
    assert failure.group_contains(OSError)
    assert len(errors) == 1
    with pytest.raises(NodeStopped):
        await quorum.submit(("early", 0), 0)


async def test_ticks_run_while_idle() -> None:
    controller, storage = Controller(), Storage()
    quorum = Quorum(controller, storage)
    async with trio.open_nursery() as nursery:
        await nursery.start(quorum.run)
        await trio.sleep(0.35)
        quorum.stop()
    assert controller.ticks >= 3


async def test_concurrent_waiters_share_fsyncs_and_are_answered_after_theirs() -> None:
    controller, storage = Controller(), Storage()
    quorum = Quorum(controller, storage)
    durable_ends: list[int] = []
    flush = storage.flush

    def recording_flush() -> tuple[int, int]:
        durable_ends.append(flush()[0])
        return durable_ends[-1], 0

    storage.flush = recording_flush  # type: ignore[method-assign]
    acked: list[int] = []

    async def writer() -> None:
        for _ in range(20):
            _, offset = await quorum.submit(("late", 1), 0)
            # Answered only after an fsync that covered this record.
            assert any(end > offset for end in durable_ends)
            acked.append(offset)

    async with trio.open_nursery() as nursery:
        await nursery.start(quorum.run)
        async with trio.open_nursery() as writers:
            for _ in range(16):
                writers.start_soon(writer)
        quorum.stop()
    assert sorted(acked) == list(range(320))
    assert quorum.fsyncs == len(durable_ends) < 320 / 2  # shared
    assert storage.durable == 320 and quorum.hwm == (320, 0)


async def test_a_failed_fsync_fails_every_waiter() -> None:
    controller, storage = Controller(), Storage()
    quorum = Quorum(controller, storage)
    storage.gate.clear()
    storage.fail = True
    errors: list[BaseException] = []

    async def ask() -> None:
        try:
            await quorum.submit(("late", 1), 0)
        except NodeStopped as exc:
            errors.append(exc)

    with pytest.raises(BaseExceptionGroup) as failure:
        async with trio.open_nursery() as nursery:
            await nursery.start(quorum.run)
            for _ in range(4):
                nursery.start_soon(ask)
            await trio.sleep(0.05)  # all four appended and waiting on the same fsync
            storage.gate.set()
            await trio.sleep(1)
    assert failure.group_contains(OSError)
    assert len(errors) == 4 and quorum.hwm == (0, 0) and storage.durable == 0
    with pytest.raises(NodeStopped):
        await quorum.submit(("early", 0), 0)


class Raising(Controller):
    def handle(self, request, api_version, *, now_ms, next_offset, listener=None):
        if request[0] == "boom":
            raise ValueError("no such thing")
        return super().handle(request, api_version, now_ms=now_ms, next_offset=next_offset)


async def _round_in_flight(quorum: Quorum, storage: Storage) -> None:
    """Start a round and hold its fsync: the requests after this one queue for `_drain`."""
    storage.gate.clear()
    first = trio.Event()

    async def ask() -> None:
        first.set()
        await quorum.submit(("late", 1), 0)

    quorum._background.start_soon(ask)
    await first.wait()
    with trio.fail_after(5):
        while not quorum._in_flight:
            await trio.sleep(0.001)


async def test_requests_during_a_round_are_handled_in_arrival_order_in_one_pass() -> None:
    controller, storage = Controller(), Storage()
    quorum = Quorum(controller, storage)
    got: list[tuple[str, int]] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(quorum.run)
        await _round_in_flight(quorum, storage)
        drains = 0
        drain = quorum._drain

        def counting_drain() -> None:
            nonlocal drains
            drains += 1
            drain()

        quorum._drain = counting_drain  # type: ignore[method-assign]

        arrived: list[str] = []

        async def ask(name: str) -> None:
            arrived.append(name)  # no checkpoint between this and the submit
            got.append(await quorum.submit((name, 1), 0))

        for name in ("b", "c", "d", "e"):
            nursery.start_soon(ask, name)
        await trio.sleep(0.05)
        assert got == [] and len(quorum._queue) == 0 and drains == 1  # handled, not released
        assert [offset for offset, _ in controller.applied] == [0, 1, 2, 3, 4]
        storage.gate.set()  # round 1 (the first request) ends; round 2 covers the four
        with trio.fail_after(5):
            while len(got) < 4:
                await trio.sleep(0.001)
        assert sorted(got) == sorted((name, offset) for offset, name in enumerate(arrived, 1))
        quorum.stop()


async def test_a_queued_request_cancelled_before_its_turn_never_happens() -> None:
    controller, storage = Controller(), Storage()
    quorum = Quorum(controller, storage)
    async with trio.open_nursery() as nursery:
        await nursery.start(quorum.run)
        await _round_in_flight(quorum, storage)
        applied = len(controller.applied)
        with trio.CancelScope() as scope:
            scope.cancel()
            await quorum.submit(("gone", 1), 0)  # queued, then cancelled at its checkpoint
        assert scope.cancelled_caught
        await trio.sleep(0.05)
        assert len(controller.applied) == applied and storage.end == 1  # never handled
        storage.gate.set()
        quorum.stop()


async def test_a_queued_request_that_fails_fails_only_its_caller_and_early_answers_go_at_once(
        ) -> None:
    controller, storage = Raising(), Storage()
    quorum = Quorum(controller, storage)
    got: dict[str, object] = {}

    async def ask(name: str, request: tuple[str, int]) -> None:
        try:
            got[name] = await quorum.submit(request, 0)
        except ValueError as exc:
            got[name] = exc

    async with trio.open_nursery() as nursery:
        await nursery.start(quorum.run)
        await _round_in_flight(quorum, storage)
        nursery.start_soon(ask, "boom", ("boom", 1))
        nursery.start_soon(ask, "early", ("early", 0))
        nursery.start_soon(ask, "late", ("late", 1))
        await trio.sleep(0.05)
        # With the round still held: the error and the early answer are out, the write waits.
        assert isinstance(got.pop("boom"), ValueError)
        assert list(got) == ["early"] and got["early"][0] == "early"
        storage.gate.set()
        with trio.fail_after(5):
            while "late" not in got:
                await trio.sleep(0.001)
        assert got["late"][0] == "late"
        quorum.stop()


def test_overlap_starts_above_one_and_a_half_fsyncs_of_loop_time_and_ends_below_one() -> None:
    quorum = Quorum(Controller(), Storage())
    quorum._cpu_per_answer_s, quorum._fsync_s = 10e-6, 200e-6
    quorum._idle_per_round_s = 100e-6  # the loop waits out half of each fsync
    assert [quorum._overlap(n) for n in (8, 29, 31, 25, 21, 19, 35)] == \
        [False, False, True, True, True, False, True]


def test_a_loop_busy_with_other_work_keeps_its_writers_in_one_round() -> None:
    quorum = Quorum(Controller(), Storage())
    quorum._cpu_per_answer_s, quorum._fsync_s = 10e-6, 200e-6
    quorum._idle_per_round_s = 20e-6  # under a quarter of an fsync: little to fill
    assert [quorum._overlap(n) for n in (31, 64, 200)] == [False, False, False]
    quorum._idle_per_round_s = 60e-6
    assert quorum._overlap(31)


async def test_requests_that_do_not_usually_write_are_handled_at_once_even_during_a_round(
        ) -> None:
    class Choosy(Controller):
        handled: list[str] = []

        def usually_writes(self, request):
            return request[0] != "read"

        def handle(self, request, api_version, *, now_ms, next_offset, listener=None):
            self.handled.append(request[0])
            return super().handle(request, api_version, now_ms=now_ms, next_offset=next_offset)

    controller, storage = Choosy(), Storage()
    quorum = Quorum(controller, storage)
    async with trio.open_nursery() as nursery:
        await nursery.start(quorum.run)
        await _round_in_flight(quorum, storage)
        queued: list[str] = []
        drain = quorum._drain

        def recording_drain() -> None:
            queued.extend(entry[3][0] for entry in quorum._queue)
            drain()

        quorum._drain = recording_drain  # type: ignore[method-assign]
        nursery.start_soon(quorum.submit, ("read", 0), 0)
        nursery.start_soon(quorum.submit, ("late", 1), 0)
        await trio.sleep(0.05)
        assert quorum._in_flight  # the round is still held
        assert "read" in controller.handled and queued == ["late"]
        storage.gate.set()
        quorum.stop()


def test_which_requests_usually_write() -> None:
    from kraftpy.controller.quorum_controller import QuorumController
    from kraftpy.controller.settings import ControllerSettings
    from kraftpy.protocol.messages.allocate_producer_ids_request import (
        AllocateProducerIdsRequest,
    )
    from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
    from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest

    controller = QuorumController(ControllerSettings(cluster_id="c"))
    assert controller.usually_writes(AllocateProducerIdsRequest(broker_id=1, broker_epoch=2))
    assert controller.usually_writes(InitProducerIdRequest(transactional_id="t"))
    assert not controller.usually_writes(InitProducerIdRequest(transactional_id=None))
    assert not controller.usually_writes(BrokerHeartbeatRequest(broker_id=1))
