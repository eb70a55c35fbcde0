"""Kafka's partition tools against three real Kafka 4.1 brokers on kraftpy, and on Kafka.

One cluster per controller (brokers 2 and 4 in rack "a", broker 3 in rack "b"), shared by
every scenario of this module, run in order:

- rack-aware placement: a topic of 6 partitions x 2 replicas has one replica in each rack for
  every partition and leaders in both racks (StripedReplicaPlacer); CreatePartitions takes it
  to 9 partitions, each new one placed the same way, led and fully in sync;
- `kafka-reassign-partitions --generate` proposes a move off broker 2, `--execute` moves the
  partition, `--verify` sees it completed; the "current assignment" it printed moves it back;
  the records written before are still there after both moves;
- `kafka-leader-election --election-type preferred` gives a partition back to its first
  replica after a reassignment changed the replica order;
- unclean: a partition on brokers 3 and 4 loses its follower (killed, fenced: ISR [3]), then
  its leader (killed: no live in-sync replica); the follower comes back. With
  `unclean.leader.election.enable=true` on the topic the controller makes it leader at once;
  without, the partition stays offline until `kafka-leader-election --election-type unclean`.

Each scenario records what the brokers' metadata shows; the tests check kraftpy's outcome and
that Kafka 4.1's controller gives the same one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.kafka import run_tool
from support.kafka_cluster import (
    KINDS,
    Cluster,
    describe,
    start_cluster,
    stop_cluster,
    wait_for,
)

pytestmark = pytest.mark.slow

SESSION_MS = 6000
RACKS = {2: "a", 3: "b", 4: "a"}
CONTROLLER_PROPS = {"broker.session.timeout.ms": str(SESSION_MS),
                    # the preferred election must be the tool's, not the periodic check's
                    "auto.leader.rebalance.enable": "false"}


def admin(bootstrap: str) -> Any:
    from kafka import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)


def create(bootstrap: str, name: str, *, partitions: int = -1, factor: int = -1,
           assignment: dict[int, list[int]] | None = None,
           configs: dict[str, str] | None = None) -> None:
    from kafka.admin import NewTopic

    client = admin(bootstrap)
    try:
        client.create_topics([NewTopic(name, partitions, factor,
                                       replica_assignments=assignment or {},
                                       topic_configs=configs or {})])
    finally:
        client.close()
    wait_for(lambda: all(leader >= 0 and len(isr) == len(replicas)
                         for leader, replicas, isr in describe(bootstrap, name).values()),
             60, f"{name} led and in sync")


def settled(read: Any, ok: Any, timeout: float, what: str) -> Any:
    """`read()` again until `ok` of it, and that very answer: each describe may ask another
    broker, and one whose metadata lags answers from before the change waited for (a CI run
    saw a partition missing that way), so a second read after the wait proves nothing."""
    seen: list[Any] = []

    def check() -> bool:
        seen[:] = [read()]
        return bool(ok(seen[0]))

    wait_for(check, timeout, what)
    return seen[0]


def produce(bootstrap: str, topic: str, values: list[str], partition: int = 0) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=10,
                             request_timeout_ms=10_000)
    try:
        for v in values:
            producer.send(topic, v.encode(), partition=partition).get(timeout=30)
    finally:
        producer.close(10)


def consume(bootstrap: str, topic: str, expected: int) -> list[str]:
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=10_000)
    try:
        values = []
        for message in consumer:
            values.append(message.value.decode())
            if len(values) >= expected:
                break
        return values
    finally:
        consumer.close()


# --- the scenarios ----------------------------------------------------------------------------

def placement(cluster: Cluster) -> dict[str, Any]:
    bootstrap = cluster.bootstrap()
    create(bootstrap, "racks", partitions=6, factor=2)
    before = describe(bootstrap, "racks")
    from kafka.admin import NewPartitions

    client = admin(bootstrap)
    try:
        client.create_partitions({"racks": NewPartitions(9)})
    finally:
        client.close()
    after = settled(lambda: describe(bootstrap, "racks"),
                    lambda now: len(now) == 9 and all(leader >= 0 and len(isr) == 2
                                                      for leader, _, isr in now.values()),
                    60, "9 partitions led and in sync")
    return {
        "partitions": len(after),
        "factors": sorted({len(r) for _, r, _ in after.values()}),
        "every_partition_spans_both_racks": all(
            {RACKS[b] for b in replicas} == {"a", "b"} for _, replicas, _ in after.values()),
        "both_racks_lead": {RACKS[leader] for leader, _, _ in before.values()} == {"a", "b"},
        "new_partitions_in_sync": all(
            after[p][0] in after[p][1] and sorted(after[p][2]) == sorted(after[p][1])
            for p in range(6, 9)),
        "old_partitions_unchanged": {p: after[p][1] for p in before}
        == {p: r for p, (_, r, _) in before.items()},
    }


def _json_after(text: str, heading: str) -> dict[str, Any]:
    """The JSON line the reassign tool prints under `heading`."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith(heading):
            return json.loads(lines[i + 1])
    raise AssertionError(f"no {heading!r} in:\n{text}")


def _reassign(bootstrap: str, work: Path, name: str, plan: dict[str, Any]) -> tuple[str, str]:
    path = work / name
    path.write_text(json.dumps(plan))
    executed = run_tool("ReassignPartitionsCommand", "--bootstrap-server", bootstrap,
                        "--reassignment-json-file", str(path), "--execute").check().stdout
    verified = ""

    def completed() -> bool:
        nonlocal verified
        verified = run_tool("ReassignPartitionsCommand", "--bootstrap-server", bootstrap,
                            "--reassignment-json-file", str(path), "--verify").check().stdout
        return "is completed" in verified

    wait_for(completed, 90, f"reassignment {name} completed", step=1.0)
    return executed, verified


def reassignment(cluster: Cluster, work: Path) -> dict[str, Any]:
    bootstrap = cluster.bootstrap()
    create(bootstrap, "moving", assignment={0: [2, 3]})
    values = [f"m-{i}" for i in range(50)]
    produce(bootstrap, "moving", values)
    topics = work / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": "moving"}]}))
    generated = run_tool("ReassignPartitionsCommand", "--bootstrap-server", bootstrap,
                         "--topics-to-move-json-file", str(topics), "--broker-list", "3,4",
                         "--generate").check().stdout
    current = _json_after(generated, "Current partition replica assignment")
    proposed = _json_after(generated, "Proposed partition reassignment configuration")
    executed, verified = _reassign(bootstrap, work, "away.json", proposed)
    target = sorted(proposed["partitions"][0]["replicas"])
    moved = settled(lambda: describe(bootstrap, "moving")[0],
                    lambda now: sorted(now[1]) == sorted(now[2]) == target, 60,
                    f"replicas and ISR {target}")
    _reassign(bootstrap, work, "back.json", current)
    back = settled(lambda: describe(bootstrap, "moving")[0],
                   lambda now: sorted(now[2]) == [2, 3], 60, "ISR [2, 3] after moving back")
    return {
        "current": current["partitions"][0]["replicas"],
        "proposed_set": sorted(proposed["partitions"][0]["replicas"]),
        "executed": "Successfully started partition reassignment for moving-0" in executed,
        "verified": "Reassignment of partition moving-0 is completed." in verified,
        "moved_replicas": sorted(moved[1]),
        "moved_isr": sorted(moved[2]),
        "moved_leader_in_target": moved[0] in (3, 4),
        "back_replicas": back[1],
        "back_isr": sorted(back[2]),
        "records_after": consume(bootstrap, "moving", len(values)) == values,
    }


def preferred_election(cluster: Cluster, work: Path) -> dict[str, Any]:
    bootstrap = cluster.bootstrap()
    create(bootstrap, "preferred", assignment={0: [2, 3, 4]})
    # The same replicas in another order: nothing to copy, the leader stays, 3 is preferred.
    _reassign(bootstrap, work, "order.json", {"version": 1, "partitions": [
        {"topic": "preferred", "partition": 0, "replicas": [3, 2, 4]}]})
    reordered = settled(lambda: describe(bootstrap, "preferred")[0],
                        lambda now: now[1] == [3, 2, 4], 60, "replicas [3, 2, 4]")
    elected = run_tool("LeaderElectionCommand", "--bootstrap-server", bootstrap,
                       "--election-type", "preferred", "--topic", "preferred",
                       "--partition", "0").check().stdout
    leader = settled(lambda: describe(bootstrap, "preferred")[0][0], lambda now: now == 3, 30,
                     "leader 3")
    again = run_tool("LeaderElectionCommand", "--bootstrap-server", bootstrap,
                     "--election-type", "preferred", "--topic", "preferred",
                     "--partition", "0")
    return {
        "reordered": (reordered[0], reordered[1]),
        "tool": "Successfully completed leader election (PREFERRED) for partitions "
                "preferred-0" in elected,
        "leader": leader,
        "second_run_not_needed": "Valid replica already elected for partitions preferred-0"
        in again.stdout + again.stderr,
    }


def unclean_election(cluster: Cluster) -> dict[str, Any]:
    bootstrap = cluster.bootstrap()
    create(bootstrap, "unclean-manual", assignment={0: [3, 4]})
    create(bootstrap, "unclean-auto", assignment={0: [3, 4]},
           configs={"unclean.leader.election.enable": "true"})
    topics = ("unclean-manual", "unclean-auto")
    for t in topics:
        produce(bootstrap, t, [f"{t}-before-{i}" for i in range(10)])
    state: dict[str, Any] = {}
    cluster.brokers[4].kill()   # the follower
    wait_for(lambda: all(describe(cluster.bootstrap(4), t)[0][2] == [3] for t in topics),
             SESSION_MS / 1000 + 20, "ISR [3] once broker 4 is fenced")
    cluster.brokers[3].kill()   # the leader, the last in-sync replica
    state["offline"] = settled(
        lambda: {t: describe(cluster.bootstrap(3, 4), t)[0][0] for t in topics},
        lambda now: all(leader == -1 for leader in now.values()),
        SESSION_MS / 1000 + 20, "no leader once broker 3 is fenced")
    cluster.brokers[4].start(timeout=120)
    others = cluster.bootstrap(3)
    wait_for(lambda: describe(others, "unclean-auto")[0][0] == 4, 30,
             "broker 4 elected uncleanly where the topic allows it")
    time.sleep(2.0)  # long enough for a wrong election of the other topic to show
    state["after_restart"] = {t: describe(others, t)[0][0] for t in topics}
    elected = run_tool("LeaderElectionCommand", "--bootstrap-server", others,
                       "--election-type", "unclean", "--topic", "unclean-manual",
                       "--partition", "0").check().stdout
    state["tool"] = ("Successfully completed leader election (UNCLEAN) for partitions "
                     "unclean-manual-0" in elected)
    state["after_tool"] = settled(lambda: {t: describe(others, t)[0][:3:2] for t in topics},
                                  lambda now: all(now[t][0] == 4 for t in topics), 30,
                                  "leader 4")
    produce(others, "unclean-manual", ["after"])
    # broker 4 was in sync when the first records were acknowledged: they are all there
    state["records"] = consume(others, "unclean-manual", 11) == [
        *(f"unclean-manual-before-{i}" for i in range(10)), "after"]
    cluster.brokers[3].start(timeout=120)
    wait_for(lambda: all(sorted(describe(bootstrap, t)[0][2]) == [3, 4] for t in topics), 60,
             "broker 3 back in sync")
    return state


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory, kafka_jars: Path
             ) -> Iterator[dict[str, dict[str, Any]]]:
    results: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        root = tmp_path_factory.mktemp(f"tools-{kind}")
        started = time.monotonic()
        cluster = start_cluster(root, kind, CONTROLLER_PROPS,
                                {b: {"broker.rack": rack} for b, rack in RACKS.items()})
        try:
            results[kind] = {
                "placement": placement(cluster),
                "reassignment": reassignment(cluster, root),
                "preferred": preferred_election(cluster, root),
                "unclean": unclean_election(cluster),
            }
            print(f"\n{kind}: {time.monotonic() - started:.0f} s\n"
                  f"{json.dumps(results[kind], indent=1)}")
        finally:
            stop_cluster(cluster)
    yield results


def test_rack_aware_placement_and_create_partitions(outcomes: dict[str, dict[str, Any]]
                                                    ) -> None:
    assert outcomes["kraftpy"]["placement"] == {
        "partitions": 9, "factors": [2], "every_partition_spans_both_racks": True,
        "both_racks_lead": True, "new_partitions_in_sync": True,
        "old_partitions_unchanged": True}


def test_reassign_partitions_moves_a_partition_away_and_back(
        outcomes: dict[str, dict[str, Any]]) -> None:
    o = outcomes["kraftpy"]["reassignment"]
    assert o["current"] == [2, 3] and o["proposed_set"] == [3, 4]
    assert o["executed"] and o["verified"]
    assert o["moved_replicas"] == [3, 4] and o["moved_isr"] == [3, 4]
    assert o["moved_leader_in_target"]
    assert o["back_replicas"] == [2, 3] and o["back_isr"] == [2, 3]
    assert o["records_after"]


def test_preferred_leader_election(outcomes: dict[str, dict[str, Any]]) -> None:
    assert outcomes["kraftpy"]["preferred"] == {
        "reordered": (2, [3, 2, 4]), "tool": True, "leader": 3, "second_run_not_needed": True}


def test_unclean_leader_election(outcomes: dict[str, dict[str, Any]]) -> None:
    o = outcomes["kraftpy"]["unclean"]
    assert o["offline"] == {"unclean-manual": -1, "unclean-auto": -1}
    assert o["after_restart"] == {"unclean-manual": -1, "unclean-auto": 4}
    assert o["tool"] and o["records"]
    assert o["after_tool"] == {"unclean-manual": (4, [4]), "unclean-auto": (4, [4])}


def test_kafka_controller_gives_the_same_outcomes(outcomes: dict[str, dict[str, Any]]
                                                 ) -> None:
    assert outcomes["kraftpy"] == outcomes["kafka"]
