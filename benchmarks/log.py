"""Metadata log benchmark: fsync-bound appends, group commit, recovery, replay, record reading.

    python3 benchmarks/log.py [--records 1000000] [--seconds 1] [--rounds 5] [--dir DIR]
                              [--cpu-dir /dev/shm]     (--records 0: the commit rows only)

Everything runs on the same disk in the same run, next to its reference:
- the raw `os.fsync` rate (small write + fsync in a loop): the ceiling for one-fsync appends;
- appends/s with one fsync per operation (PartitionLog append + flush);
- the node's whole commit path, like for like: 1, 8 and 64 concurrent trio writers, each
  looping an AllocateProducerIds (handled by the controller host, one ProducerIdsRecord
  appended through the raft driver and core, applied) against a lone voter's quorum on a real
  data dir, as `kraftpy serve` opens it, answered only once the core has committed it (its
  fsync); at `controller.quorum.append.linger.ms=0` and, for 64 writers, at Kafka's default
  25 ms too;
- these rows run in interleaved rounds (the disk's fsync rate drifts); ratios are paired
  per round;
- the 64-writer row again on a tmpfs, where fsync costs ~nothing: the CPU per operation of
  the commit path itself, and where it goes: the same path stepped with no task switch,
  and 64 tasks parked and woken as answers are, with nothing else;
- startup of a log of N records (default 1,000,000): full replay vs snapshot near the end,
  and records/s replayed into a lone voter's controller and committed image (the one replay);
- reading the same segment with our record reader vs kafka-python's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from kraftpy.controller import replay
from kraftpy.controller.log.partition_log import PartitionLog
from kraftpy.controller.log.snapshots import SnapshotId, write_snapshot
from kraftpy.controller.log.storage import MetadataStorage, format_storage
from kraftpy.controller.node import SWITCH_INTERVAL_S
from kraftpy.controller.quorum_controller import QuorumController
from kraftpy.controller.settings import ControllerSettings
from kraftpy.protocol.metadata_frame import encode_metadata_record
from kraftpy.protocol.record_batch import build_record_batch, iter_record_batches
from kraftpy.protocol.records.no_op_record import NoOpRecord
from kraftpy.protocol.records.producer_ids_record import ProducerIdsRecord

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support.lone_quorum import broker  # noqa: E402  (register and unfence a broker)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def raw_fsync_rate(directory: Path, seconds: float) -> float:
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            os.write(fd, b"x" * 100)
            os.fsync(fd)
            n += 1
        return n / (time.perf_counter() - start)
    finally:
        os.close(fd)
        path.unlink()


VALUE = encode_metadata_record(NoOpRecord(), 0)


def one_fsync_per_op(directory: Path, seconds: float) -> float:
    plog = PartitionLog.open(directory / "single")
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        plog.append([VALUE], leader_epoch=1, timestamp=0)
        plog.flush()
        n += 1
    elapsed = time.perf_counter() - start
    plog.close()
    return n / elapsed


def lone_quorum(data: Path, linger_ms: int) -> object:
    """A lone voter's quorum on a fresh data dir, as `kraftpy serve` opens it."""
    from kraftpy.controller import quorum
    from kraftpy.controller.config import build_config

    config = build_config({
        "process.roles": "controller", "node.id": "1",
        "listeners": "CONTROLLER://127.0.0.1:19093", "controller.listener.names": "CONTROLLER",
        "metadata.log.dir": str(data), "cluster.id": CLUSTER,
        "controller.quorum.append.linger.ms": str(linger_ms),
        # 0 = no AllocateProducerIds quota, so no request is throttled.
        "producer.id.allocation.quota.per.broker": "0",
        "metadata.log.max.snapshot.interval.ms": str(1 << 40),
        "metadata.log.max.record.bytes.between.snapshots": str(1 << 60),
    })
    return quorum.open_quorum(config, quorum.lone_voter(config))


async def leading(quorum: Any) -> None:
    """Until the lone voter leads with its bootstrap records committed."""
    with trio.fail_after(30):
        while not (quorum.running and quorum.controller.features.metadata_version
                   and quorum.hwm[0] >= quorum.storage.metadata.log_end_offset):
            await trio.sleep(0.001)


CPU_PER_OP: list[float] = []  # process CPU seconds per acknowledged operation, per run


def group_commit(directory: Path, writers: int, seconds: float, linger_ms: int = 0
                 ) -> tuple[float, float]:
    """The node's commit path end to end: `writers` trio tasks each looping `submit` of an
    AllocateProducerIds (one ProducerIdsRecord through the Raft core, answered once
    committed) against a lone voter's quorum. Returns (acknowledged operations/s,
    operations per fsync)."""
    quorum = lone_quorum(directory / f"group-{writers}-{linger_ms}", linger_ms)
    acked = ready = 0
    running = True  # a flag, not a clock read per operation
    all_ready = trio.Event()

    async def writer(i: int) -> None:
        nonlocal acked, ready
        request = await broker(quorum, i + 2)  # registered and unfenced; 1 is this node
        ready += 1
        if ready == writers:
            all_ready.set()
        await all_ready.wait()
        submit = quorum.submit
        while running:
            reply = await submit(request, 0)
            if reply.error_code:
                raise AssertionError(reply)
            acked += 1

    async def main() -> tuple[float, int, int]:
        nonlocal running
        async with trio.open_nursery() as nursery:
            await nursery.start(quorum.run)
            await leading(quorum)
            async with trio.open_nursery() as writing:
                for i in range(writers):
                    writing.start_soon(writer, i)
                await all_ready.wait()
                acked_before, fsyncs_before, began = acked, quorum.fsyncs, trio.current_time()
                cpu = time.process_time()
                await trio.sleep(seconds)
                running = False
                done, fsyncs = acked - acked_before, quorum.fsyncs - fsyncs_before
                elapsed = trio.current_time() - began
                CPU_PER_OP.append((time.process_time() - cpu) / max(done, 1))
            quorum.stop()
        return elapsed, done, fsyncs

    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL_S)  # as `kraftpy serve` runs (controller/node.py)
    try:
        elapsed, done, fsyncs = trio.run(main)
    finally:
        sys.setswitchinterval(previous)
        quorum.storage.close()
    return done / elapsed, done / max(fsyncs, 1)


def without_task_switches(directory: Path, writers: int = 64, rounds: int = 200,
                          repeats: int = 10) -> float:
    """The commit path's own CPU per operation, without a task switch: `writers`
    AllocateProducerIds handled one after another, one poll of the core (its drain and
    write), one fsync round (the commit, the replay into the committed image, the answers
    released), `rounds` times; the best of `repeats` (this thread's CPU)."""
    quorum = lone_quorum(directory / f"sync-{writers}", 0)
    best = float("inf")

    async def main() -> None:
        nonlocal best
        async with trio.open_nursery() as nursery:
            await nursery.start(quorum.run)
            await leading(quorum)
            requests = [await broker(quorum, i + 2) for i in range(writers)]
            host, runner = quorum.host, quorum.runner
            # Nothing below awaits, so no other task runs: the node's steps, in order.
            for _ in range(repeats):
                began = time.thread_time()
                for _ in range(rounds):
                    answers = [host.handle(request, 0) for request in requests]
                    runner.step(runner.driver.poll)
                    runner.flush_now()
                best = min(best, (time.thread_time() - began) / (rounds * writers))
                if not all(a.done and a.response.error_code == 0 for a in answers):
                    raise AssertionError([a.response for a in answers])
            quorum.stop()

    try:
        trio.run(main)
    finally:
        quorum.storage.close()
    return best


def task_switches_alone(writers: int, seconds: float) -> float:
    """CPU per operation of the task switches alone: `writers` trio tasks each parking as
    `Quorum.submit` parks an answer, a poll task woken by the first of them, and a round
    task that it wakes, which wakes every parked one, as a round releases its answers; no
    controller, no log."""
    from trio.lowlevel import Abort, current_task, reschedule, wait_task_rescheduled

    parked: list[Any] = []
    done = 0
    running = True
    wake, flush = trio.Event(), trio.Event()

    async def writer() -> None:
        nonlocal done
        task = current_task()

        def abort(_: Any) -> Abort:  # cancelled at the end: never woken after that
            if task in parked:
                parked.remove(task)
            return Abort.SUCCEEDED

        while running:
            parked.append(task)
            wake.set()
            await wait_task_rescheduled(abort)
            done += 1

    async def poll() -> None:
        nonlocal wake
        while running:
            if parked:
                flush.set()
            wake = trio.Event()
            with trio.move_on_after(1.0):
                await wake.wait()

    async def rounds() -> None:
        nonlocal flush
        while running:
            flush = trio.Event()
            await flush.wait()
            woken = parked[:]
            parked.clear()
            for task in woken:
                reschedule(task)

    async def main() -> float:
        nonlocal running
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            nursery.start_soon(rounds)
            for _ in range(writers):
                nursery.start_soon(writer)
            await trio.sleep(0.1)
            before, cpu = done, time.process_time()
            await trio.sleep(seconds)
            per_op = (time.process_time() - cpu) / max(done - before, 1)
            running = False
            nursery.cancel_scope.cancel()
        return per_op

    return trio.run(main)


def group_commit_lingering(directory: Path, writers: int, seconds: float
                           ) -> tuple[float, float]:
    return group_commit(directory, writers, seconds, linger_ms=25)


# The group commit rows: (label, how, writers).
GROUP_ROWS = [("linger 0", group_commit, 1), ("linger 0", group_commit, 8),
              ("linger 0", group_commit, 64), ("linger 25 ms", group_commit_lingering, 64)]


def commit_rounds(root: Path, rounds: int, seconds: float) -> None:
    """The fsync rows, interleaved: each round measures raw fsync, one fsync per operation
    and the node's commit path at 1, 8 and 64 writers (linger 0) and at 64 (linger 25 ms),
    back to back (every other round in reverse order), so a round's ratios share one disk
    state; the median and the best of the per-round ratios are printed."""
    names: list[object] = ["raw", "single", *GROUP_ROWS]
    rows: dict[object, list[float]] = {name: [] for name in names}
    per_fsync: dict[object, list[float]] = {row: [] for row in GROUP_ROWS}
    for i in range(rounds):
        # Odd rounds run the rows in reverse, so a drift of the disk during a round does not
        # always favour the same side of a ratio.
        for name in names if i % 2 == 0 else names[::-1]:
            if name == "raw":
                rows["raw"].append(raw_fsync_rate(root, seconds))
            elif name == "single":
                rows["single"].append(one_fsync_per_op(root / f"single-{i}", seconds))
            else:
                label, how, writers = name  # type: ignore[misc]
                rate, ops = how(root / f"round-{i}", writers, seconds)
                rows[name].append(rate)
                per_fsync[name].append(ops)
        single = rows["single"][-1]
        logs = " ".join(f"{rows[row][-1]:6.0f}" for row in GROUP_ROWS[:3])
        print(f"  round {i + 1}: raw fsync {rows['raw'][-1]:5.0f}/s, one fsync per op "
              f"{single:5.0f}/s, commit path 1/8/64 writers {logs}/s "
              f"({rows[GROUP_ROWS[2]][-1] / single:.1f}x), 64 writers at linger 25 ms "
              f"{rows[GROUP_ROWS[3]][-1]:6.0f}/s", flush=True)

    def ratio(name: object, base: str) -> tuple[float, float]:
        paired = [a / b for a, b in zip(rows[name], rows[base], strict=True)]
        return statistics.median(paired), max(paired)

    raw, single = statistics.median(rows["raw"]), statistics.median(rows["single"])
    print(f"medians of {rounds} rounds of {seconds:g}s:")
    print(f"{'raw os.fsync (write 100 B + fsync)':48s} {raw:10.0f} /s   "
          "(the limit for one fsync per op)")
    med, best = ratio("single", "raw")
    print(f"{'appends, one fsync per operation':48s} {single:10.0f} /s   "
          f"({med:.2f}x raw fsync)")
    for row in GROUP_ROWS:
        label, _, writers = row
        what = f"AllocateProducerIds, {writers} writers, {label}"
        med, best = ratio(row, "single")
        print(f"{what:48s} {statistics.median(rows[row]):10.0f} /s   ({med:.1f}x one-fsync-per-op, "
              f"best round {best:.1f}x; {statistics.median(per_fsync[row]):.1f} ops per fsync)")


def build_log(data: Path, records: int, per_batch: int, snapshot_at: int | None = None) -> None:
    """A formatted dir whose log holds `records` metadata records (mostly NoOps, as Kafka's),
    written with the log room itself (epoch 1), with a snapshot of the state at the first
    batch boundary at or after `snapshot_at`."""
    format_storage(data, cluster_id=CLUSTER, node_id=1, metadata_version=27)
    storage = MetadataStorage.open(data, node_id=1)
    controller = QuorumController(ControllerSettings(cluster_id=CLUSTER, node_id=1))
    mlog = storage.metadata
    pid = 0
    offset = mlog.log_end_offset
    while offset < records:
        n = min(per_batch, records - offset)
        values = [VALUE] * n
        if (offset // per_batch) % 50 == 0:
            pid += 1000
            record = ProducerIdsRecord(broker_id=1, broker_epoch=1, next_producer_id=pid)
            values[0] = encode_metadata_record(record, 0)
            controller.replay(record, 0, offset)
        mlog.append_batch(
            build_record_batch(
                values,
                base_offset=offset,
                partition_leader_epoch=1,
                timestamp=1_700_000_000_000 + offset,
            )
        )
        offset += n
        if snapshot_at is not None and offset >= snapshot_at:
            mlog.flush()
            write_snapshot(mlog.directory, SnapshotId(offset, 1),
                           [encode_metadata_record(r, v) for r, v in controller.snapshot_records()],
                           last_contained_log_timestamp=1_700_000_000_000 + offset - 1,
                           timestamp=1)
            snapshot_at = None
    mlog.flush()
    storage.close()


def startup(data: Path) -> tuple[float, int]:
    """Open and recover the dir, replay the newest snapshot and the log after it into a
    controller and a committed image, as a lone voter's start does."""
    start = time.perf_counter()
    storage = MetadataStorage.open(data, node_id=1)
    settings = ControllerSettings(cluster_id=CLUSTER, node_id=1)
    _, snapshot_records, log_records = replay.replay_snapshot_and_log(
        [QuorumController(settings), QuorumController(settings)], storage.snapshot,
        storage.metadata, None)
    elapsed = time.perf_counter() - start
    storage.close()
    (data / ".kafka_cleanshutdown").unlink()  # measure the crash path: no clean marker
    return elapsed, snapshot_records + log_records


def reader_speed(segment: Path) -> tuple[float, float]:
    from kafka.record.memory_records import MemoryRecords

    data = segment.read_bytes()
    best_ours = best_theirs = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        n = 0
        for batch in iter_record_batches(data):
            n += len(batch.values())
        best_ours = min(best_ours, time.perf_counter() - start)
        start = time.perf_counter()
        m = 0
        records = MemoryRecords(data)
        while records.has_next():
            for record in records.next_batch():
                record.value  # noqa: B018
                m += 1
        best_theirs = min(best_theirs, time.perf_counter() - start)
        assert n == m
    return n / best_ours, n / best_theirs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--per-batch", type=int, default=10)
    parser.add_argument("--seconds", type=float, default=1.0, help="per measurement")
    parser.add_argument("--rounds", type=int, default=5,
                        help="interleaved rounds of the fsync rows (median and best reported)")
    parser.add_argument("--cpu-dir", type=Path,
                        default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None,
                        help="a tmpfs for the CPU-only group commit row (default /dev/shm)")
    parser.add_argument(
        "--dir", type=Path, default=None, help="where to write (default: a temp dir)"
    )
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="kraftpy-bench-", dir=args.dir))
    try:
        print(f"directory: {root}")
        commit_rounds(root, args.rounds, args.seconds)
        if args.cpu_dir is not None and args.cpu_dir.is_dir():
            cpu_root = Path(tempfile.mkdtemp(prefix="kraftpy-bench-", dir=args.cpu_dir))
            try:
                for label, how, writers in GROUP_ROWS[2:3]:
                    CPU_PER_OP.clear()
                    rates = [how(cpu_root / f"round-{i}", writers, args.seconds)[0]
                             for i in range(args.rounds)]
                    best = max(rates)
                    print(f"{f'{writers} writers, {label}, on {args.cpu_dir}':48s} "
                          f"{best:10.0f} /s   (best of {len(rates)}; fsync ~free there: "
                          f"{1e6 * min(CPU_PER_OP):.1f} us of the process's CPU per op, "
                          f"median {1e6 * statistics.median(CPU_PER_OP):.1f})")
                # Where that CPU goes: the commit path itself, and the task switches.
                own = without_task_switches(cpu_root)
                print(f"{'  its commit path, without a task switch':48s} {1e6 * own:10.2f} us "
                      "of CPU per op (handle, append, write, fsync round, replay, release)")
                switches = min(task_switches_alone(64, args.seconds) for _ in range(3))
                print(f"{'  64 tasks parked and woken, nothing else':48s} "
                      f"{1e6 * switches:10.2f} us of CPU per op (the task switches' share)")
            finally:
                shutil.rmtree(cpu_root, ignore_errors=True)
        if args.records <= 0:
            return
        data = root / "data"
        t0 = time.perf_counter()
        build_log(data, args.records, args.per_batch)
        keep_after = max(args.records // 1000, 10)
        build_log(root / "data-snap", args.records, args.per_batch, args.records - keep_after)
        print(
            f"built two {args.records:,}-record logs ({args.per_batch} per batch; the second with "
            f"a snapshot {keep_after:,} records before its end) in {time.perf_counter() - t0:.1f}s"
        )
        full, replayed = startup(data)
        print(
            f"{'startup, full replay (no snapshot)':44s} {full:10.3f} s    ({replayed:,} records, "
            f"{replayed / full:,.0f} records/s replayed)"
        )
        snap, replayed_s = startup(root / "data-snap")
        print(
            f"{'startup, snapshot near the end + suffix':44s} {snap:10.3f} s    ({replayed_s:,} records; "
            f"{full / snap:.0f}x faster than full replay)"
        )
        segment = sorted((data / "__cluster_metadata-0").glob("*.log"))[0]
        ours, theirs = reader_speed(segment)
        print(f"{'record reader: kraftpy':44s} {ours:10,.0f} records/s")
        print(
            f"{'record reader: kafka-python':44s} {theirs:10,.0f} records/s   (kraftpy {ours / theirs:.1f}x)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
