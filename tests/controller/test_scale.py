"""A big cluster costs no request more, and no event holds the loop long (issue: a million
partitions).

- Every answer that does not list partitions (ApiVersions' features, DescribeCluster,
  registrations, heartbeats, the metrics gauges, the timers, UnregisterBroker, producer ids,
  one-topic admin requests...) does the same work with 100,000 partitions in the image as
  with 10. Work is counted, not timed: the Python steps the interpreter runs (its trace
  events: calls, lines, loop iterations), which a walk over the partitions multiplies.
- A broker event's leader moves (a fence, a controlled shutdown, an unfence) and the periodic
  elections are made at most `moves.limit` partitions per controller event, the rest in the
  ticks that follow, with every other request answered in between; the records and the end
  state are the ones one event makes (Kafka's).

The images are built by replaying records straight into the controller (a second or two).
"""

from __future__ import annotations

import sys
import types
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kraftpy.controller.api.api_versions import _features
from kraftpy.controller.feature_control import SUPPORTED_FEATURES
from kraftpy.controller.leader_moves import BUILD_COST
from kraftpy.controller.metrics import NodeCollector
from kraftpy.controller.node import RunningNode
from kraftpy.controller.partition_change import PartitionChangeBuilder
from kraftpy.controller.registration import registration_request as controller_registration
from kraftpy.controller.replication_control import MoveContext, ReplicationControlManager
from kraftpy.controller.settings import AdvertisedEndpoint
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.alter_partition_request import (
    AlterPartitionRequest,
    BrokerState,
    PartitionData,
    TopicData,
)
from kraftpy.protocol.messages.create_partitions_request import (
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from kraftpy.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraftpy.protocol.messages.delete_topics_request import DeleteTopicsRequest
from kraftpy.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kraftpy.protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from kraftpy.protocol.messages.describe_producers_request import (
    DescribeProducersRequest,
    TopicRequest,
)
from kraftpy.protocol.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from kraftpy.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kraftpy.protocol.messages.list_partition_reassignments_request import (
    ListPartitionReassignmentsRequest,
)
from kraftpy.protocol.messages.unregister_broker_request import UnregisterBrokerRequest
from kraftpy.protocol.messages.update_features_request import (
    FeatureUpdateKey,
    UpdateFeaturesRequest,
)
from kraftpy.protocol.metadata_frame import decode_metadata_record
from kraftpy.protocol.records.partition_record import PartitionRecord
from kraftpy.protocol.records.topic_record import TopicRecord
from kraftpy.tools.broker_sim import registration_request
from support.controller_harness import Harness, settings
from support.lone_quorum import lone_config

BROKERS = range(1, 7)
ELR = {"eligible.leader.replicas.version": 1}  # Kafka 4.1's default
CONTROLLER_ID = 3000


def image(topics: int, partitions: int, *, rf: int = 3, **props: str
          ) -> tuple[Harness, dict[int, int]]:
    """Six registered, unfenced brokers and `topics` x `partitions` partitions (striped
    over them, led by their first replica), replayed straight into the controller."""
    h = Harness(settings=settings(
        node_id=CONTROLLER_ID, bootstrap_features=ELR, min_insync_replicas=2,
        static_configs=props,
        advertised_listeners=(AdvertisedEndpoint("PLAINTEXT", "10.0.0.1", 9092),
                              AdvertisedEndpoint("CONTROLLER", "10.0.0.1", 9093))))
    epochs = {b: h.unfenced_broker(b) for b in BROKERS}
    dirs = {b: h.qc.cluster.brokers[b].log_dirs[0] for b in BROKERS}
    offset = h.end
    for t in range(topics):
        topic_id = uuid.UUID(int=(t + 1) << 64 | 7)
        h.qc.replay(TopicRecord(name=f"topic-{t}", topic_id=topic_id), 0, offset)
        offset += 1
        for p in range(partitions):
            first = (t * partitions + p) % len(BROKERS)
            replicas = [BROKERS[(first + i) % len(BROKERS)] for i in range(rf)]
            h.qc.replay(PartitionRecord(
                partition_id=p, topic_id=topic_id, replicas=replicas, isr=list(replicas),
                leader=replicas[0], leader_epoch=0, partition_epoch=0,
                directories=[dirs[r] for r in replicas]), 2, offset)
            offset += 1
    h.snapshot_end = offset - len(h.records)  # as if a snapshot held them
    h.commit()
    return h, epochs


def steps(fn: Callable[[], Any]) -> int:
    """The Python steps `fn` runs: the interpreter's trace events (calls, lines, each turn
    of a loop or a comprehension). A walk over the partitions multiplies them."""
    count = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        count += 1
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        fn()
    finally:
        sys.settrace(previous)
    return count


def answers(h: Harness, epochs: dict[int, int]) -> list[tuple[str, Callable[[], Any]]]:
    """Requests, scrapes and timers whose answers do not list the partitions, in the order
    they run (some set up the next)."""
    qc = h.qc
    node = RunningNode(lone_config(Path("/nonexistent")), "c",
                       types.SimpleNamespace(controller=qc),  # type: ignore[arg-type]
                       dict(SUPPORTED_FEATURES))
    collector = NodeCollector(CONTROLLER_ID, "/nonexistent")
    reg = qc.cluster.brokers[1]
    topic_id = qc.replication.topics_by_name["topic-0"]

    def leader_isr() -> Any:
        part = qc.replication.topics[topic_id].partitions[0]
        return AlterPartitionRequest(broker_id=part.leader, broker_epoch=epochs[part.leader],
                                     topics=[TopicData(topic_id=topic_id, partitions=[
                                         PartitionData(partition_index=0,
                                                       leader_epoch=part.leader_epoch,
                                                       partition_epoch=part.partition_epoch,
                                                       new_isr_with_epochs=[
                                                           BrokerState(broker_id=b,
                                                                       broker_epoch=epochs[b])
                                                           for b in part.isr])])])

    def due_elections() -> None:
        qc.elections.next_balance_ms = qc.elections.next_unclean_ms = 0
        h.tick()
        h.tick()

    return [
        ("ApiVersions features", lambda: _features(node, 4, "CONTROLLER")),
        ("DescribeCluster (brokers)", lambda: h.handle(
            DescribeClusterRequest(endpoint_type=1), 1, listener="PLAINTEXT")),
        ("DescribeCluster (controllers)", lambda: h.handle(
            DescribeClusterRequest(endpoint_type=2), 1, listener="CONTROLLER")),
        ("BrokerHeartbeat", lambda: h.heartbeat(1, epochs[1])),
        ("BrokerRegistration, same incarnation", lambda: h.handle(registration_request(
            1, h.settings.cluster_id, reg.incarnation_id, reg.log_dirs[0],
            previous_broker_epoch=reg.epoch), 4)),
        ("BrokerRegistration, a new broker", lambda: h.register(7)),
        ("BrokerHeartbeat that unfences it", lambda: h.heartbeat(
            7, qc.cluster.brokers[7].epoch)),
        ("BrokerHeartbeat, controlled shutdown of a broker leading nothing",
         lambda: h.heartbeat(7, qc.cluster.brokers[7].epoch, want_shut_down=True)),
        ("UnregisterBroker", lambda: h.handle(UnregisterBrokerRequest(broker_id=7), 0)),
        ("ControllerRegistration", lambda: h.handle(controller_registration(
            2, uuid.UUID(int=5), (("CONTROLLER", "10.0.0.2", 9093, 0),),
            SUPPORTED_FEATURES), 0)),
        ("metrics scrape", lambda: list(collector._controller(qc, h.now_ms))),
        ("tick", lambda: h.tick()),
        ("tick, elections due", due_elections),
        ("AllocateProducerIds", lambda: h.allocate(2, epochs[2])),
        ("InitProducerId", lambda: h.init()),
        ("DescribeProducers", lambda: h.handle(DescribeProducersRequest(
            topics=[TopicRequest(name="topic-0", partition_indexes=[0])]), 0)),
        ("ListPartitionReassignments (all)", lambda: h.handle(
            ListPartitionReassignmentsRequest(topics=None, timeout_ms=1000), 0)),
        ("ElectLeaders, one partition", lambda: h.handle(ElectLeadersRequest(
            election_type=0, topic_partitions=[TopicPartitions(topic="topic-0",
                                                               partitions=[0])],
            timeout_ms=1000), 2)),
        ("AlterPartition, one partition", lambda: h.handle(leader_isr(), 3)),
        ("DescribeConfigs", lambda: h.handle(DescribeConfigsRequest(resources=[
            DescribeConfigsResource(resource_type=2, resource_name="topic-0",
                                    configuration_keys=None),
            DescribeConfigsResource(resource_type=4, resource_name="1",
                                    configuration_keys=None)]), 4)),
        ("IncrementalAlterConfigs", lambda: h.handle(IncrementalAlterConfigsRequest(
            resources=[AlterConfigsResource(resource_type=2, resource_name="topic-0", configs=[
                AlterableConfig(name="retention.ms", config_operation=0, value="60000")])]),
            1)),
        ("UpdateFeatures, validate only", lambda: h.handle(UpdateFeaturesRequest(
            feature_updates=[FeatureUpdateKey(feature="group.version", max_version_level=1,
                                              upgrade_type=1)], validate_only=True), 1)),
        ("CreateTopics, one small topic", lambda: h.handle(CreateTopicsRequest(
            topics=[CreatableTopic(name="small", num_partitions=3, replication_factor=3)],
            timeout_ms=1000), 7)),
        ("CreatePartitions, of the small topic", lambda: h.handle(CreatePartitionsRequest(
            topics=[CreatePartitionsTopic(name="small", count=4, assignments=None)],
            timeout_ms=1000), 3)),
        ("DeleteTopics, the small topic", lambda: h.handle(DeleteTopicsRequest(
            topic_names=["small"], timeout_ms=1000), 5)),
    ]


@pytest.fixture(scope="module")
def images() -> tuple[tuple[Harness, dict[int, int]], tuple[Harness, dict[int, int]]]:
    return image(1, 10), image(1000, 100)


def test_no_answer_costs_more_with_100k_partitions_than_with_10(images: Any) -> None:
    (small, small_epochs), (big, big_epochs) = images
    assert big.qc.replication.partition_count == 100_000
    costs = []
    for (name, on_small), (_, on_big) in zip(answers(small, small_epochs),
                                             answers(big, big_epochs), strict=True):
        costs.append((name, steps(on_small), steps(on_big)))
    # The same code path may differ by a few steps (a first import, a dict growing); a walk
    # over the partitions adds at least 100,000.
    grown = [(name, few, many) for name, few, many in costs if many > few + 100]
    assert not grown, f"answers that cost more with 100k partitions: {grown}"
    assert big.qc.cluster.brokers[1].epoch == big_epochs[1]  # the requests were answered
    assert 7 not in big.qc.cluster.brokers and "small" not in big.qc.replication.topics_by_name


def test_the_metrics_gauges_are_counts_replay_keeps(images: Any) -> None:
    (h, epochs) = image(2, 10)
    collector = NodeCollector(CONTROLLER_ID, "/nonexistent")

    def gauges() -> dict[str, float]:
        return {m.name: m.samples[0].value for m in collector._controller(h.qc, h.now_ms)
                if m.name.endswith(("partitioncount", "topiccount", "partitionscount",
                                    "imbalancecount"))}
    names = ("kafka_controller_kafkacontroller_globalpartitioncount",
             "kafka_controller_kafkacontroller_globaltopiccount",
             "kafka_controller_kafkacontroller_offlinepartitionscount",
             "kafka_controller_kafkacontroller_preferredreplicaimbalancecount")
    assert [gauges()[n] for n in names] == [20, 2, 0, 0]
    h.heartbeat(1, epochs[1], want_fence=True)  # leads 4 of them, in 10 ISRs
    assert [gauges()[n] for n in names] == [20, 2, 0, 4]
    h.handle(DeleteTopicsRequest(topic_names=["topic-1"], timeout_ms=1000), 5)
    assert [gauges()[n] for n in names] == [10, 1, 0, 2]
    single = image(1, 6, rf=1)[0]
    single.heartbeat(2, single.qc.cluster.brokers[2].epoch, want_fence=True)
    assert collector._controller(single.qc, single.now_ms) and \
        single.qc.replication.brokers_to_isrs.offline_count() == 1


# --- leader moves in parts ------------------------------------------------------------------

class Builds:
    """The work each controller event did on partitions: how many it looked at (a leader
    move's `MoveContext.change`, an election's builder) and how many changes it built
    (`PartitionChangeBuilder.build`); `take()` gives the work as leader moves count it
    (1 per partition, BUILD_COST per change built)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.looked = self.built = 0
        change, builder = MoveContext.change, ReplicationControlManager.builder
        build = PartitionChangeBuilder.build

        def one_move(moves: Any, part: Any, state: Any) -> Any:
            self.looked += 1
            return change(moves, part, state)

        def one_election(rc: Any, part: Any, *args: Any, **kwargs: Any) -> Any:
            self.looked += 1
            return builder(rc, part, *args, **kwargs)

        def one_build(b: Any) -> Any:
            self.built += 1
            return build(b)
        monkeypatch.setattr(MoveContext, "change", one_move)
        monkeypatch.setattr(ReplicationControlManager, "builder", one_election)
        monkeypatch.setattr(PartitionChangeBuilder, "build", one_build)

    def take(self) -> int:
        """The work since the last take (its partitions: `last`)."""
        work = self.looked + (BUILD_COST - 1) * self.built
        self.last, self.looked, self.built = self.looked, 0, 0
        return work


def written(h: Harness, since: int) -> list[Any]:
    return [decode_metadata_record(v)[0] for v, _ in h.records[since - h.snapshot_end:]]


def state(h: Harness) -> list[tuple[Any, ...]]:
    return [(p.topic_id, p.partition_id, p.leader, p.leader_epoch, p.partition_epoch,
             list(p.isr), list(p.eligible_leader_replicas), list(p.last_known_elr))
            for p in h.qc.replication.partitions()]


LIMIT = 300  # work per event here (small images, several parts)


def test_a_fence_moves_every_partition_a_bounded_part_per_event(monkeypatch: Any) -> None:
    # The reference: the same image, broker 1 fenced in one event (Kafka's records).
    ref, _ = image(40, 30)
    expected = ref.qc.replication.handle_broker_fenced(1)
    assert len(expected) == 600  # in 600 ISRs, the leader of 200

    h, epochs = image(40, 30)
    h.qc.cluster.moves.limit = LIMIT
    builds = Builds(monkeypatch)
    start = h.end
    parts = []  # (work, partitions) of each tick
    for _ in range(100):  # broker 1 goes silent; the others heartbeat every 2 s
        h.now_ms += 2000
        for b in BROKERS[1:]:
            reply = h.heartbeat(b, epochs[b])
            assert reply.error_code == 0 and not reply.is_fenced
            assert builds.take() == 0
        if h.qc.has_pending_work() or h.qc.cluster.brokers[1].fenced:
            # While its moves are under way, broker 1 counts as fenced for everything else.
            assert not h.qc.cluster.usable(1) and 1 not in h.qc.cluster.unfenced()
            late = h.heartbeat(1, epochs[1])
            assert late.is_fenced and builds.take() == 0
        result = h.tick()
        parts.append((builds.take(), builds.last))
        assert parts[-1][0] <= LIMIT
        if h.qc.cluster.brokers[1].fenced:
            break
    moved = [looked for work, looked in parts if work]
    assert sum(moved) == 600 and len(moved) == 3  # the fence record comes with the last
    records = [r for r in written(h, start) if r.API_KEY in (5, 17)]
    assert records == [r for r, _ in expected] + [records[-1]]
    assert (records[-1].API_KEY, records[-1].broker_id, records[-1].fenced) == (17, 1, 1)
    for record, version in expected:
        ref.qc.replay(record, version, ref.end)
    assert state(h) == state(ref)
    assert result.records and not h.qc.has_pending_work()
    assert h.qc.cluster.leaving == {}


def test_a_controlled_shutdown_moves_leaders_in_parts_then_shuts_down(monkeypatch: Any) -> None:
    ref, _ = image(40, 30)
    expected = ref.qc.replication.handle_broker_in_controlled_shutdown(2)
    h, epochs = image(40, 30)
    h.qc.cluster.moves.limit = LIMIT
    builds = Builds(monkeypatch)
    start = h.end
    reply = h.heartbeat(2, epochs[2], want_shut_down=True)
    assert 0 < builds.take() <= LIMIT and not reply.is_fenced and not reply.should_shut_down
    assert h.qc.cluster.brokers[2].in_controlled_shutdown and h.qc.has_pending_work()
    shut = None
    for _ in range(10):
        h.tick()
        assert builds.take() <= LIMIT
        for b in (1, 3, 4, 5, 6):  # the others have seen the records (Kafka's condition)
            h.heartbeat(b, epochs[b])
        shut = h.heartbeat(2, epochs[2], want_shut_down=True)
        if shut.should_shut_down:
            break
    assert shut is not None and shut.should_shut_down and not h.qc.has_pending_work()
    moves = [r for r in written(h, start) if r.API_KEY == 5]
    assert moves[:len(expected)] == [r for r, _ in expected]
    assert not h.qc.replication.leads_partitions(2) and not h.qc.replication.in_isr(2)


def test_an_unfence_elects_leaderless_partitions_in_parts(monkeypatch: Any) -> None:
    h, epochs = image(20, 40, rf=1)  # one replica each: fencing a broker leaves them leaderless
    h.qc.cluster.moves.limit = 50
    h.heartbeat(3, epochs[3], want_fence=True)
    h.tick()
    h.tick()
    leaderless = h.qc.replication.brokers_to_isrs.offline_count()
    assert leaderless == 800 // 6 and h.qc.cluster.brokers[3].fenced
    builds = Builds(monkeypatch)
    reply = h.heartbeat(3, epochs[3])
    assert not reply.is_fenced and 0 < builds.take() <= 50
    while h.qc.has_pending_work():
        h.tick()
        assert builds.take() <= 50
    assert h.qc.replication.brokers_to_isrs.offline_count() == 0
    assert h.qc.replication.brokers_to_isrs.leaderships(3) == leaderless


def test_the_periodic_preferred_election_walks_in_parts(monkeypatch: Any) -> None:
    h, epochs = image(40, 30)
    h.qc.cluster.moves.limit = 3 * 200  # an election builds a change: 200 partitions a tick
    h.heartbeat(1, epochs[1], want_fence=True)
    while h.qc.has_pending_work():
        h.tick()
    assert h.qc.replication.imbalanced.size == 200
    h.qc.elections.max_elections = 150
    h.heartbeat(1, epochs[1])  # back: it is again in no ISR, so not yet preferred
    builds = Builds(monkeypatch)
    h.qc.elections.next_balance_ms = 0
    h.tick()  # 200 partitions looked at, none of them may elect broker 1 yet
    assert builds.take() == 600 and builds.last == 200
    assert h.qc.replication.imbalanced.size == 200
    # In the ISRs again (AlterPartition from each leader), broker 1 is elected where it is
    # preferred: at most 150 elections a run, the next run at once, each a part per tick.
    for part in h.qc.replication.imbalanced_partitions():
        h.handle(AlterPartitionRequest(broker_id=part.leader, broker_epoch=epochs[part.leader],
                                       topics=[TopicData(topic_id=part.topic_id, partitions=[
                                           PartitionData(partition_index=part.partition_id,
                                                         leader_epoch=part.leader_epoch,
                                                         partition_epoch=part.partition_epoch,
                                                         new_isr_with_epochs=[
                                                             BrokerState(broker_id=b,
                                                                         broker_epoch=epochs[b])
                                                             for b in [*part.isr, 1]])])]), 3)
    builds.take()
    h.qc.cluster.moves.limit = 3 * 60
    h.qc.elections.next_balance_ms = 0
    looked = []
    for _ in range(50):
        assert h.tick() is not None and builds.take() <= 3 * 60
        looked.append(builds.last)
        if not h.qc.has_pending_work() and h.qc.replication.imbalanced.size == 0:
            break
    assert max(looked) == 60 and sum(looked) == 200
    assert h.qc.replication.brokers_to_isrs.leaderships(1) == 200


def test_a_new_registration_or_unregistration_takes_over_a_fence_under_way() -> None:
    h, epochs = image(40, 30)
    h.qc.cluster.moves.limit = LIMIT
    h.heartbeat(1, epochs[1], want_fence=True)
    assert h.qc.cluster.leaving and h.qc.has_pending_work()
    h.now_ms += 9001  # the session of the incarnation it replaces expires (Kafka 4.1)
    again = h.register(1)  # a new incarnation: its registration takes what is left
    assert again.error_code == ErrorCode.NONE and not h.qc.has_pending_work()
    assert not h.qc.replication.in_isr(1) and not h.qc.cluster.leaving
    assert h.qc.cluster.brokers[1].epoch == again.broker_epoch
    h.heartbeat(2, epochs[2], want_fence=True)
    assert h.qc.has_pending_work()
    assert h.handle(UnregisterBrokerRequest(broker_id=2), 0).error_code == 0
    assert not h.qc.has_pending_work() and 2 not in h.qc.cluster.brokers
    assert not h.qc.replication.in_isr(2) and not h.qc.cluster.leaving
    h.tick()  # nothing left to do: no record refers to broker 2's registration
    assert 2 not in h.qc.cluster.brokers


def unshare(h: Harness) -> None:
    """Give every partition lists of its own (equal values, other objects): what a change is
    must not depend on partitions sharing their lists."""
    for part in h.qc.replication.partitions():
        for name in ("replicas", "isr", "removing_replicas", "adding_replicas", "directories",
                     "eligible_leader_replicas", "last_known_elr"):
            setattr(part, name, list(getattr(part, name)))


def test_a_change_is_built_once_per_state_and_the_same_for_each_partition_in_it() -> None:
    shared_h, shared_epochs = image(30, 20)
    own_h, own_epochs = image(30, 20)
    steps = [("fence", 1), ("fence", 2), ("shutdown", 3), ("unfence", 2), ("unfence", 1)]
    changes = []
    for what, broker in steps:
        unshare(own_h)
        outcomes = []
        for h, epochs in ((shared_h, shared_epochs), (own_h, own_epochs)):
            start = h.end
            if what == "fence":
                h.heartbeat(broker, epochs[broker], want_fence=True)
            elif what == "shutdown":
                h.heartbeat(broker, epochs[broker], want_shut_down=True)
            else:
                h.heartbeat(broker, epochs[broker])
            while h.qc.has_pending_work():
                h.tick()
            outcomes.append([(r.partition_id, r.topic_id, r.isr, r.leader, r.replicas,
                              r.eligible_leader_replicas, r.last_known_elr, r.directories)
                             for r in written(h, start) if r.API_KEY == 5])
        assert outcomes[0] == outcomes[1], (what, broker)
        changes.append(len(outcomes[0]))
    # each broker is in 300 ISRs; once 1, 2 and 3 are out, the 100 partitions on (1, 2, 3)
    # are leaderless with 2 and 3 eligible (ELR): unfencing 2 elects it there, 1 nowhere
    assert changes == [300, 300, 300, 100, 0], changes
    assert state(shared_h) == state(own_h)
