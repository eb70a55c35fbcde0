"""A log directory lost on a real Kafka 4.1 broker with two of them (JBOD, KIP-858), on kraftpy
and on a Kafka 4.1 controller.

Brokers 2 and 3; broker 2 keeps its logs in two directories and leads every partition of a
topic of 4 partitions on [2, 3]. Its second directory is deleted under it: the broker's next
write there (its recovery-point checkpoint, every second here) fails, it marks the directory
offline and says so in a heartbeat (OfflineLogDirs). The controller must then move the
leadership of exactly the partitions in that directory to broker 3 and drop broker 2 from
their ISRs, while broker 2 keeps leading the partitions in its other directory and stays
registered. Both controllers must give the same outcome.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support.kafka import run_tool
from support.kafka_cluster import KINDS, describe, start_cluster, stop_cluster, wait_for

pytestmark = pytest.mark.slow

TOPIC = "jbod"
OUTCOMES: dict[str, dict[str, object]] = {}


@pytest.mark.parametrize("kind", KINDS)
def test_a_lost_log_directory_moves_its_partitions_leaders(tmp_path: Path, kind: str) -> None:
    first, second = (tmp_path / "broker-2" / "data", tmp_path / "broker-2" / "data2")
    # A generous session: on a machine busy with other JVMs a broker's heartbeat may come late,
    # and a fence would move the partitions this test watches for another reason.
    cluster = start_cluster(tmp_path, kind, {"broker.session.timeout.ms": "30000"},
                            broker_props={2: {"log.dirs": f"{first},{second}",
                                              "log.flush.offset.checkpoint.interval.ms": "1000"}},
                            brokers=(2, 3))
    try:
        bootstrap = cluster.bootstrap()
        run_tool("TopicCommand", "--bootstrap-server", bootstrap, "--create", "--topic",
                 TOPIC, "--replica-assignment", "2:3,2:3,2:3,2:3").check()
        wait_for(lambda: all(leader == 2 and sorted(isr) == [2, 3]
                             for leader, _, isr in describe(bootstrap, TOPIC).values()),
                 60, "every partition led by 2, in sync")
        def placed(directory: Path) -> list[int]:
            return sorted(int(p.name.rsplit("-", 1)[1]) for p in directory.glob(f"{TOPIC}-*"))

        # the metadata can say broker 2 leads before it has made every log: wait for all four
        wait_for(lambda: sorted(placed(first) + placed(second)) == [0, 1, 2, 3], 30,
                 "broker 2's four partition logs")
        lost, kept = placed(second), placed(first)
        assert lost and kept, (lost, kept)
        shutil.rmtree(second)

        def moved() -> bool:
            state = describe(cluster.bootstrap(), TOPIC)
            return all(state[p][0] == 3 and state[p][2] == [3] for p in lost)
        wait_for(moved, 60, "the lost directory's partitions led by 3")
        # The other directory's partitions stay broker 2's, back in sync with 3 if a busy
        # moment took 3 out of their ISR meanwhile.
        wait_for(lambda: all(describe(cluster.bootstrap(), TOPIC)[p][0] == 2
                             and sorted(describe(cluster.bootstrap(), TOPIC)[p][2]) == [2, 3]
                             for p in kept), 60, "the kept directory's partitions led by 2")
        state = describe(cluster.bootstrap(), TOPIC)
        OUTCOMES[kind] = {
            "lost": {p: (state[p][0], state[p][2]) for p in lost},
            "kept": {p: (state[p][0], sorted(state[p][2])) for p in kept},
            "broker 2 running": cluster.brokers[2].running,
        }
        assert OUTCOMES[kind]["kept"] == {p: (2, [2, 3]) for p in kept}
        assert OUTCOMES[kind]["broker 2 running"]
        if kind == "kraftpy":
            assert "marked offline" in cluster.controller_log()
    finally:
        stop_cluster(cluster)


def test_both_controllers_gave_the_same_outcome() -> None:
    if set(OUTCOMES) != set(KINDS):
        pytest.fail(f"the scenario did not finish on every controller: {sorted(OUTCOMES)}")
    shape = {kind: {"lost": sorted(o["lost"].values()), "kept": sorted(o["kept"].values()),
                    "running": o["broker 2 running"]}
             for kind, o in OUTCOMES.items()}
    assert shape["kraftpy"] == shape["kafka"], shape
