"""Overlapped fsync rounds (`controller/raft/overlapped_rounds.py`) on a lone voter's real
data dir: when the writers split, one round is under way at a time and records are appended
while it is fsynced, the halves stay near half each, every answer comes after the fsync that
covers it (tests/server/test_quorum.py), a failed fsync stops the node with nothing past it
answered, a kernel that refuses io_uring or a job sharing the disk leaves the rounds to the
runner, and the split follows the writers' cost against the fsync (fast disks never split)."""

from __future__ import annotations

import errno
from types import SimpleNamespace
from typing import Any

import pytest
import trio
from kraftpy.controller.host import NodeStopped
from kraftpy.controller.log.fsync_ring import FsyncRing
from kraftpy.controller.quorum import Quorum, QuorumError
from kraftpy.controller.raft import overlapped_rounds
from kraftpy.controller.raft.overlapped_rounds import OverlappedRounds
from support.lone_quorum import (
    broker,
    open_lone,
    record_durable,
    running_lone,
    split_writers,
    without_fsync_ring,
)

WRITERS = 64


def _ring_here() -> bool:
    ring = FsyncRing.open()
    if ring is None:
        return False
    ring.close()
    return True


async def _load(quorum: Quorum, nursery: trio.Nursery, per_writer: int,
                answers: list[Any]) -> None:
    """WRITERS registered brokers, each taking `per_writer` blocks one after another."""
    requests = [await broker(quorum, 2 + i) for i in range(WRITERS)]

    async def writer(request: Any) -> None:
        for _ in range(per_writer):
            answers.append(await quorum.submit(request, 0))

    async with trio.open_nursery() as writers:
        for request in requests:
            writers.start_soon(writer, request)


async def test_split_writers_append_while_one_round_is_fsynced_at_a_time(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    split_writers(monkeypatch)
    quorum = open_lone(tmp_path / "data", {"metadata.max.idle.interval.ms": "0"})
    sizes: list[int] = []  # records per ring round
    during = 0  # appends while a ring round was under way
    real_begin, real_appended = OverlappedRounds.begin, OverlappedRounds.appended

    def begin(rounds: OverlappedRounds) -> None:
        assert not rounds.in_flight and not rounds.runner.in_round, "two rounds at once"
        before = rounds.runner.log.flushed_offset
        real_begin(rounds)
        if rounds.in_flight:
            sizes.append(rounds.runner.log.log_end_offset - before)

    def appended(rounds: OverlappedRounds) -> None:
        nonlocal during
        during += rounds.in_flight
        real_appended(rounds)

    monkeypatch.setattr(OverlappedRounds, "begin", begin)
    monkeypatch.setattr(OverlappedRounds, "appended", appended)
    answers: list[Any] = []
    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        await _load(quorum, nursery, 30, answers)
        quorum.stop()
    quorum.storage.close()
    assert len(answers) == WRITERS * 30 and not any(a.error_code for a in answers)
    starts = sorted(a.producer_id_start for a in answers)
    assert len(set(starts)) == len(starts)
    if not _ring_here():  # the runner's own rounds: nothing to overlap
        assert quorum.runner.overlapped is None and not sizes
        return
    assert quorum.runner.overlapped is not None and quorum.runner.overlapped.rounds > 10
    assert during > WRITERS, "no record was appended while a round was being fsynced"
    # Two halves: the rounds under load carry about half the writers each, not all of them
    # and not one at a time (the median, so a busy machine's stray round does not count).
    steady = sorted(sizes[len(sizes) // 4:])
    assert WRITERS // 4 <= steady[len(steady) // 2] <= 3 * WRITERS // 4, sizes


async def test_a_failed_ring_fsync_stops_the_node_with_nothing_past_it_answered(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    if not _ring_here():
        pytest.skip("no io_uring on this kernel: the runner's failed fsyncs are tested "
                    "in tests/server/test_quorum.py")
    split_writers(monkeypatch)
    quorum = open_lone(tmp_path / "data", {"metadata.max.idle.interval.ms": "0"})
    real_reap = FsyncRing.reap
    failed: list[int] = []

    def reap(ring: FsyncRing) -> list[tuple[int, int]]:
        done = real_reap(ring)
        rounds = quorum.runner.overlapped
        if rounds is not None and rounds.rounds >= 5 and rounds.in_flight and done \
                and not failed:
            failed.append(rounds.covers)  # the end of the round that fails
            return [(tag, -errno.EIO) for tag, _ in done]  # the disk reports an I/O error
        return done

    monkeypatch.setattr(FsyncRing, "reap", reap)
    durable: list[int] = []
    record_durable(monkeypatch, quorum, durable)  # sees what the node sees: the EIO too
    answered: list[tuple[int, int]] = []  # (end of its record, producer id start)
    stopped = 0

    async def writer(request: Any) -> None:
        nonlocal stopped
        for _ in range(200):  # bounded: the failure comes at the sixth ring round
            try:
                reply = await quorum.submit(request, 0)
            except NodeStopped:
                stopped += 1
                return
            assert reply.error_code == 0
            answered.append((quorum.runner.log.flushed_offset, reply.producer_id_start))

    with pytest.raises(BaseExceptionGroup) as failure, trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await running_lone(quorum, nursery)
            requests = [await broker(quorum, 2 + i) for i in range(WRITERS)]
            for request in requests:
                nursery.start_soon(writer, request)
    durable = list(durable)  # what the node fsynced while it ran (closing flushes once more)
    flushed = quorum.runner.log.flushed_offset
    quorum.storage.close()
    assert failure.group_contains(QuorumError, match="fsync of the metadata log failed")
    assert failed and stopped > 0, "the failed round's writers were not told the node stopped"
    # Every answer came while the log's flushed offset was at most what io_uring reported
    # durable before the failure.
    assert answered and max(end for end, _ in answered) <= max(durable)
    assert flushed <= max(durable) < failed[0]
    assert durable[-1] == max(durable)  # no fsync was taken as durable after the failed one


async def test_where_io_uring_is_refused_the_runner_fsyncs_every_round(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    split_writers(monkeypatch)
    without_fsync_ring(monkeypatch)  # as `FsyncRing.open` gives None on such a kernel
    quorum = open_lone(tmp_path / "data", {"metadata.max.idle.interval.ms": "0"})
    answers: list[Any] = []
    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        fsyncs = quorum.fsyncs
        await _load(quorum, nursery, 10, answers)
        quorum.stop()
    quorum.storage.close()
    assert quorum.runner.overlapped is None
    assert len(answers) == WRITERS * 10 and not any(a.error_code for a in answers)
    assert 0 < quorum.fsyncs - fsyncs < len(answers)  # shared, by the runner's rounds


def _rounds(fsync_s: float) -> OverlappedRounds:
    runner = SimpleNamespace(log=SimpleNamespace(log_end_offset=0), disk_shared=0,
                             fsync_s=fsync_s, failure=None)
    return OverlappedRounds(runner, ring=None)  # type: ignore[arg-type]


def test_the_split_follows_the_writers_cost_against_the_fsync() -> None:
    rounds = _rounds(200e-6)
    rounds.measure(64, 64 * 10e-6, 200e-6)  # 640 us of work per 200 us fsync: split
    assert rounds.split and rounds.usable()
    rounds.runner.disk_shared = 1
    assert not rounds.usable()  # a snapshot being written: the runner's rounds meanwhile
    rounds.runner.disk_shared = 0
    rounds.runner.failure = OSError(5, "fsync failed")
    assert not rounds.usable()  # after a failed fsync, no round at all
    rounds.runner.failure = None
    for _ in range(20):  # in halves of 32, still worth it
        rounds.measure(32, 32 * 10e-6, 250e-6)
    assert rounds.split
    for _ in range(40):  # the writers got cheap: one round for all again
        rounds.measure(32, 32 * 1e-6, 250e-6)
    assert not rounds.split


@pytest.mark.parametrize(("records", "per_record_s", "fsync_s", "why"), [
    (64, 10e-6, 8e-6, "a tmpfs-like fsync: nothing to hide behind"),
    (8, 100e-6, 200e-6, "a few writers: halves of four hide little"),
    (32, 30e-6, 200e-6, "32 writers: a half's own round costs more than it hides"),
    (64, 3e-6, 200e-6, "cheap writers: the loop would wait for the fsync anyway"),
])
def test_no_split_where_it_would_not_pay(records: int, per_record_s: float, fsync_s: float,
                                         why: str) -> None:
    rounds = _rounds(fsync_s)
    for _ in range(20):
        rounds.measure(records, records * per_record_s, fsync_s)
    assert not rounds.split, why


def test_the_defaults_split_only_above_the_minimums() -> None:
    assert overlapped_rounds.SPLIT_MIN_FSYNC_S > 0 and overlapped_rounds.SPLIT_MIN_WRITERS > 1
    assert overlapped_rounds.SPLIT_ABOVE_FSYNCS > overlapped_rounds.JOIN_BELOW_FSYNCS
