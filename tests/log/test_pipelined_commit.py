"""Pipelined commit rounds on a real MetadataStorage: an answer waits for a round whose fsync
began after its records were written; a failed round fails every answer not yet released."""

from __future__ import annotations

import errno
import os
import threading
import time
from pathlib import Path

import pytest
import trio
from kraftpy.controller import quorum as quorum_module
from kraftpy.controller.log.storage import FlushRound
from kraftpy.controller.quorum import NodeStopped, Quorum
from kraftpy.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
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


async def test_a_failed_ring_fsync_fails_every_unreleased_answer(
        tmp_path: Path, scripted_ring: ScriptedRing) -> None:
    storage, controller = open_node(tmp_path / "data")
    quorum = Quorum(controller, storage, inline_fsync_s=0)
    outcomes: dict[str, object] = {}
    with pytest.raises(BaseExceptionGroup) as failure:
        async with trio.open_nursery() as nursery:
            await nursery.start(quorum.run)
            first, second = await _broker(quorum, 2), await _broker(quorum, 3)
            durable, rounds_before = quorum.hwm, len(scripted_ring.rounds)
            scripted_ring.hold = True

            nursery.start_soon(_ask, quorum, outcomes, "a", first)
            await _wait_for(lambda: len(scripted_ring.rounds) > rounds_before, "round 1")
            nursery.start_soon(_ask, quorum, outcomes, "b", second)
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
            await nursery.start(quorum.run)
            first, second = await _broker(quorum, 2), await _broker(quorum, 3)
            rounds_before = len(scripted_ring.rounds)
            scripted_ring.hold = True
            nursery.start_soon(_ask, quorum, outcomes, "a", first)
            await _wait_for(lambda: len(scripted_ring.rounds) > rounds_before, "round 1")
            a_end = storage.metadata_end_offset()
            nursery.start_soon(_ask, quorum, outcomes, "b", second)  # handled during round 1
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
