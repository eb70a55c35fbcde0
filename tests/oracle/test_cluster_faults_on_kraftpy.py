"""Randomized broker faults on kraftpy: three real Kafka 4.1 brokers killed and restarted at
random moments under acks=all produce; no acknowledged record lost, no producer-id block
granted twice.

A topic of 6 partitions, replication factor 3 and min.insync.replicas=2 takes an idempotent
producer's records the whole time. Faults come one at a time, bounded by FAULTS and
FAULT_SECONDS: a random broker (the leader of partition 0 as likely as any other) is killed
with SIGKILL or stopped with SIGTERM, stays down for a random time (shorter or longer than
the session timeout, so it comes back both before and after the controller fenced it) and is
restarted; the next fault waits until every ISR is whole again and then a random moment more
(so no partition is ever left with its last in-sync replica uncleanly gone). The schedule comes
from a seeded random source: `KRAFTPY_FAULT_SEED` picks another, and the test prints the one
it ran with. The brokers take producer-id blocks from kraftpy as their producers need ids
(a restarted broker asks for a new one); `kraftpy pid-audit` then finds every block granted
once, none overlapping another.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.kafka import run_tool
from support.kafka_cluster import (
    BROKERS,
    AckedProducer,
    describe,
    start_cluster,
    stop_cluster,
    wait_for,
)
from support.producers import read_committed

pytestmark = pytest.mark.slow

SESSION_MS = 6000
TOPIC = "faults"
FAULTS = 5
FAULT_SECONDS = 120
SEED = int(os.environ.get("KRAFTPY_FAULT_SEED", "1"))


def test_random_broker_faults_lose_no_acknowledged_record(
        tmp_path: Path, kafka_jars: Path) -> None:
    rng = random.Random(SEED)
    cluster = start_cluster(tmp_path, "kraftpy", {"broker.session.timeout.ms": str(SESSION_MS)})
    schedule: list[str] = []
    try:
        bootstrap = cluster.bootstrap()
        run_tool("TopicCommand", "--bootstrap-server", bootstrap, "--create", "--topic", TOPIC,
                 "--partitions", "6", "--replication-factor", "3", "--config",
                 "min.insync.replicas=2").check()

        def whole() -> bool:
            return all(len(isr) == 3 and leader in BROKERS
                       for leader, _, isr in describe(bootstrap, TOPIC).values())

        wait_for(whole, 60, "every partition led with ISR 3")
        producer = AckedProducer(bootstrap, TOPIC)
        producer.start()
        try:
            wait_for(lambda: len(producer.acked) > 100, 60, "100 acknowledgements")
            started = time.monotonic()
            for _ in range(FAULTS):
                if time.monotonic() - started > FAULT_SECONDS:
                    break
                wait_for(whole, 90, "every ISR whole before the next fault")
                time.sleep(rng.uniform(0, 3))
                victim = rng.choice(BROKERS)
                how = rng.choice(("kill -9", "kill -9", "SIGTERM"))
                down = rng.uniform(0.5, 2 * SESSION_MS / 1000)
                node = cluster.brokers[victim]
                if how == "SIGTERM":
                    status = node.stop(timeout=60)
                    assert status == 143, f"broker {victim} exited {status} on SIGTERM"
                else:
                    node.kill()
                time.sleep(down)
                acked = len(producer.acked)
                node.start(timeout=120)
                schedule.append(f"{how} broker {victim}, down {down:.1f} s, "
                                f"{len(producer.acked) - acked} acks while it restarted")
            wait_for(whole, 90, "every ISR whole after the last fault")
            before = len(producer.acked)
            wait_for(lambda: len(producer.acked) > before + 50, 60, "acks after the faults")
        finally:
            producer.stop.set()
            producer.join(120)
        acked = producer.values()
        seen = read_committed(bootstrap, TOPIC, len(acked))
        lost = sorted(set(acked) - set(seen), key=lambda v: int(v[2:]))
        print(f"\nseed {SEED}: " + "; ".join(schedule) + f"\n{len(acked)} acknowledged, "
              f"{len(lost)} lost, {len(seen) - len(set(seen))} read twice, "
              f"{len(producer.errors)} producer errors {producer.errors[:3]}")
        assert len(schedule) >= 3, schedule
        assert len(acked) > 500 and not lost, lost[:20]
    finally:
        stop_cluster(cluster)
    audit = subprocess.run([sys.executable, "-m", "kraftpy.tools", "pid-audit", "--json",
                            str(cluster.controller_data)], capture_output=True, text=True,
                           timeout=60)
    assert audit.returncode == 0, audit.stdout + audit.stderr
    report = json.loads(audit.stdout)
    assert report["findings"] == [], report["findings"]
    ranges = sorted((b["first_id"], b["last_id"]) for b in report["blocks"])
    assert ranges and all(a[1] < b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    print(f"{len(ranges)} producer-id blocks: "
          + ", ".join(f"{b['broker_id']}:{b['first_id']}-{b['last_id']}"
                      for b in report["blocks"]))
