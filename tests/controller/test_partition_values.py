"""A snapshot's topic and partition values (`partition_values.topic_values`) are the generated
codec's bytes for `snapshot_records()`, whatever shape the partitions have, however their
lists are shared, at every PartitionRecord version."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st
from kraftpy.controller.partition_values import topic_values
from kraftpy.controller.replication_control import ReplicationControlManager
from kraftpy.protocol.metadata_frame import encode_metadata_record
from kraftpy.protocol.records.partition_change_record import PartitionChangeRecord
from kraftpy.protocol.records.partition_record import PartitionRecord
from kraftpy.protocol.records.topic_record import TopicRecord

DIRS = [uuid.UUID(int=i * 0x1000_0000_0000_0001) for i in range(1, 5)]
brokers = st.lists(st.sampled_from([1, 2, 3, 4, 5, 70_000]), max_size=4)
partition = st.fixed_dictionaries({
    "partition_id": st.sampled_from([0, 1, 2, 300]),
    "replicas": brokers, "isr": brokers, "removing_replicas": brokers,
    "adding_replicas": brokers,
    "leader": st.sampled_from([-1, 1, 2, 70_000]),
    "leader_recovery_state": st.sampled_from([0, 1]),
    "leader_epoch": st.sampled_from([0, 1, 1_000_000]),
    "partition_epoch": st.sampled_from([0, 5]),
    "directories": st.lists(st.sampled_from(DIRS), max_size=3),
    "eligible_leader_replicas": st.one_of(st.none(), brokers),
    "last_known_elr": st.one_of(st.none(), brokers),
})
topic = st.tuples(st.text(alphabet="ab._-", min_size=1, max_size=8), st.lists(partition,
                                                                                max_size=6))


def codec_values(replication: ReplicationControlManager, version: int) -> list[bytes]:
    return [encode_metadata_record(r, v) for r, v in replication.snapshot_records(version)]


@settings(max_examples=100, deadline=None)
@given(topics=st.lists(topic, max_size=5), version=st.sampled_from([0, 1, 2]),
       changes=st.lists(st.tuples(st.integers(0, 30), st.sampled_from([-2, 1, 3])),
                        max_size=8))
def test_values_are_the_codecs(topics: list, version: int, changes: list) -> None:
    replication = ReplicationControlManager()
    parts = []
    for i, (name, partitions) in enumerate(topics):
        topic_id = uuid.UUID(int=i + 1)
        replication.replay_topic(TopicRecord(name=f"{name}{i}", topic_id=topic_id))
        for fields in partitions:
            replication.replay_partition(PartitionRecord(topic_id=topic_id, **fields))
            parts.append((topic_id, fields["partition_id"]))
    # Changes in place (the leader moves, the epochs count), as PartitionChangeRecords do.
    for which, leader in changes:
        if parts:
            topic_id, partition_id = parts[which % len(parts)]
            replication.replay_partition_change(PartitionChangeRecord(
                topic_id=topic_id, partition_id=partition_id, leader=leader, isr=[leader]))
    assert list(topic_values(replication.topics.values(), version)) == codec_values(
        replication, version)


def test_equal_lists_that_are_not_shared_still_encode_each_partition() -> None:
    """Lists equal but not the same object (a partition built outside replay) and the same
    list object under another partition state: every value is still that partition's."""
    replication = ReplicationControlManager()
    topic_id = uuid.uuid4()
    replication.replay_topic(TopicRecord(name="t", topic_id=topic_id))
    for p in range(40):
        replication.replay_partition(PartitionRecord(
            topic_id=topic_id, partition_id=p, replicas=[1, 2, 3], isr=[1, 2, 3],
            leader=1 + p % 3, leader_epoch=p % 2, partition_epoch=0,
            directories=[DIRS[0], DIRS[1], DIRS[2]]))
    parts = replication.topics[topic_id].partitions
    parts[7].isr = [1, 2]  # a fresh list
    parts[8].replicas = list(parts[8].replicas)
    parts[9].eligible_leader_replicas = [3]
    values = list(topic_values(replication.topics.values(), 1))
    assert values == codec_values(replication, 1)
    assert len(set(values)) == len(values) == 41


def test_a_controllers_snapshot_values_are_its_snapshot_records_encoded() -> None:
    """The whole image: features, brokers, topics, producer ids, in Kafka's order."""
    from support.controller_harness import Harness

    h = Harness()
    h.brokers_and_topics([5, 5, 5])
    expected = [encode_metadata_record(r, v) for r, v in h.qc.snapshot_records()]
    assert len(expected) > 20
    assert list(h.qc.snapshot_values()) == expected
