"""Leader failover and controlled shutdown as clients see them: three real Kafka 4.1 brokers
on kraftpy beside the same brokers on a Kafka 4.1 controller.

    python benchmarks/vs_kafka_failover.py [--runs 10] [--session-ms 6000] [--keep DIR]

Two clusters, each a controller (`kraftpy serve`, or a Kafka 4.1 controller-only node with a
static voter set) and brokers 2, 3 and 4 (Kafka 4.1, the test suite's harness: 384 MB heap,
serial GC), the same `broker.session.timeout.ms` on both controllers. Only one cluster runs at
a time (both would not fit beside each other on a small machine), but runs alternate between
them: kraftpy, Kafka, Kafka, kraftpy, kraftpy, ... so a stretch of machine load weighs on both
sides alike. Between its runs a cluster is stopped (SIGTERM to every broker at once, then the
controller) and started again on its data.

A topic of 6 partitions, replication factor 3, min.insync.replicas=2 takes records from an
idempotent kafka-python producer (acks=all, one record at a time, partitions chosen by the
client) throughout each run. Each run, on a cluster whose every ISR is whole:
- failover: kill -9 of the broker leading partition 0, until the producer's next
  acknowledgement on partition 0 (the controller fences the broker when its session times
  out, elects a new leader, the brokers learn it, the client finds it and retries);
- controlled shutdown: SIGTERM of a broker that leads a partition, until its process exits
  (the broker asks its controller to let it go, its leaderships move, it stops).
The broker is restarted after each. `--timeline` prints, per failover, when the controller
fenced the broker and when the new leader of partition 0 took over, from their logs (seconds
after the kill), and per controlled shutdown when the controller let the broker go; `--keep`
keeps the clusters' directories and logs.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests")]

TOPIC = "failover"
ROWS = ("failover", "controlled shutdown")
# from the logs, seconds: kill -9 -> the controller fences the broker -> the new leader of
# partition 0 takes over -> the producer's acknowledgement; SIGTERM -> the controller lets the
# broker go -> its process exits
STEPS = ("kill -> fenced", "fenced -> new leader", "new leader -> acknowledged",
         "SIGTERM -> let go", "let go -> exited")
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] ")


def _stamp(line: str) -> float | None:
    """The wall-clock time of a log4j (Kafka) or logging (kraftpy) line."""
    m = STAMP.match(line)
    if m is None:
        return None
    return datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def first_line_after(text: str, after: float, *needles: str) -> float | None:
    """Seconds after `after` of the first line at or after it that holds every needle."""
    for line in text.splitlines():
        if all(n in line for n in needles):
            t = _stamp(line)
            if t is not None and t >= after - 0.001:
                return t - after
    return None


class Side:
    """One controller kind's cluster, started on first use, stopped between its runs."""

    def __init__(self, kind: str, root: Path, session_ms: int) -> None:
        self.kind, self.root, self.session_ms = kind, root, session_ms
        self.cluster: Any = None
        self.producer: Any = None
        self.results: dict[str, list[float]] = {row: [] for row in ROWS}
        self.steps: dict[str, list[float]] = {step: [] for step in STEPS}
        self.timelines: list[str] = []
        self.acked = self.errors = 0

    def whole(self) -> bool:
        from support.kafka_cluster import BROKERS, describe
        return all(len(isr) == 3 and leader in BROKERS
                   for leader, _, isr in describe(self.cluster.bootstrap(), TOPIC).values())

    def up(self) -> None:
        from support.kafka import run_tool
        from support.kafka_cluster import AckedProducer, start_cluster, wait_for

        if self.cluster is None:
            self.cluster = start_cluster(self.root, self.kind,
                                         {"broker.session.timeout.ms": str(self.session_ms)})
            run_tool("TopicCommand", "--bootstrap-server", self.cluster.bootstrap(),
                     "--create", "--topic", TOPIC, "--partitions", "6",
                     "--replication-factor", "3", "--config",
                     "min.insync.replicas=2").check()
        else:
            self.cluster.stop_controller.__self__.start(timeout=120)
            for broker in self.cluster.brokers.values():
                broker.start(wait=False)
            for broker in self.cluster.brokers.values():
                broker.wait_started(timeout=120)
        wait_for(self.whole, 120, "every ISR whole")
        self.producer = AckedProducer(self.cluster.bootstrap(), TOPIC, limit_s=3600)
        self.producer.start()
        wait_for(lambda: len(self.producer.acked) > 50, 60, "50 acknowledgements")

    def run(self, run: int) -> None:
        from support.kafka_cluster import describe, wait_for

        cluster, producer = self.cluster, self.producer
        bootstrap = cluster.bootstrap()
        wait_for(self.whole, 120, "every ISR whole")
        time.sleep(1.0)
        victim = describe(bootstrap, TOPIC)[0][0]
        killed, killed_wall = time.monotonic(), time.time()
        cluster.brokers[victim].kill()
        wait_for(lambda: bool(producer.acks_on(0, killed)), 120,
                 "an acknowledgement on partition 0", step=0.01)
        failover = producer.acks_on(0, killed)[0] - killed
        self.results["failover"].append(failover)
        fenced = self._fenced(victim, killed_wall)
        leads = min((t for b, n in cluster.brokers.items() if b != victim
                     for t in [first_line_after(n.log_text(), killed_wall,
                                                f"{TOPIC}-0", "starts at leader epoch")]
                     if t is not None), default=None)
        cluster.brokers[victim].start(timeout=120)
        wait_for(self.whole, 120, "every ISR whole")
        time.sleep(1.0)
        leaders = {leader for leader, _, _ in describe(bootstrap, TOPIC).values()}
        leaving = sorted(leaders)[run % len(leaders)]
        started, started_wall = time.monotonic(), time.time()
        status = cluster.brokers[leaving].stop(timeout=120)
        shutdown = time.monotonic() - started
        self.results["controlled shutdown"].append(shutdown)
        assert status == 143, f"broker {leaving} exited {status}"
        granted = first_line_after(cluster.brokers[leaving].log_text(), started_wall,
                                   "The controller has asked us to exit")
        cluster.brokers[leaving].start(timeout=120)

        for step, (start, end) in zip(STEPS, ((0.0, fenced), (fenced, leads), (leads, failover),
                                              (0.0, granted), (granted, shutdown)), strict=True):
            if start is not None and end is not None:
                self.steps[step].append(end - start)

        def at(t: float | None) -> str:
            return "?" if t is None else f"{t:.2f}"
        self.timelines.append(
            f"{self.kind} run {run + 1}: kill -9 of {victim}: fenced {at(fenced)}, "
            f"new leader of {TOPIC}-0 {at(leads)}, acknowledged {failover:.2f} s; "
            f"SIGTERM of {leaving}: let go {at(granted)}, exited {shutdown:.2f} s")
        print(self.timelines[-1], flush=True)

    def _fenced(self, broker: int, after: float) -> float | None:
        text = self.cluster.controller_log()
        if self.kind == "kraftpy":
            return first_line_after(text, after, f"Broker {broker} ", "-> FENCED")
        return first_line_after(text, after, f"Fencing broker {broker} ", "timed out")

    def down(self) -> None:
        """Producer stopped, then every broker SIGTERMed at once, then the controller."""
        producer, self.producer = self.producer, None
        if producer is not None:
            producer.stop.set()
            producer.join(120)
            self.acked += len(producer.acked)
            self.errors += len(producer.errors)
        if self.cluster is None:
            return
        for broker in self.cluster.brokers.values():
            if broker.proc is not None and broker.proc.poll() is None:
                broker.proc.terminate()
        for broker in self.cluster.brokers.values():
            broker.stop(timeout=120)
        self.cluster.stop_controller()

    def kill(self) -> None:
        if self.cluster is not None:
            from support.kafka_cluster import stop_cluster
            stop_cluster(self.cluster)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--keep", type=Path, help="keep the clusters' directories here")
    parser.add_argument("--timeline", action="store_true",
                        help="print each run's timeline from the logs again at the end")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kraftpy-failover-") as tmp:
        root = args.keep or Path(tmp)
        sides = {kind: Side(kind, root / kind, args.session_ms) for kind in ("kraftpy", "kafka")}
        try:
            for run in range(args.runs):
                order = ("kraftpy", "kafka") if run % 2 == 0 else ("kafka", "kraftpy")
                for kind in order:
                    side = sides[kind]
                    side.up()
                    try:
                        side.run(run)
                    finally:
                        side.down()
        finally:
            for side in sides.values():
                side.kill()
    for side in sides.values():
        print(f"{side.kind}: {side.acked} acknowledged, {side.errors} errors")
    if args.timeline:
        print()
        for side in sides.values():
            print("\n".join(side.timelines))
    print(f"\n{args.runs} runs each, alternating, broker.session.timeout.ms={args.session_ms}\n")
    print("| row | kraftpy p50 | kraftpy max | Kafka p50 | Kafka max | p50 ratio | target |")
    print("|---|---|---|---|---|---|---|")
    for row in ROWS:
        ours, theirs = sides["kraftpy"].results[row], sides["kafka"].results[row]
        ratio = statistics.median(ours) / statistics.median(theirs)
        print(f"| {row} | {statistics.median(ours):.2f} s | {max(ours):.2f} s | "
              f"{statistics.median(theirs):.2f} s | {max(theirs):.2f} s | {ratio:.2f}x | "
              f"<= 1x {'met' if ratio <= 1 else 'MISSED'} |")
    print("\nFrom the logs, median [max] seconds:\n")
    print("| step | kraftpy | Kafka |")
    print("|---|---|---|")
    for step in STEPS:
        cells = []
        for side in sides.values():
            got = side.steps[step]
            cells.append(f"{statistics.median(got):.2f} [{max(got):.2f}]" if got else "?")
        print(f"| {step} | {' | '.join(cells)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
