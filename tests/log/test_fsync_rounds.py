"""Where and when the runner's fsync rounds and timers run, on a lone voter's real data dir.

A quick fsync round runs on the event loop even while other tasks are ready to run (a worker
thread's hand-off cost more than the fsync), in the poll loop's own task; a round that took
over `INLINE_FSYNC_MAX_S` sends the next one to a worker thread, and a quick one brings the
next back; while a snapshot is being written every round runs in a worker thread, however
quick the last one was; one round at a time, whichever task runs it; and a timer's last
millisecond is slept, so the append linger ends neither early nor a whole epoll millisecond
late. (These are the runner's own rounds: `overlapped_rounds.py` is tested on its own.)"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from kraftpy.controller.committed_image import SnapshotJob
from kraftpy.controller.raft import runner
from support.lone_quorum import broker, open_lone, running_lone, without_fsync_ring


@pytest.fixture(autouse=True)
def _runner_rounds_only(monkeypatch: pytest.MonkeyPatch) -> None:
    without_fsync_ring(monkeypatch)


class Rounds:
    """Every fsync round the runner makes: the thread it ran on, how long the runner was told
    it took, and how many other tasks were ready to run when it began on the loop. The disk
    is as slow as the test says: each fsync sleeps `slow_s[0]` first and the runner is told
    that (0: the fsync alone, told 0), so no busy machine's slow fsync changes the rounds."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, slow_s: list[float]) -> None:
        self.seen: list[tuple[bool, float, int]] = []
        self.tasks: list[str | None] = []  # the trio task of each round on the loop
        self.slow_s = slow_s
        real = runner._timed_fsync

        def timed_fsync(ticket: Any) -> float:
            on_loop = threading.current_thread() is threading.main_thread()
            ready = trio.lowlevel.current_statistics().tasks_runnable if on_loop else -1
            took = self.slow_s[0]
            if took:
                time.sleep(took)
            real(ticket)
            self.seen.append((on_loop, took, ready))
            self.tasks.append(trio.lowlevel.current_task().name if on_loop else None)
            return took

        monkeypatch.setattr(runner, "_timed_fsync", timed_fsync)

    def check_the_rule(self) -> None:
        """Each round after the first runs on the loop exactly when the one before it was
        quick."""
        for (_, took, _), (on_loop, _, _) in zip(self.seen, self.seen[1:], strict=False):
            assert on_loop is (took <= runner.INLINE_FSYNC_MAX_S), self.seen


async def test_a_quick_fsync_runs_on_the_loop_while_other_tasks_are_ready(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quorum = open_lone(tmp_path / "data")
    spinning = True

    async def always_ready() -> None:  # a task that is always ready to run
        while spinning:
            await trio.lowlevel.checkpoint()

    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        request = await broker(quorum, 2)
        rounds = Rounds(monkeypatch, [0.0])
        nursery.start_soon(always_ready)
        for _ in range(30):
            reply = await quorum.submit(request, 0)
            assert reply.error_code == 0
        spinning = False
        quorum.stop()
    quorum.storage.close()
    rounds.check_the_rule()
    # Rounds ran on the loop with another task ready; before, any ready task sent a round to
    # a worker thread.
    assert any(on_loop and ready > 0 for on_loop, _, ready in rounds.seen), rounds.seen
    # Each by the poll loop itself (in the task running the quorum), right after the pass
    # that asked for it: the flusher's task was not woken to run it.
    assert rounds.tasks and all(name is not None and name.endswith("Quorum.run")
                                for name in rounds.tasks), rounds.tasks


async def test_a_slow_fsync_sends_the_next_rounds_to_a_thread_until_one_is_quick(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quorum = open_lone(tmp_path / "data")
    slow_s = [0.0]
    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        request = await broker(quorum, 2)
        rounds = Rounds(monkeypatch, slow_s)
        for slow in (0.0, 0.0, 0.005, 0.005, 0.005, 0.0, 0.0, 0.0):
            slow_s[0] = slow
            reply = await quorum.submit(request, 0)
            assert reply.error_code == 0
        quorum.stop()
    quorum.storage.close()
    rounds.check_the_rule()
    threads = [on_loop for on_loop, _, _ in rounds.seen]
    assert False in threads, rounds.seen  # the slow disk's next rounds went to a thread
    back = threads.index(False) + threads[threads.index(False):].index(True)
    assert rounds.seen[back - 1][1] <= runner.INLINE_FSYNC_MAX_S  # back after a quick one


async def test_while_a_snapshot_is_written_every_round_runs_in_a_worker_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quorum = open_lone(tmp_path / "data", {
        "metadata.log.max.record.bytes.between.snapshots": "2000",
        "metadata.log.max.snapshot.interval.ms": "0"})
    writing = threading.Event()  # set inside the job's thread only
    rounds: list[tuple[bool, bool]] = []  # (on the loop, a snapshot being written)
    real_fsync, real_run = runner._timed_fsync, SnapshotJob.run

    def timed_fsync(ticket: Any) -> float:
        rounds.append((threading.current_thread() is threading.main_thread(),
                       writing.is_set()))
        real_fsync(ticket)
        return 0.0  # every fsync quick: only the snapshot sends a round to a thread

    held = threading.Event()  # the first snapshot is held; any later one is not

    def slow_run(job: SnapshotJob) -> None:
        writing.set()
        try:
            if not held.is_set():
                held.set()
                seen, deadline = len(rounds), time.monotonic() + 10
                while len(rounds) < seen + 5 and time.monotonic() < deadline:
                    time.sleep(0.002)  # a snapshot that holds the disk while rounds go on
            real_run(job)
        finally:
            writing.clear()

    monkeypatch.setattr(runner, "_timed_fsync", timed_fsync)
    monkeypatch.setattr(SnapshotJob, "run", slow_run)
    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        request = await broker(quorum, 2)
        with trio.fail_after(30):
            while not any(during for _, during in rounds) or rounds[-1][1] or \
                    not rounds[-1][0]:
                reply = await quorum.submit(request, 0)
                assert reply.error_code == 0
        quorum.stop()
    quorum.storage.close()
    during = [on_loop for on_loop, snapshot in rounds if snapshot]
    assert len(during) >= 5 and not any(during), rounds  # the loop never held those
    assert rounds[-1] == (True, False), rounds  # and the rounds came back to it after


async def test_no_round_starts_on_the_loop_while_one_is_in_a_worker_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quorum = open_lone(tmp_path / "data")
    in_thread = threading.Event()  # a thread round has begun its fsync
    release = threading.Event()  # and ends when the test says
    lock = threading.Lock()
    running, most = [0], [0]  # rounds whose fsync is under way now, and the most at once
    real = runner._timed_fsync

    def timed_fsync(ticket: Any) -> float:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        try:
            if threading.current_thread() is not threading.main_thread() \
                    and not in_thread.is_set():
                in_thread.set()
                release.wait(30)
            real(ticket)
        finally:
            with lock:
                running[0] -= 1
        return 0.0  # quick: only the shared disk sends a round to a thread

    monkeypatch.setattr(runner, "_timed_fsync", timed_fsync)
    answers: list[int] = []

    async def submit(request: Any) -> None:
        answers.append((await quorum.submit(request, 0)).error_code)

    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        request = await broker(quorum, 2)
        with quorum.runner.sharing_the_disk():  # this round goes to a thread
            nursery.start_soon(submit, request)
            with trio.fail_after(30):
                while not in_thread.is_set():
                    await trio.sleep(0.001)
        # The disk is no longer shared and the last fsync was quick, but a round is in flight:
        # the next request's flush waits for it rather than start a round of its own.
        nursery.start_soon(submit, request)
        with trio.fail_after(30):
            while not quorum.runner.flushes_asked:
                await trio.sleep(0.001)
        for _ in range(20):  # passes of the loop while the thread round is held
            await trio.sleep(0.001)
        assert answers == [] and running[0] == 1
        release.set()
        with trio.fail_after(30):
            while len(answers) < 2:
                await trio.sleep(0.001)
        quorum.stop()
    quorum.storage.close()
    assert answers == [0, 0] and most[0] == 1, (answers, most)
    assert quorum.runner.failure is None


class _Clock:
    """The runner's `time` module, with its sleeps recorded."""

    def __init__(self) -> None:
        self.sleeps: list[float] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        time.sleep(seconds)


async def test_the_append_linger_is_waited_out_whole_its_last_part_slept_on_the_loop(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # No NoOpRecord (metadata.max.idle.interval.ms=0) starts a batch before the test's own.
    quorum = open_lone(tmp_path / "data", {"controller.quorum.append.linger.ms": "25",
                                           "metadata.max.idle.interval.ms": "0"})
    clock = _Clock()
    begun: list[float] = []
    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        request = await broker(quorum, 2)
        real = runner._timed_fsync

        def timed_fsync(ticket: Any) -> float:
            begun.append(time.time())
            return real(ticket)

        monkeypatch.setattr(runner, "_timed_fsync", timed_fsync)
        monkeypatch.setattr(runner, "time", clock)
        lingers: list[float] = []
        for _ in range(5):
            begun.clear()
            asked = time.time()
            reply = await quorum.submit(request, 0)
            assert reply.error_code == 0
            # The core counts whole milliseconds from the append (at or after `asked`): its
            # batch is written, and fsynced, no sooner than 24 ms later.
            lingers.append(begun[0] - asked)
        quorum.stop()
    quorum.storage.close()
    assert min(lingers) >= 0.024, lingers
    # The loop woke before the linger ended and slept the rest: at most a millisecond each.
    assert clock.sleeps and all(0 < s <= runner.TIMER_PRECISION_S for s in clock.sleeps)
