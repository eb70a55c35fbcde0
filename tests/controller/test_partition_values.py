"""A snapshot's topic and partition values (`partition_values.topic_runs`) are the generated
codec's bytes for `snapshot_records()`, whatever shape the partitions have, however their
lists are shared, at every PartitionRecord version."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kraftpy.controller.log.snapshots import encode_snapshot
from kraftpy.controller.partition_values import record_values, topic_runs
from kraftpy.controller.replication_control import (
    Partition,
    ReplicationControlManager,
    partition_state,
)
from kraftpy.protocol.metadata_frame import encode_metadata_record
from kraftpy.protocol.record_batch import build_record_batch, iter_record_batches
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
    assert list(record_values(topic_runs(replication.topics.values(), version))) == codec_values(
        replication, version)


def test_equal_lists_that_are_not_shared_still_encode_each_partition() -> None:
    """Lists equal but not the same object (partitions built outside replay) and the same list
    object under another partition state: every value is still that partition's."""
    replication = ReplicationControlManager()
    topic_id = uuid.uuid4()
    replication.replay_topic(TopicRecord(name="t", topic_id=topic_id))
    for p in range(40):
        replication.replay_partition(PartitionRecord(
            topic_id=topic_id, partition_id=p, replicas=[1, 2, 3], isr=[1, 2, 3],
            leader=1 + p % 3, leader_epoch=p % 2, partition_epoch=0,
            directories=[DIRS[0], DIRS[1], DIRS[2]]))
    parts = replication.topics[topic_id].partitions
    built = parts[6]
    dirs = built.directories
    parts[7] = Partition(topic_id, 7, built.replicas, [1, 2], 2, 1, 0, directories=dirs)
    parts[8] = Partition(topic_id, 8, list(built.replicas), list(built.isr), 3, 0, 0,
                         directories=list(dirs))
    parts[9] = Partition(topic_id, 9, built.replicas, built.isr, 1, 1, 0, directories=dirs,
                         eligible_leader_replicas=[3])
    values = list(record_values(topic_runs(replication.topics.values(), 1)))
    assert values == codec_values(replication, 1)
    assert len(set(values)) == len(values) == 41


def test_replay_keeps_each_partitions_shared_state() -> None:
    """A partition's `state` is the interned state of its fields after every replay, shared
    by the partitions whose fields are the same lists and values."""
    replication = ReplicationControlManager()
    topic_id = uuid.UUID(int=5)
    replication.replay_topic(TopicRecord(name="t", topic_id=topic_id))
    for p in range(3):
        replication.replay_partition(PartitionRecord(
            topic_id=topic_id, partition_id=p, replicas=[1, 2, 3], isr=[1, 2, 3], leader=1))
    parts = replication.topics[topic_id].partitions
    assert parts[0].state is parts[1].state is parts[2].state
    replication.replay_partition_change(PartitionChangeRecord(
        topic_id=topic_id, partition_id=1, leader=2, isr=[2, 3]))
    replication.replay_partition_change(PartitionChangeRecord(
        topic_id=topic_id, partition_id=2, eligible_leader_replicas=[1]))
    for part in parts.values():
        assert part.state is partition_state(part)
        assert (part.state.leader, part.state.isr, part.state.eligible_leader_replicas) == (
            part.leader, part.isr, part.eligible_leader_replicas)
    assert len({id(part.state) for part in parts.values()}) == 3
    replication.replay_partition_change(PartitionChangeRecord(
        topic_id=topic_id, partition_id=1, leader=1, isr=[1, 2, 3]))
    assert parts[1].state is parts[0].state


def test_a_controllers_snapshot_values_are_its_snapshot_records_encoded() -> None:
    """The whole image: features, brokers, topics, producer ids, in Kafka's order."""
    from support.controller_harness import Harness

    h = Harness()
    h.brokers_and_topics([5, 5, 5])
    expected = [encode_metadata_record(r, v) for r, v in h.qc.snapshot_records()]
    assert len(expected) > 20
    assert list(record_values(h.qc.snapshot_values())) == expected


def _image(partitions_per_topic: list[int]) -> ReplicationControlManager:
    """Topics of the given sizes; partitions in a few states (leaders, epochs, ELR, reassigning)
    whose values have several lengths."""
    replication = ReplicationControlManager()
    for t, count in enumerate(partitions_per_topic):
        topic_id = uuid.UUID(int=t + 1)
        replication.replay_topic(TopicRecord(name=f"topic-{t}", topic_id=topic_id))
        for p in range(count):
            replicas = [1 + (p + i) % 5 for i in range(3)]
            replication.replay_partition(PartitionRecord(
                topic_id=topic_id, partition_id=p, replicas=replicas,
                isr=replicas[: 1 + p % 3], leader=replicas[0], leader_epoch=p % 4,
                partition_epoch=p % 7, directories=[DIRS[p % 4]] * 3,
                eligible_leader_replicas=[replicas[2]] if p % 11 == 0 else None,
                adding_replicas=[70_000] if p % 13 == 0 else []))
    return replication


def _batches_of(values: list[bytes], max_batch_bytes: int) -> list[bytes]:
    """The data batches the values made before batches were built as records come: slices cut
    where the next value (plus 23 bytes of framing at most) would pass the limit."""
    room, chunk, size, offset, out = max_batch_bytes - 61, [], 0, 1, []
    for value in values:
        if chunk and size + len(value) + 23 > room:
            out.append(build_record_batch(chunk, base_offset=offset, partition_leader_epoch=3,
                                          timestamp=77))
            offset, chunk, size = offset + len(chunk), [], 0
        chunk.append(value)
        size += len(value) + 23
    return out + [build_record_batch(chunk, base_offset=offset, partition_leader_epoch=3,
                                     timestamp=77)]


@pytest.mark.parametrize(("sizes", "max_batch_bytes"), [
    ([3, 150, 1, 40], 300),  # a batch of one or two records: cut inside every topic
    ([3, 150, 1, 40], 9_000),
    ([90_000, 5], 8 * 1024 * 1024),  # 65,000 records a batch: every offset-delta width
], ids=["tiny-batches", "small-batches", "kafka-batches"])
def test_a_snapshot_of_topic_runs_is_the_batches_of_their_values(
        sizes: list[int], max_batch_bytes: int) -> None:
    """A topic's partitions append their records to the batch being built (heads kept with
    each partition state); the snapshot's data batches are byte for byte the ones
    `build_record_batch` makes of the codec's values, cut at the same records."""
    replication = _image(sizes)
    values = codec_values(replication, 1)
    batches = list(encode_snapshot(topic_runs(replication.topics.values(), 1), epoch=3,
                                   last_contained_log_timestamp=5, timestamp=77,
                                   max_batch_bytes=max_batch_bytes))
    expected = _batches_of(values, max_batch_bytes)
    assert len(expected) > 1
    assert batches[1:-1] == expected  # between the header and the footer
    assert all(len(batch) <= max_batch_bytes for batch in batches)
    # The same values appended one by one (`KraftBatches.append`) make the same file.
    assert batches == list(encode_snapshot(values, epoch=3, last_contained_log_timestamp=5,
                                           timestamp=77, max_batch_bytes=max_batch_bytes))
    read = [v for batch in iter_record_batches(b"".join(batches[1:-1])) for v in batch.values()]
    assert read == values


def test_only_partitions_in_the_image_intern_a_state() -> None:
    """CreateTopics builds each partition it proposes with fresh lists; only replay interns a
    state, so the table of states never keeps lists no partition of the image holds."""
    from kraftpy.controller import replication_control
    from kraftpy.protocol.messages.create_topics_request import (
        CreatableTopic,
        CreateTopicsRequest,
    )
    from support.controller_harness import Harness

    h = Harness()
    h.brokers_and_topics([])
    replication_control._STATES.clear()
    response = h.handle(CreateTopicsRequest(topics=[
        CreatableTopic(name=f"t{i}", num_partitions=20, replication_factor=3)
        for i in range(10)], timeout_ms=1000), 7)
    assert [t.error_code for t in response.topics] == [0] * 10
    held = {id(part.state) for topic in h.qc.replication.topics.values()
            for part in topic.partitions.values()}
    assert len(held) >= 3
    assert {id(state) for state in replication_control._STATES.values()} == held
