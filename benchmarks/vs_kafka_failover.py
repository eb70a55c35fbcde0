"""Leader failover and controlled shutdown as clients see them: three real Kafka 4.1 brokers
on kraftpy beside the same brokers on a Kafka 4.1 controller.

    python benchmarks/vs_kafka_failover.py [--runs 10] [--session-ms 6000]

One side after the other (the two clusters would not fit beside each other on a small
machine): a controller (`kraftpy serve`, or a Kafka 4.1 controller-only node with a static
voter set), brokers 2, 3 and 4 (Kafka 4.1, the test suite's harness: 384 MB heap, serial GC),
the same `broker.session.timeout.ms` on both controllers. A topic of 6 partitions,
replication factor 3, min.insync.replicas=2 takes records from an idempotent kafka-python
producer (acks=all, one record at a time, partitions chosen by the client) for the whole run.

Each run, on a cluster whose every ISR is whole:
- failover: kill -9 of the broker leading partition 0, until the producer's next
  acknowledgement on partition 0 (the controller fences the broker when its session times
  out, elects a new leader, the brokers learn it, the client finds it and retries);
- controlled shutdown: SIGTERM of a broker that leads a partition, until its process exits
  (the broker asks its controller to let it go, its leaderships move, it stops).
The broker is restarted after each, and the next run waits until every ISR is whole again.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "tests")]

TOPIC = "failover"


def measure(kind: str, root: Path, runs: int, session_ms: int) -> dict[str, list[float]]:
    from support.kafka import run_tool
    from support.kafka_cluster import (
        BROKERS,
        AckedProducer,
        describe,
        start_cluster,
        stop_cluster,
        wait_for,
    )

    cluster = start_cluster(root, kind, {"broker.session.timeout.ms": str(session_ms)})
    out: dict[str, list[float]] = {"failover": [], "controlled shutdown": []}
    try:
        bootstrap = cluster.bootstrap()
        run_tool("TopicCommand", "--bootstrap-server", bootstrap, "--create", "--topic", TOPIC,
                 "--partitions", "6", "--replication-factor", "3", "--config",
                 "min.insync.replicas=2").check()

        def whole() -> bool:
            return all(len(isr) == 3 and leader in BROKERS
                       for leader, _, isr in describe(bootstrap, TOPIC).values())

        wait_for(whole, 90, "every ISR whole")
        producer = AckedProducer(bootstrap, TOPIC, limit_s=3600)
        producer.start()
        try:
            wait_for(lambda: len(producer.acked) > 100, 60, "100 acknowledgements")
            for run in range(runs):
                wait_for(whole, 120, "every ISR whole")
                time.sleep(1.0)
                victim = describe(bootstrap, TOPIC)[0][0]
                killed = time.monotonic()
                cluster.brokers[victim].kill()
                wait_for(lambda t=killed: bool(producer.acks_on(0, t)), 120,
                         "an acknowledgement on partition 0", step=0.01)
                out["failover"].append(producer.acks_on(0, killed)[0] - killed)
                cluster.brokers[victim].start(timeout=120)
                wait_for(whole, 120, "every ISR whole")
                time.sleep(1.0)
                leaders = {leader for leader, _, _ in describe(bootstrap, TOPIC).values()}
                leaving = sorted(leaders)[run % len(leaders)]
                started = time.monotonic()
                status = cluster.brokers[leaving].stop(timeout=120)
                out["controlled shutdown"].append(time.monotonic() - started)
                assert status == 143, f"broker {leaving} exited {status}"
                cluster.brokers[leaving].start(timeout=120)
                print(f"{kind} run {run + 1}: failover {out['failover'][-1]:.2f} s, "
                      f"controlled shutdown {out['controlled shutdown'][-1]:.2f} s",
                      flush=True)
        finally:
            producer.stop.set()
            producer.join(120)
        print(f"{kind}: {len(producer.acked)} acknowledged, {len(producer.errors)} errors",
              flush=True)
    finally:
        stop_cluster(cluster)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--session-ms", type=int, default=6000)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="kraftpy-failover-") as tmp:
        for kind in ("kraftpy", "kafka"):
            results[kind] = measure(kind, Path(tmp) / kind, args.runs, args.session_ms)
    print(f"\n{args.runs} runs each, broker.session.timeout.ms={args.session_ms}\n")
    print("| row | kraftpy p50 | kraftpy max | Kafka p50 | Kafka max | p50 ratio | target |")
    print("|---|---|---|---|---|---|---|")
    for row in ("failover", "controlled shutdown"):
        ours, theirs = results["kraftpy"][row], results["kafka"][row]
        ratio = statistics.median(ours) / statistics.median(theirs)
        print(f"| {row} | {statistics.median(ours):.2f} s | {max(ours):.2f} s | "
              f"{statistics.median(theirs):.2f} s | {max(theirs):.2f} s | {ratio:.2f}x | "
              f"<= 1x {'met' if ratio <= 1 else 'MISSED'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
