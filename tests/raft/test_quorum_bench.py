"""benchmarks/vs_kafka_quorum.py's own parts: its statistics, how its simulated brokers read
who leads from a voter's Fetch answer, and the brokers following the leader of three
`kraftpy serve` voters through a kill -9 (the Kafka side is only run by the benchmark).
Also that an idle voter sleeps: a poll loop that woke itself kept every voter runnable."""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import pytest
from kraftpy.controller.raft.messages import fetch_response
from support.server import quorum_servers, start_quorum, stop_quorum

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import vs_kafka_quorum as bench  # noqa: E402

FENCED_LEADER_EPOCH = 74


def test_percentile_is_nearest_rank() -> None:
    values = [float(v) for v in range(100, 0, -1)]
    assert bench.percentile(values, 50) == 50.0
    assert bench.percentile(values, 99) == 99.0
    assert bench.percentile(values, 100) == 100.0
    assert bench.percentile([7.0], 99) == 7.0
    assert math.isnan(bench.percentile([], 50))


def test_summarize_counts_the_blocks_answered_inside_the_window() -> None:
    answers = [bench.Answer(0.0, 0.5, 0, 1, 100),   # before the window
               bench.Answer(0.9, 1.1, 0, 1, 100),
               bench.Answer(1.0, 1.4, 0, 1, 101),
               bench.Answer(1.2, 1.5, 41, 1, 102),  # an error answer
               bench.Answer(2.5, 3.5, 0, 1, 100)]   # after it
    w = bench.summarize(answers, 1.0, 3.0, cpu_s=0.01)
    assert w.rate == 1.0  # two blocks in two seconds
    assert w.errors == 1
    assert w.p50_ms == pytest.approx(200.0) and w.p99_ms == pytest.approx(400.0)
    assert w.cpu_us == pytest.approx(5000.0)
    empty = bench.summarize([], 1.0, 3.0, cpu_s=0.01)
    assert empty.rate == 0 and math.isnan(empty.cpu_us)


def test_failover_times_skip_the_victims_late_answers() -> None:
    killed = 10.0
    answers = [bench.Answer(9.9, 10.01, 0, 1, 100),  # sent before the kill by the victim
               bench.Answer(10.0, 12.0, 0, 2, 100),
               bench.Answer(10.0, 12.5, 0, 2, 101)]
    assert bench.failover_times(answers, killed, victim=1, brokers=3) == (2.0, None)
    answers.append(bench.Answer(10.0, 13.0, 0, 3, 102))
    assert bench.failover_times(answers, killed, victim=1, brokers=3) == (2.0, 3.0)
    assert bench.failover_times(answers[:1], killed, victim=1, brokers=3) == (None, None)


def test_the_leader_as_a_voters_fetch_answer_names_it() -> None:
    def answer(leader: int, epoch: int) -> object:
        return fetch_response(error=FENCED_LEADER_EPOCH, epoch=epoch, leader_id=leader,
                              high_watermark=-1, log_start_offset=0, leader=None)

    assert bench.leader_view(answer(2, 5)) == (2, 5)
    assert bench.leader_view(answer(-1, 6)) is None  # an election under way
    assert bench.leader_view(fetch_response(error=0, epoch=0, leader_id=0, high_watermark=0,
                                            log_start_offset=0, leader=None,
                                            top_error=104)) is None
    assert bench.choose_leader([(2, 5), None, (3, 6), (1, 4)]) == (3, 6)
    assert bench.choose_leader([None, None]) is None


def _sleeping_share(pid: int, samples: int = 100) -> float:
    asleep = 0
    for _ in range(samples):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        asleep += state in ("S", "D")
        time.sleep(0.01)
    return asleep / samples


def test_brokers_follow_the_leader_through_a_kill(tmp_path: Path) -> None:
    servers = quorum_servers(tmp_path)
    fleet = None
    try:
        start_quorum(servers)
        quorum = bench.kraftpy_side(servers)
        fleet = bench.Fleet("kraftpy", quorum.voters, quorum.cluster_id, 4)
        fleet.start(60)
        time.sleep(1.0)
        for srv in servers:  # idle (brokers heartbeating): asleep, not spinning
            assert _sleeping_share(srv.pid) > 0.5, srv.root.name
        window = bench.measure(quorum, fleet, 1.0)
        assert window.rate > 0 and window.errors == 0
        assert window.p50_ms <= window.p99_ms and window.cpu_us > 0
        first, every = bench.failover(quorum, fleet, 4)
        print(f"failover: first block {first:.2f} s, every broker {every:.2f} s")
        assert 0 < first <= every < 15
        assert all(srv.running for srv in servers)  # the victim was restarted
        fleet.check()
    finally:
        if fleet is not None:
            fleet.close()
        stop_quorum(servers)
