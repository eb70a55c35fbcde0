"""A lone voter under 64 writers, its rounds split in two halves fsynced by io_uring, until it
is killed: run by `tests/crash/test_kill9_overlapped.py`.

Writes to stdout, one line each: `M ring` or `M runner` (what fsyncs the split rounds: an
io_uring, or, where the kernel refuses one, the runner itself), `R` once every broker is
registered, `A <start> <length>` for every block acknowledged (after `submit` returned it),
and every 20 ms `O <appends while a round was being fsynced> <ring rounds>`. Run as a script:
`python ring_crash_writer.py <data dir> <first broker id> <writers> <seed>`.
"""

from __future__ import annotations

import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # `support` as the tests see it

import trio  # noqa: E402
from kraftpy.controller.raft import overlapped_rounds  # noqa: E402

from support.lone_quorum import broker, open_lone, running_lone  # noqa: E402


def _say(line: str) -> None:
    os.write(1, line.encode() + b"\n")


async def main(data: Path, first_broker: int, writers: int, seed: int) -> None:
    quorum = open_lone(data, {"metadata.max.idle.interval.ms": "0"})
    during = 0  # appends while a ring round was in flight
    real_appended = overlapped_rounds.OverlappedRounds.appended

    def appended(rounds: overlapped_rounds.OverlappedRounds) -> None:
        nonlocal during
        during += rounds.in_flight
        real_appended(rounds)

    overlapped_rounds.OverlappedRounds.appended = appended  # type: ignore[method-assign]
    ready = 0
    all_ready = trio.Event()

    async def writer(broker_id: int) -> None:
        nonlocal ready
        request = await broker(quorum, broker_id)
        ready += 1
        if ready == writers:
            all_ready.set()
            _say("R")
        await all_ready.wait()
        rng = random.Random(seed * 1000 + broker_id)
        while True:
            reply = await quorum.submit(request, 0)
            assert reply.error_code == 0, reply
            _say(f"A {reply.producer_id_start} {reply.producer_id_len}")
            if rng.random() < 0.1:  # now and then a writer pauses: the halves drift
                await trio.sleep(rng.random() * 0.0005)

    async def report() -> None:
        _say("M ring" if quorum.runner.overlapped is not None else "M runner")
        while True:
            await trio.sleep(0.02)
            rounds = quorum.runner.overlapped
            _say(f"O {during} {rounds.rounds if rounds is not None else 0}")

    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        nursery.start_soon(report)
        for i in range(writers):
            nursery.start_soon(writer, first_broker + i)


if __name__ == "__main__":
    # Split as soon as 16 writers are in play, however quick this machine's fsync is (here,
    # not at import: the test imports this module only to find its file).
    overlapped_rounds.SPLIT_MIN_FSYNC_S = 0.0
    overlapped_rounds.SPLIT_MIN_WRITERS = 16
    overlapped_rounds.SPLIT_ABOVE_FSYNCS = 0.0
    overlapped_rounds.JOIN_BELOW_FSYNCS = 0.0
    trio.run(main, Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
