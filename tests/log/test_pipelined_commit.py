"""Pipelined commit rounds on a real MetadataStorage: an answer waits for a round whose fsync
began after its records were written; a failed round fails every answer not yet released."""

from __future__ import annotations

import errno
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from kraftpy.controller import quorum as quorum_module
from kraftpy.controller.log.storage import (
    FlushRound,
    MetadataStorage,
    PreparedRecords,
    format_storage,
)
from kraftpy.controller.quorum import NodeStopped, Quorum
from kraftpy.controller.result import ControllerResult
from kraftpy.controller.transaction_control import TxnPartition, TxnRecord
from kraftpy.protocol.errors import EncodeError
from kraftpy.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraftpy.protocol.metadata_frame import encode_metadata_record
from kraftpy.protocol.record_batch import iter_record_batches
from kraftpy.protocol.records.config_record import ConfigRecord
from kraftpy.protocol.records.transaction_log_key import TransactionLogKey
from support.quorum_crash_writer import open_node, registration

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


class GatedFsync:
    """FlushRound.fsync that parks each round until the test lets it go, recording what each
    round covered (its metadata ticket's end offset) when its fsync began."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.began: list[int] = []
        self.gates: list[threading.Event] = []
        self.fail_round: int | None = None
        self._lock = threading.Lock()
        real = FlushRound.fsync
        gated = self

        def fsync(flush: FlushRound) -> None:
            with gated._lock:
                index = len(gated.began)
                gated.began.append(flush.metadata.end_offset)
                gate = gated.gate(index)
            assert gate.wait(10), "the test never opened this round"
            if gated.fail_round == index:
                raise OSError(5, "Input/output error")
            real(flush)

        monkeypatch.setattr(FlushRound, "fsync", fsync)

    def gate(self, index: int) -> threading.Event:
        while len(self.gates) <= index:
            self.gates.append(threading.Event())
        return self.gates[index]

    def open(self, index: int) -> None:
        with self._lock:
            self.gate(index).set()


async def _broker(quorum: Quorum, broker_id: int) -> AllocateProducerIdsRequest:
    registered = await quorum.submit(registration(broker_id), 4)
    assert registered.error_code == 0, registered
    beat = await quorum.submit(BrokerHeartbeatRequest(
        broker_id=broker_id, broker_epoch=registered.broker_epoch,
        current_metadata_offset=quorum.storage.metadata_end_offset(),
        want_fence=False, want_shut_down=False), 1)
    assert not beat.is_fenced, beat
    return AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=registered.broker_epoch)


async def _ask(quorum: Quorum, outcomes: dict[str, object], name: str,
               request: AllocateProducerIdsRequest) -> None:
    """Submit, recording the answer or the NodeStopped that came instead."""
    try:
        outcomes[name] = await quorum.submit(request, 0)
    except NodeStopped as exc:
        outcomes[name] = exc


async def _wait_for(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    with trio.fail_after(10):
        while not condition():
            await trio.sleep(0.001)
    assert condition(), what


async def test_an_op_written_after_a_round_began_waits_for_the_next_round(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage, controller = open_node(tmp_path / "data")
    quorum = Quorum(controller, storage, inline_fsync_s=0, fsync_ring=False)  # all in a thread
    answered: dict[str, object] = {}
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(quorum.run)
            first, second = await _broker(quorum, 2), await _broker(quorum, 3)
            gated = GatedFsync(monkeypatch)
            rounds_before = quorum.fsyncs

            async def ask(name: str, request: AllocateProducerIdsRequest) -> None:
                answered[name] = await quorum.submit(request, 0)

            nursery.start_soon(ask, "a", first)
            await _wait_for(lambda: gated.began, "round 1 to reach its fsync")
            a_end = storage.metadata_end_offset()
            assert gated.began == [a_end]  # round 1 covers A's record, and nothing after it
            nursery.start_soon(ask, "b", second)  # appended while round 1 is being fsynced
            await _wait_for(lambda: storage.metadata_end_offset() == a_end + 1, "B's append")
            assert "b" not in answered and "a" not in answered and quorum.hwm[0] < a_end

            gated.open(0)  # round 1 is durable: it releases A only
            await _wait_for(lambda: "a" in answered, "A's answer")
            assert quorum.hwm[0] == a_end and storage.metadata.high_watermark == a_end
            await _wait_for(lambda: len(gated.began) == 2, "round 2 to start at once")
            assert gated.began[1] == a_end + 1
            await trio.sleep(0.05)
            assert "b" not in answered  # B's bytes came after round 1 began

            gated.open(1)
            await _wait_for(lambda: "b" in answered, "B's answer")
            assert quorum.hwm[0] == a_end + 1 and quorum.fsyncs == rounds_before + 2
            a, b = answered["a"], answered["b"]
            assert a.error_code == b.error_code == 0  # type: ignore[attr-defined]
            assert b.producer_id_start == a.producer_id_start + a.producer_id_len  # type: ignore[attr-defined]
            quorum.stop()
    finally:
        storage.close()


async def test_a_failed_round_fails_the_answers_appended_during_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage, controller = open_node(tmp_path / "data")
    quorum = Quorum(controller, storage, inline_fsync_s=0, fsync_ring=False)
    outcomes: dict[str, object] = {}
    with pytest.raises(BaseExceptionGroup) as failure:
        async with trio.open_nursery() as nursery:
            await nursery.start(quorum.run)
            first, second = await _broker(quorum, 2), await _broker(quorum, 3)
            durable = quorum.hwm
            gated = GatedFsync(monkeypatch)
            gated.fail_round = 0

            nursery.start_soon(_ask, quorum, outcomes, "a", first)
            await _wait_for(lambda: gated.began, "round 1 to reach its fsync")
            nursery.start_soon(_ask, quorum, outcomes, "b", second)
            await _wait_for(lambda: storage.metadata_end_offset() > gated.began[0], "B's append")
            gated.open(0)
            await trio.sleep(5)  # the failure ends the nursery well before this
    assert failure.group_contains(OSError)
    assert isinstance(outcomes["a"], NodeStopped) and isinstance(outcomes["b"], NodeStopped)
    assert quorum.hwm == durable and len(gated.began) == 1  # no round after the failed one
    with pytest.raises(NodeStopped):
        await quorum.submit(first, 0)
    storage.close()


async def test_an_idle_loop_fsyncs_on_itself_until_an_fsync_is_slow(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    storage, controller = open_node(tmp_path / "data")
    quorum = Quorum(controller, storage, inline_fsync_s=0.05, fsync_ring=False)
    threads: list[bool] = []  # per round: fsynced on the loop's own thread?
    delays = [0.0, 0.12, 0.0, 0.0]
    real = FlushRound.fsync

    def fsync(flush: FlushRound) -> None:
        threads.append(threading.current_thread() is threading.main_thread())
        time.sleep(delays[min(len(threads) - 1, len(delays) - 1)])
        real(flush)

    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(quorum.run)
            request = await _broker(quorum, 2)
            monkeypatch.setattr(FlushRound, "fsync", fsync)
            for _ in range(4):  # one writer: nothing else could run while it waits
                reply = await quorum.submit(request, 0)
                assert reply.error_code == 0 and quorum.hwm[0] == storage.metadata_end_offset()
            # Quick fsyncs run on the loop; after the slow second one, the third goes to a
            # worker thread; once that is quick again, the fourth is back on the loop.
            assert threads == [True, True, False, True]
            quorum.stop()
    finally:
        storage.close()


class ScriptedRing:
    """FsyncRing as the quorum sees it, whose fsyncs end when the test says (and fail with
    the errno it gives): what a real ring does, at the moments a test needs."""

    capacity = 8

    def __init__(self) -> None:
        self.event_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.rounds: list[tuple[list[int], int]] = []  # (files, user_data) per submit
        self._done: list[tuple[int, int]] = []
        self.hold = False  # until set, every round completes as soon as it is submitted
        self.refuse: OSError | None = None  # set: every submit raises it

    def fileno(self) -> int:
        return self.event_fd

    def submit(self, files: list[int], user_data: int) -> None:
        if self.refuse is not None:
            raise self.refuse
        for fd in files:
            os.fstat(fd)  # the round's own descriptors, open while it is in flight
        self.rounds.append((list(files), user_data))
        if not self.hold:
            self.complete(len(self.rounds) - 1)

    def complete(self, index: int, result: int = 0, *, wake: bool = True) -> None:
        """End a round; with `wake` False only a poll of `ready` sees it (as a completion
        posted while the loop is busy draining)."""
        files, user_data = self.rounds[index]
        self._done += [(user_data, result)] * len(files)
        if wake:
            os.eventfd_write(self.event_fd, 1)

    def ready(self) -> bool:
        return bool(self._done)

    def reap(self) -> list[tuple[int, int]]:
        done, self._done = self._done, []
        try:  # readable only while completions wait, as a ring's descriptor
            os.eventfd_read(self.event_fd)
        except BlockingIOError:
            pass
        return done

    def close(self) -> None:
        os.close(self.event_fd)


@pytest.fixture
def scripted_ring(monkeypatch: pytest.MonkeyPatch) -> ScriptedRing:
    ring = ScriptedRing()
    monkeypatch.setattr(quorum_module.FsyncRing, "open", staticmethod(lambda: ring))
    return ring


async def test_a_ring_round_releases_exactly_what_was_written_before_it_began(
        tmp_path: Path, scripted_ring: ScriptedRing) -> None:
    storage, controller = open_node(tmp_path / "data")
    quorum = Quorum(controller, storage, inline_fsync_s=0)  # never on the loop: the ring
    answered: dict[str, object] = {}
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(quorum.run)
            first = await _broker(quorum, 2)
            rounds_before, scripted_ring.hold = len(scripted_ring.rounds), True

            async def ask(name: str, request: AllocateProducerIdsRequest) -> None:
                answered[name] = await quorum.submit(request, 0)

            nursery.start_soon(ask, "a", first)
            await _wait_for(lambda: len(scripted_ring.rounds) > rounds_before, "round 1")
            a_end = storage.metadata_end_offset()
            nursery.start_soon(ask, "b", first)  # queued behind round 1, handled during it
            await _wait_for(lambda: storage.metadata_end_offset() == a_end + 1, "B's append")
            await trio.sleep(0.05)
            assert answered == {} and quorum.hwm[0] < a_end

            scripted_ring.complete(rounds_before)  # round 1 is durable: A only
            await _wait_for(lambda: "a" in answered, "A's answer")
            assert quorum.hwm[0] == a_end and storage.metadata.high_watermark == a_end
            await _wait_for(lambda: len(scripted_ring.rounds) == rounds_before + 2, "round 2")
            await trio.sleep(0.05)
            assert "b" not in answered
            scripted_ring.complete(rounds_before + 1)
            await _wait_for(lambda: "b" in answered, "B's answer")
            assert quorum.hwm[0] == a_end + 1
            a, b = answered["a"], answered["b"]
            assert b.producer_id_start == a.producer_id_start + a.producer_id_len  # type: ignore[attr-defined]
            quorum.stop()
            await _wait_for(lambda: not quorum._in_flight, "the last round")
    finally:
        storage.close()


async def _a_held_and_b_behind(quorum: Quorum, ring: ScriptedRing, nursery: trio.Nursery,
                                outcomes: dict[str, object]) -> tuple[int, int]:
    """Run the quorum; broker 2's block request ("a") in a round the ring holds, then broker
    3's ("b") sent behind it. The rounds before and the log end after "a"."""
    await nursery.start(quorum.run)
    first, second = await _broker(quorum, 2), await _broker(quorum, 3)
    rounds_before = len(ring.rounds)
    ring.hold = True
    nursery.start_soon(_ask, quorum, outcomes, "a", first)
    await _wait_for(lambda: len(ring.rounds) > rounds_before, "round 1")
    a_end = quorum.storage.metadata_end_offset()
    nursery.start_soon(_ask, quorum, outcomes, "b", second)  # handled during round 1
    return rounds_before, a_end


async def test_a_failed_ring_fsync_fails_every_unreleased_answer(
        tmp_path: Path, scripted_ring: ScriptedRing) -> None:
    storage, controller = open_node(tmp_path / "data")
    quorum = Quorum(controller, storage, inline_fsync_s=0)
    outcomes: dict[str, object] = {}
    with pytest.raises(BaseExceptionGroup) as failure:
        async with trio.open_nursery() as nursery:
            rounds_before, _ = await _a_held_and_b_behind(quorum, scripted_ring, nursery,
                                                          outcomes)
            durable = quorum.hwm  # round 1 is held: nothing moved it
            await trio.sleep(0.05)
            scripted_ring.complete(rounds_before, -errno.EIO)
            await trio.sleep(5)  # the failure ends the nursery well before this
    assert failure.group_contains(OSError)
    assert isinstance(outcomes["a"], NodeStopped) and isinstance(outcomes["b"], NodeStopped)
    assert quorum.hwm == durable and len(scripted_ring.rounds) == rounds_before + 1
    storage.close()


async def test_answers_a_round_made_durable_go_even_when_the_next_round_cannot_start(
        tmp_path: Path, scripted_ring: ScriptedRing) -> None:
    """A finished round starts the next one before it releases its own answers (so the
    next fsync runs meanwhile); when that start fails, the node stops, but what the
    finished round made durable is still answered as such, and only the rest fails."""
    storage, controller = open_node(tmp_path / "data")
    quorum = Quorum(controller, storage, inline_fsync_s=0)
    outcomes: dict[str, object] = {}
    with pytest.raises(BaseExceptionGroup) as failure:
        async with trio.open_nursery() as nursery:
            rounds_before, a_end = await _a_held_and_b_behind(quorum, scripted_ring, nursery,
                                                              outcomes)
            await _wait_for(lambda: storage.metadata_end_offset() == a_end + 1, "B's append")
            scripted_ring.refuse = OSError(errno.EBADF, "the ring is closed")
            # As under load (see `_overlap`): the next round starts as soon as this one ends.
            quorum._cpu_per_answer_s = quorum._idle_per_round_s = 1.0
            scripted_ring.complete(rounds_before)
            await trio.sleep(5)  # the failure ends the nursery well before this
    assert failure.group_contains(OSError) and not failure.group_contains(AssertionError)
    assert getattr(outcomes["a"], "error_code", None) == 0, outcomes["a"]
    assert isinstance(outcomes["b"], NodeStopped)
    assert quorum.hwm[0] == a_end
    storage.close()


async def test_a_failed_fsync_seen_in_the_middle_of_a_drain_fails_the_queue_once(
        tmp_path: Path, scripted_ring: ScriptedRing) -> None:
    """The drain polls the ring between requests; when the poll finds the round failed, the
    node stops, every queued request gets NodeStopped once, and none of them is handled."""
    storage, controller = open_node(tmp_path / "data")
    quorum = Quorum(controller, storage, inline_fsync_s=0)
    outcomes: dict[str, object] = {}
    with pytest.raises(BaseExceptionGroup) as failure:
        async with trio.open_nursery() as nursery:
            await nursery.start(quorum.run)
            requests = [await _broker(quorum, broker_id) for broker_id in (2, 3, 4, 5)]
            rounds_before = len(scripted_ring.rounds)
            scripted_ring.hold = True
            nursery.start_soon(_ask, quorum, outcomes, "a", requests[0])
            await _wait_for(lambda: len(scripted_ring.rounds) > rounds_before, "round 1")
            end = storage.metadata_end_offset()
            for name, request in zip("bcd", requests[1:], strict=True):
                nursery.start_soon(_ask, quorum, outcomes, name, request)  # queued
            scripted_ring.complete(rounds_before, -errno.EIO, wake=False)
            await trio.sleep(5)  # the failure ends the nursery well before this
    assert failure.group_contains(OSError) and not failure.group_contains(AssertionError)
    assert sorted(outcomes) == ["a", "b", "c", "d"]
    assert all(isinstance(outcome, NodeStopped) for outcome in outcomes.values())
    assert storage.metadata_end_offset() == end  # b, c and d were never handled
    storage.close()


async def test_a_round_with_more_files_than_the_ring_holds_is_fsynced_in_a_thread(
        tmp_path: Path, scripted_ring: ScriptedRing) -> None:
    storage, controller = open_node(tmp_path / "data")
    quorum = Quorum(controller, storage, inline_fsync_s=0)
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(quorum.run)
            request = await _broker(quorum, 2)
            scripted_ring.hold = True  # a round that reached the ring would never end
            scripted_ring.capacity = 0  # every round has more files than that
            rounds = len(scripted_ring.rounds)
            with trio.fail_after(10):
                reply = await quorum.submit(request, 0)
            assert reply.error_code == 0 and len(scripted_ring.rounds) == rounds
            quorum.stop()
    finally:
        storage.close()


class Scripted:
    """A controller whose requests say what they write: (name, metadata records, txn
    records); it answers with the name and notes where each result was applied."""

    def __init__(self) -> None:
        self.applied: list[tuple[str, int]] = []  # (name, offset of its first record)

    def handle(self, request, api_version, *, now_ms, next_offset, listener=None):  # type: ignore[no-untyped-def]
        name, records, txn_records = request
        return ControllerResult(response=name, records=list(records),
                                txn_records=list(txn_records))

    def usually_writes(self, request: object) -> bool:
        return True

    def apply(self, result: ControllerResult, *, offset: int, txn_offset: int) -> None:
        self.applied.append((result.response, offset))

    def tick(self, *, now_ms: int, next_offset: int) -> ControllerResult:
        return ControllerResult()

    def on_committed(self, metadata_hwm: int, txn_hwm: int) -> None:
        pass


def _tombstone(transactional_id: str) -> TxnRecord:
    return TxnRecord(TxnPartition(uuid.UUID(int=7), 0),
                     TransactionLogKey(transactional_id=transactional_id), None)


def _config(name: str) -> tuple[ConfigRecord, int]:
    return ConfigRecord(resource_type=2, resource_name="t", name=name, value="v"), 0


def _scripted_node(tmp_path: Path) -> tuple[Quorum, MetadataStorage]:
    data = tmp_path / "data"
    format_storage(data, cluster_id=CLUSTER, node_id=1, metadata_version=27)
    storage = MetadataStorage.open(data, node_id=1)
    storage.begin_epoch(now_ms=1)
    return Quorum(Scripted(), storage, inline_fsync_s=0), storage


async def _drain_one_pass(quorum: Quorum, scripted_ring: ScriptedRing,
                          requests: list[tuple[str, list, list]],
                          outcomes: dict[str, object]) -> None:
    """Hold a round in flight, queue `requests` behind it (handled by the commit task in one
    pass), then let every round complete; outcomes (answers or errors) by name."""

    async def ask(request: tuple[str, list, list]) -> None:
        try:
            outcomes[request[0]] = await quorum.submit(request, 0)
        except Exception as exc:
            outcomes[request[0]] = exc

    async with trio.open_nursery() as nursery:
        await nursery.start(quorum.run)
        scripted_ring.hold = True
        nursery.start_soon(ask, ("first", [_config("first")], []))
        await _wait_for(lambda: scripted_ring.rounds, "round 1")
        for request in requests:  # all queued in one scheduler batch, then one pass
            nursery.start_soon(ask, request)
        await _wait_for(lambda: len(outcomes) + len(quorum._waiters) == len(requests) + 1,
                        "the pass")
        scripted_ring.hold = False
        for index in range(len(scripted_ring.rounds)):
            scripted_ring.complete(index)
        await _wait_for(lambda: len(outcomes) == len(requests) + 1, "the answers")
        quorum.stop()


async def test_a_pass_appends_its_operations_in_arrival_order_and_a_failed_one_leaves_no_trace(
        tmp_path: Path, scripted_ring: ScriptedRing) -> None:
    bad = ConfigRecord(resource_type=999, resource_name="t", name="bad", value="v")
    requests = [("a", [_config("a1"), _config("a2")], []), ("b", [_config("b"), (bad, 0)], []),
                ("c", [_config("c")], []), ("d", [], []), ("e", [_config("e")], [])]
    outcomes: dict[str, object] = {}
    quorum, storage = _scripted_node(tmp_path)
    await _drain_one_pass(quorum, scripted_ring, requests, outcomes)
    assert isinstance(outcomes["b"], EncodeError)  # its caller's error, nothing else
    assert [outcomes[n] for n in "first a c d e".split()] == "first a c d e".split()
    applied = quorum.controller.applied  # in the order handled: the queue's (as trio ran them)
    assert sorted(name for name, _ in applied[1:]) == ["a", "c", "e"]
    records = {"a": ["a1", "a2"], "c": ["c"], "e": ["e"]}
    batches = list(storage.metadata.read(applied[0][1]))[-2:]
    # "first" in the held round's batch; the whole pass in the next one, in handled order,
    # each operation at the offset it was applied at.
    assert batches[0].values()[-1] == encode_metadata_record(*_config("first"))
    order = [name for name, _ in applied[1:]]
    assert batches[1].values() == [encode_metadata_record(*_config(r))
                                   for name in order for r in records[name]]
    offset = batches[1].base_offset
    for name, at in applied[1:]:
        assert at == offset
        offset += len(records[name])
    storage.close()


async def test_an_operation_whose_transaction_log_append_fails_keeps_no_metadata_record(
        tmp_path: Path, scripted_ring: ScriptedRing) -> None:
    quorum, storage = _scripted_node(tmp_path)
    append_txn = storage.append_txn

    def refuse_bad(txn_records: list, now_ms: int) -> int:
        if txn_records[0].key.transactional_id == "bad":
            raise OSError(errno.EIO, "Input/output error")
        return append_txn(txn_records, now_ms)

    storage.append_txn = refuse_bad  # type: ignore[method-assign]
    txn_end = storage.txn_end_offset()
    requests = [("a", [_config("a")], []), ("t", [_config("t")], [_tombstone("bad")]),
                ("u", [_config("u")], [_tombstone("good")]), ("c", [_config("c")], [])]
    outcomes: dict[str, object] = {}
    await _drain_one_pass(quorum, scripted_ring, requests, outcomes)
    assert isinstance(outcomes["t"], OSError)
    assert [outcomes[n] for n in "acu"] == list("acu")
    applied = quorum.controller.applied  # type: ignore[attr-defined]
    assert sorted(name for name, _ in applied) == ["a", "c", "first", "u"]
    logged = list(storage.metadata.read(applied[0][1]))[-1].values()
    assert logged == [encode_metadata_record(*_config(name)) for name, _ in applied[1:]]
    assert storage.txn_end_offset() == txn_end + 1 and quorum.hwm[1] == txn_end + 1
    storage.close()


async def test_a_pass_whose_records_cannot_reach_the_log_stops_the_node(
        tmp_path: Path, scripted_ring: ScriptedRing, monkeypatch: pytest.MonkeyPatch) -> None:
    """Its operations are applied already: memory is ahead of the log, so the node stops and
    none of them is answered as done."""

    def refuse(prepared: PreparedRecords, now_ms: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(PreparedRecords, "append", refuse)
    quorum, storage = _scripted_node(tmp_path)
    end = storage.metadata_end_offset()
    outcomes: dict[str, object] = {}
    with pytest.raises(BaseExceptionGroup) as failure:
        await _drain_one_pass(quorum, scripted_ring, [("a", [_config("a")], []),
                                                      ("c", [_config("c")], [])], outcomes)
    assert failure.group_contains(OSError) and not failure.group_contains(AssertionError)
    assert isinstance(outcomes["a"], NodeStopped) and isinstance(outcomes["c"], NodeStopped)
    assert storage.metadata_end_offset() == end + 1  # "first" only
    storage.close()


async def _a_pass_during_round_one(quorum: Quorum, nursery: trio.Nursery,
                                   outcomes: dict[str, object],
                                   round_one: Callable[[], object]) -> int:
    """Run the quorum; "first" in round 1 (held by the test; `round_one()` says it began),
    then "a" and "b", handled in one pass during it, whose records must be in the segment
    file at once, with nothing answered yet. The log end after "first"."""
    segment = quorum.storage.metadata.active.path

    async def ask(request: tuple[str, list, list]) -> None:
        outcomes[request[0]] = await quorum.submit(request, 0)

    await nursery.start(quorum.run)
    nursery.start_soon(ask, ("first", [_config("first")], []))
    await _wait_for(round_one, "round 1")
    size, first_end = segment.stat().st_size, quorum.storage.metadata_end_offset()
    for name in "ab":
        nursery.start_soon(ask, (name, [_config(name)], []))
    await _wait_for(lambda: len(quorum._waiters) == 3, "the pass")
    written = [value for batch in iter_record_batches(segment.read_bytes()[size:])
               for value in batch.values()]
    # (in the order trio ran the two tasks)
    assert sorted(written) == [encode_metadata_record(*_config(name)) for name in "ab"]
    assert quorum.hwm[0] < first_end and outcomes == {}
    return first_end


async def test_a_pass_handled_during_a_round_is_written_at_once_and_answered_after_the_next(
        tmp_path: Path, scripted_ring: ScriptedRing) -> None:
    """The pass's records reach the file while round 1 is still in flight (`write_ahead`), so
    round 2 only has to fsync; they are answered after round 2, which fsyncs that file."""
    quorum, storage = _scripted_node(tmp_path)
    segment = storage.metadata.active.path
    outcomes: dict[str, object] = {}
    async with trio.open_nursery() as nursery:
        scripted_ring.hold = True
        first_end = await _a_pass_during_round_one(quorum, nursery, outcomes,
                                                   lambda: scripted_ring.rounds)
        scripted_ring.complete(0)
        await _wait_for(lambda: "first" in outcomes, "round 1's answer")
        await _wait_for(lambda: len(scripted_ring.rounds) == 2, "round 2")
        await trio.sleep(0.05)
        assert set(outcomes) == {"first"} and quorum.hwm[0] == first_end
        files, _ = scripted_ring.rounds[1]
        assert len(files) == 1 and os.fstat(files[0]).st_ino == segment.stat().st_ino
        scripted_ring.complete(1)
        await _wait_for(lambda: len(outcomes) == 3, "the pass's answers")
        assert quorum.hwm[0] == storage.metadata_end_offset() == first_end + 2
        quorum.stop()
    storage.close()


async def test_a_pass_that_cannot_be_written_ahead_stops_the_node(
        tmp_path: Path, scripted_ring: ScriptedRing, monkeypatch: pytest.MonkeyPatch) -> None:
    """As a pass whose records cannot reach the log: they are applied, so nothing of it is
    answered as done."""

    def refuse(storage: MetadataStorage) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(MetadataStorage, "write_ahead", refuse)
    quorum, storage = _scripted_node(tmp_path)
    outcomes: dict[str, object] = {}
    with pytest.raises(BaseExceptionGroup) as failure:
        await _drain_one_pass(quorum, scripted_ring, [("a", [_config("a")], []),
                                                      ("c", [_config("c")], [])], outcomes)
    assert failure.group_contains(OSError) and not failure.group_contains(AssertionError)
    assert all(isinstance(outcomes[name], NodeStopped) for name in ("first", "a", "c"))
    storage.close()


async def test_with_fsyncs_in_a_thread_a_pass_during_a_round_is_written_ahead(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same without a ring: the pass's records are written at once, and the round that
    starts when round 1 ends, and fsyncs them, answers them."""
    quorum, storage = _scripted_node(tmp_path)
    quorum = Quorum(quorum.controller, storage, inline_fsync_s=0, fsync_ring=False)
    gated = GatedFsync(monkeypatch)
    outcomes: dict[str, object] = {}
    async with trio.open_nursery() as nursery:
        first_end = await _a_pass_during_round_one(quorum, nursery, outcomes,
                                                   lambda: gated.began)
        assert len(gated.began) == 1
        gated.open(0)
        await _wait_for(lambda: len(gated.began) == 2, "round 2")
        assert gated.began[1] == first_end + 2 and set(outcomes) <= {"first"}
        gated.open(1)
        await _wait_for(lambda: len(outcomes) == 3, "the pass's answers")
        assert quorum.hwm[0] == first_end + 2
        quorum.stop()
    storage.close()
