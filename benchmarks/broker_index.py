"""What the broker-to-partition indexes (BrokersToIsrs, BrokersToElrs, partitions by
directory, imbalanced partitions) save and cost, in process, on 100,000 partitions.

    python benchmarks/broker_index.py [--topics 1000] [--partitions 100] [--brokers 12]

The controller holds `--topics` x `--partitions` partitions, replication factor 3 over
`--brokers` brokers (Kafka's striped order), plus a broker 999 that is in the ISR of 10
partitions only. Each row times the same event two ways: finding the partitions by a walk over
every partition (what the controller did before the indexes) and by the index, then building
the event's PartitionChangeRecords the same way; the records are not applied, so every
round starts from the same state. Best of `--rounds`, in CPU time. The last rows are the indexes' price:
replaying every PartitionRecord with and without them, and the memory they take.
No row asserts a time; read the numbers.
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
import uuid
from collections.abc import Callable
from typing import Any

from kraftpy.controller.partition_change import NO_LEADER
from kraftpy.controller.quorum_controller import QuorumController
from kraftpy.controller.replication_control import Partition, ReplicationControlManager
from kraftpy.controller.settings import ControllerSettings
from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraftpy.protocol.messages.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
)
from kraftpy.protocol.records.partition_record import PartitionRecord
from kraftpy.protocol.records.topic_record import TopicRecord

FEATURES = (("metadata.version", 7, 27), ("kraft.version", 0, 1),
            ("eligible.leader.replicas.version", 0, 1), ("group.version", 0, 1),
            ("transaction.version", 0, 2), ("share.version", 0, 1),
            ("streams.version", 0, 1))
SMALL = 999  # a broker in the ISR of few partitions


class Node:
    """The controller with nothing but handle and apply (offsets counted, not written)."""

    def __init__(self) -> None:
        self.qc = QuorumController(ControllerSettings(cluster_id="bench-cluster",
                                                      node_id=3000))
        self.end, self.now = 0, 1_000
        self.qc.activate(leader_epoch=1, now_ms=self.now)
        self.apply(self.qc.tick(now_ms=self.now, next_offset=self.end))

    def apply(self, result: Any) -> Any:
        self.qc.apply(result, offset=self.end, txn_offset=0)
        self.end += len(result.records)
        return result.response

    def handle(self, request: Any, version: int) -> Any:
        return self.apply(self.qc.handle(request, version, now_ms=self.now,
                                         next_offset=self.end))

    def broker(self, broker_id: int) -> None:
        epoch = self.handle(BrokerRegistrationRequest(
            broker_id=broker_id, cluster_id="bench-cluster", incarnation_id=uuid.uuid4(),
            listeners=[], features=[Feature(name=n, min_supported_version=lo,
                                            max_supported_version=hi)
                                    for n, lo, hi in FEATURES],
            rack=None, log_dirs=[uuid.uuid4()]), 4).broker_epoch
        reply = self.handle(BrokerHeartbeatRequest(broker_id=broker_id, broker_epoch=epoch,
                                                   current_metadata_offset=self.end), 1)
        assert not reply.is_fenced


def partition_records(topics: int, partitions: int, brokers: int) -> list[Any]:
    out: list[Any] = []
    for t in range(topics):
        topic_id = uuid.UUID(int=(t + 1) << 64)
        out.append((TopicRecord(name=f"topic-{t}", topic_id=topic_id), 0))
        for p in range(partitions):
            first = (t * partitions + p) % brokers + 1
            replicas = [(first - 1 + i) % brokers + 1 for i in range(3)]
            if t == 0 and p < 10:
                replicas[2] = SMALL
            out.append((PartitionRecord(partition_id=p, topic_id=topic_id, replicas=replicas,
                                        isr=list(replicas), leader=replicas[0], leader_epoch=0,
                                        partition_epoch=0), 0))
    return out


def best(fn: Callable[[], object], rounds: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(rounds):
        gc.collect()
        start = time.process_time()  # CPU time: the shared machine's load moves wall time
        out = fn()
        times.append(time.process_time() - start)
    return min(times), out


def walk_in_isr(rc: ReplicationControlManager, broker: int) -> list[Partition]:
    return [p for p in rc.partitions() if broker in p.isr]


def walk_leaderless(rc: ReplicationControlManager) -> list[Partition]:
    return [p for p in rc.partitions() if p.leader == NO_LEADER]


def walk_imbalanced(rc: ReplicationControlManager) -> list[Partition]:
    return [p for p in rc.partitions() if p.replicas and p.leader != p.replicas[0]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=100)
    parser.add_argument("--brokers", type=int, default=12)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    node = Node()
    for b in [*range(1, args.brokers + 1), SMALL]:
        node.broker(b)
    records = partition_records(args.topics, args.partitions, args.brokers)
    rc = node.qc.replication
    total = args.topics * args.partitions

    # the price: replay with and without the indexes, and their memory
    def replay_all(index: bool) -> None:
        fresh = ReplicationControlManager()
        if not index:
            fresh._index_new = lambda *_: None  # type: ignore[method-assign]
        for record, _ in records:
            if isinstance(record, TopicRecord):
                fresh.replay_topic(record)
            else:
                fresh.replay_partition(record)
    replay_without, _ = best(lambda: replay_all(False), max(1, args.rounds // 2))
    replay_with, _ = best(lambda: replay_all(True), max(1, args.rounds // 2))
    for record, version in records:
        node.qc.replay(record, version, node.end)
        node.end += 1
    gc.collect()
    tracemalloc.start()
    probe = ReplicationControlManager()
    for record, _ in records:
        if isinstance(record, TopicRecord):
            probe.replay_topic(record)
        else:
            probe.replay_partition(record)
    with_index = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del probe
    gc.collect()
    tracemalloc.start()
    probe = ReplicationControlManager()
    probe._index_new = lambda *_: None  # type: ignore[method-assign]
    for record, _ in records:
        if isinstance(record, TopicRecord):
            probe.replay_topic(record)
        else:
            probe.replay_partition(record)
    without_index = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    del probe

    busy = 1  # in the ISR of a quarter of the partitions (12 brokers, RF 3)
    rows: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
        (f"fence broker {busy} ({len(rc.in_isr(busy)):,} ISRs): find + records",
         lambda: rc.generate_leader_and_isr_updates(walk_in_isr(rc, busy), remove=busy),
         lambda: rc.handle_broker_fenced(busy)),
        (f"... finding broker {busy}'s partitions only",
         lambda: walk_in_isr(rc, busy), lambda: rc.in_isr(busy)),
        (f"fence broker {SMALL} ({len(rc.in_isr(SMALL))} ISRs): find + records",
         lambda: rc.generate_leader_and_isr_updates(walk_in_isr(rc, SMALL), remove=SMALL),
         lambda: rc.handle_broker_fenced(SMALL)),
        (f"controlled-shutdown heartbeat: has broker {SMALL} leaderships?",
         lambda: any(p.leader == SMALL for p in rc.partitions()),
         lambda: rc.leads_partitions(SMALL)),
        ("unfence a broker: leaderless partitions (none)",
         lambda: rc.generate_leader_and_isr_updates(walk_leaderless(rc), add=busy),
         lambda: rc.handle_broker_unfenced(busy)),
        ("periodic preferred election: imbalanced partitions (none)",
         lambda: walk_imbalanced(rc),
         lambda: rc.imbalanced_partitions()),
    ]
    print(f"{total:,} partitions, RF 3, {args.brokers} brokers + broker {SMALL}; "
          f"best of {args.rounds} rounds\n")
    print("| event | walk (before) | index (after) | before / after |")
    print("|---|---|---|---|")
    for name, before, after in rows:
        t_before, out_before = best(before, args.rounds)
        t_after, out_after = best(after, args.rounds)
        assert _same(out_before, out_after), name
        print(f"| {name} | {_ms(t_before)} | {_ms(t_after)} | "
              f"{_ratio(t_before / max(t_after, 1e-9))} |")
    print(f"| replay {total:,} PartitionRecords (+ {args.topics:,} topics) | "
          f"{_ms(replay_without)} | {_ms(replay_with)} | "
          f"{_ratio(replay_without / replay_with)} |")
    print(f"| memory of the partitions | {without_index / 1e6:.1f} MB | "
          f"{with_index / 1e6:.1f} MB | {without_index / with_index:.2f}x |")
    return 0


def _same(a: object, b: object) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        key = repr
        return sorted(map(key, a)) == sorted(map(key, b))
    return bool(a) == bool(b)


def _ratio(x: float) -> str:
    return f"{x:.2f}x" if x < 10 else f"{x:,.0f}x"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.3f} ms" if seconds < 0.01 else f"{seconds * 1e3:,.1f} ms"


if __name__ == "__main__":
    raise SystemExit(main())
