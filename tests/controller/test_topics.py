"""Topic and config commands, sans-IO: Kafka 4.1's validation table, placement, the records
written (checked field by field against a real 4.1 controller's log where the capture is
present), replay and snapshots."""

from __future__ import annotations

import json
import random
import re
import uuid
from typing import Any

import pytest
from kraftpy.controller import topic_placement
from kraftpy.controller.result import ControllerResult
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.framing import read_request_header
from kraftpy.protocol.messages.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
    PartitionData,
    TopicData,
)
from kraftpy.protocol.messages.create_partitions_request import (
    CreatePartitionsAssignment,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
)
from kraftpy.protocol.messages.create_topics_request import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kraftpy.protocol.messages.delete_topics_request import DeleteTopicsRequest, DeleteTopicState
from kraftpy.protocol.messages.describe_configs_request import (
    DescribeConfigsRequest,
    DescribeConfigsResource,
)
from kraftpy.protocol.messages.incremental_alter_configs_request import (
    AlterableConfig,
    AlterConfigsResource,
    IncrementalAlterConfigsRequest,
)
from kraftpy.protocol.metadata_frame import decode_metadata_record
from kraftpy.protocol.records.feature_level_record import FeatureLevelRecord
from kraftpy.protocol.uuid import parse_kafka_uuid
from support.controller_harness import Harness
from support.paths import REFERENCE

CAPTURE = REFERENCE / "real-captures" / "kafka-4.1-broker-controller" / \
    "real-controller-static-voters"
ZERO = uuid.UUID(int=0)


def elr_harness() -> Harness:
    """A controller whose log finalizes eligible.leader.replicas.version=1, as Kafka 4.1's
    default format does."""
    h = Harness()
    h.write(ControllerResult(None, records=[(FeatureLevelRecord(
        name="eligible.leader.replicas.version", feature_level=1), 0)]))
    return h


def topic(name: str, partitions: int = 1, rf: int = 1, configs: dict[str, Any] | None = None,
          assignments: dict[int, list[int]] | None = None) -> CreatableTopic:
    return CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=rf,
        assignments=[CreatableReplicaAssignment(partition_index=i, broker_ids=b)
                     for i, b in (assignments or {}).items()],
        configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])


def create(h: Harness, *topics: CreatableTopic, validate_only: bool = False,
           version: int = 7) -> Any:
    return h.handle(CreateTopicsRequest(topics=list(topics), timeout_ms=60000,
                                        validate_only=validate_only), version)


def written(h: Harness, since: int) -> list[tuple[Any, int]]:
    return [decode_metadata_record(v) for v, _ in h.records[since - h.snapshot_end:]]


# --- records, against a real Kafka 4.1 controller -------------------------------------------


def _dump_records(first: int, last: int) -> list[dict[str, Any]]:
    out = []
    for line in (CAPTURE / "controller-metadata-log.kafka-dump-log.txt").read_text().splitlines():
        m = re.match(r"\| offset: (\d+) .* payload: (\{.*\})$", line)
        if m and first <= int(m.group(1)) <= last:
            out.append(json.loads(m.group(2)))
    return out


@pytest.mark.skipif(not CAPTURE.is_dir(), reason="the real 4.1 capture is not on this machine")
def test_broker_create_topics_writes_what_kafka_wrote() -> None:
    """The broker's own CreateTopics for __transaction_state (50 partitions, 5 configs), as
    captured, gives the records Kafka's controller wrote at offsets 132-188, field by field
    (topic id aside), and the answer Kafka sent."""
    frame = (CAPTURE / "CreateTopics-v7-1.req").read_bytes()[4:]
    header, key, version, offset = read_request_header(frame)
    request = CreateTopicsRequest.decode(frame[offset:], version)
    assert [t.name for t in request.topics] == ["__transaction_state"]
    h = elr_harness()
    log_dir = parse_kafka_uuid("See4cE6IjhTKfy5YYgeaXg")
    epoch = h.register(2, log_dirs=[log_dir]).broker_epoch
    assert not h.heartbeat(2, epoch).is_fenced
    start = h.end
    response = h.handle(request, version)
    ours = written(h, start)
    theirs = _dump_records(132, 188)
    assert len(ours) == len(theirs) == 57
    topic_id = ours[0][0].topic_id
    for (record, v), kafka in zip(ours, theirs, strict=True):
        assert v == kafka["version"]
        data = record.to_json(v)
        if "topicId" in data:
            assert data["topicId"] == ours[0][0].to_json(0)["topicId"]
            data["topicId"] = kafka["data"]["topicId"]
        assert data == kafka["data"], (data, kafka)
    resp_frame = (CAPTURE / "CreateTopics-v7-1.resp").read_bytes()[4:]
    from kraftpy.protocol.framing import decode_response
    _, real = decode_response(resp_frame, 19, version)
    ours_t, real_t = response.topics[0], real.topics[0]
    assert ours_t.topic_id == topic_id
    for field in ("name", "error_code", "error_message", "num_partitions",
                  "replication_factor", "topic_config_error_code"):
        assert getattr(ours_t, field) == getattr(real_t, field), field
    # Kafka's controller answers from its own (default) broker config; so does ours.
    assert [(c.name, c.value, c.config_source, c.read_only, c.is_sensitive)
            for c in ours_t.configs] == \
        [(c.name, c.value, c.config_source, c.read_only, c.is_sensitive) for c in real_t.configs]


def test_a_topic_is_one_batch_topic_configs_clear_elr_partitions() -> None:
    h = elr_harness()
    h.unfenced_broker(2)
    start = h.end
    result = h.result(CreateTopicsRequest(topics=[
        topic("a", 2, configs={"min.insync.replicas": "1", "retention.ms": "1000"}),
        topic("b", 1)], timeout_ms=1, validate_only=False), 7)
    kinds = [type(r).__name__ for r, _ in written(h, start)]
    assert kinds == ["TopicRecord", "ConfigRecord", "ConfigRecord", "ClearElrRecord",
                     "PartitionRecord", "PartitionRecord", "TopicRecord", "PartitionRecord"]
    assert len(result.records) == 8  # one result: one atomic batch
    assert [p.leader for p in h.qc.replication.topics[result.response.topics[0].topic_id]
            .partitions.values()] == [2, 2]


def test_validate_only_writes_nothing_yet_answers_as_a_creation() -> None:
    h = Harness()
    h.unfenced_broker(2)
    start = h.end
    r = create(h, topic("v", 3), validate_only=True)
    assert h.end == start and "v" not in h.qc.replication.topics_by_name
    assert (r.topics[0].error_code, r.topics[0].num_partitions) == (0, 3)


# --- the validation table ---------------------------------------------------------------------


CASES = [
    (topic("bad name"), ErrorCode.INVALID_TOPIC_EXCEPTION,
     "Topic name is invalid: 'bad name' contains one or more characters other than ASCII "
     "alphanumerics, '.', '_' and '-'"),
    (topic(""), ErrorCode.INVALID_TOPIC_EXCEPTION,
     "Topic name is invalid: the empty string is not allowed"),
    (topic(".."), ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is invalid: '..' is not allowed"),
    (topic("x" * 250), ErrorCode.INVALID_TOPIC_EXCEPTION,
     f"Topic name is invalid: the length of '{'x' * 250}' is longer than the max allowed "
     "length 249"),
    (topic("exists"), ErrorCode.TOPIC_ALREADY_EXISTS, "Topic 'exists' already exists."),
    (topic("with.dot_"), ErrorCode.INVALID_TOPIC_EXCEPTION,
     "Topic 'with.dot_' collides with existing topic: with_dot_"),
    (topic("p0", 0), ErrorCode.INVALID_PARTITIONS,
     "Number of partitions was set to an invalid non-positive value."),
    (topic("p-2", -2), ErrorCode.INVALID_PARTITIONS,
     "Number of partitions was set to an invalid non-positive value."),
    (topic("r0", 1, 0), ErrorCode.INVALID_REPLICATION_FACTOR,
     "Replication factor must be larger than 0, or -1 to use the default value."),
    (topic("r3", 1, 3), ErrorCode.INVALID_REPLICATION_FACTOR,
     "Unable to replicate the partition 3 time(s): The target replication factor of 3 cannot "
     "be reached because only 2 broker(s) are registered."),
    (topic("c1", configs={"no.such.config": "1"}), ErrorCode.INVALID_CONFIG,
     "Unknown topic config name: no.such.config"),
    (topic("c2", configs={"retention.ms": "soon"}), ErrorCode.INVALID_CONFIG,
     "Invalid value soon for configuration retention.ms: Not a number of type LONG"),
    (topic("c3", configs={"cleanup.policy": "compact,forever"}), ErrorCode.INVALID_CONFIG,
     "Invalid value forever for configuration cleanup.policy: String must be one of: "
     "compact, delete"),
    (topic("c4", configs={"min.cleanable.dirty.ratio": "1.5"}), ErrorCode.INVALID_CONFIG,
     "Invalid value 1.5 for configuration min.cleanable.dirty.ratio: Value must be no more "
     "than 1"),
    (topic("c5", configs={"compression.gzip.level": "0"}), ErrorCode.INVALID_CONFIG,
     "Invalid value 0 for configuration compression.gzip.level: Value must be between 1 and 9 "
     "or equal to -1"),
    (topic("c6", configs={"preallocate": "yes"}), ErrorCode.INVALID_CONFIG,
     "Invalid value yes for configuration preallocate: Expected value to be either true or "
     "false"),
    (topic("c7", configs={"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}),
     ErrorCode.INVALID_CONFIG,
     "conflict topic config setting min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"),
    (topic("c8", configs={"retention.ms": None}), ErrorCode.INVALID_CONFIG,
     "Null value not supported for topic configs: retention.ms"),
    (topic("c9", configs={"remote.storage.enable": "true"}), ErrorCode.INVALID_CONFIG,
     "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with "
     "remote log storage."),
    (topic("c10", configs={"segment.bytes": "2147483648"}), ErrorCode.INVALID_CONFIG,
     "Invalid value 2147483648 for configuration segment.bytes: Not a number of type INT"),
    (topic("m1", -1, 1, assignments={0: [2]}), ErrorCode.INVALID_REQUEST,
     "A manual partition assignment was specified, but replication factor was not set to -1."),
    (topic("m2", 1, -1, assignments={0: [2]}), ErrorCode.INVALID_REQUEST,
     "A manual partition assignment was specified, but numPartitions was not set to -1."),
    (topic("m3", -1, -1, assignments={0: [2, 9]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes broker 9, but no such broker is registered."),
    (topic("m4", -1, -1, assignments={0: [2, 2]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes the broker 2 more than once."),
    (topic("m5", -1, -1, assignments={0: [2, 3], 1: [2]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes a partition with 1 replica(s), but this is not "
     "consistent with previous partitions, which have 2 replica(s)."),
    (topic("m6", -1, -1, assignments={0: [2], 2: [3]}), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "partitions should be a consecutive 0-based integer sequence"),
    (topic("m7", -1, -1, assignments={0: []}), ErrorCode.INVALID_REPLICA_ASSIGNMENT,
     "The manual partition assignment includes an empty replica list."),
    (topic("__cluster_metadata"), ErrorCode.INVALID_REQUEST,
     "Creation of internal topic __cluster_metadata is prohibited."),
]


@pytest.mark.parametrize(("request_topic", "code", "message"), CASES,
                         ids=[c[0].name[:20] or "empty" for c in CASES])
def test_create_topics_refuses_as_kafka_does(request_topic: CreatableTopic, code: int,
                                             message: str) -> None:
    h = Harness()
    h.unfenced_broker(2)
    h.unfenced_broker(3)
    create(h, topic("exists"), topic("with_dot_"))
    start = h.end
    r = create(h, request_topic)
    assert [(t.name, t.error_code, t.error_message) for t in r.topics] == \
        [(request_topic.name, code, message)]
    assert h.end == start  # nothing written


def test_duplicates_too_many_partitions_and_a_fenced_cluster() -> None:
    h = Harness()
    r = create(h, topic("t"))
    assert (r.topics[0].error_code, r.topics[0].error_message) == (
        ErrorCode.INVALID_REPLICATION_FACTOR,
        "Unable to replicate the partition 1 time(s): All brokers are currently fenced.")
    h.unfenced_broker(2)
    r = create(h, topic("d"), topic("d"), topic("ok"))
    assert {(t.name, t.error_code, t.error_message) for t in r.topics} == {
        ("d", ErrorCode.INVALID_REQUEST, "Duplicate topic name."), ("ok", 0, None)}
    r = create(h, topic("big1", 6000), topic("big2", 4001))
    assert {(t.error_code, t.error_message) for t in r.topics} == {
        (ErrorCode.POLICY_VIOLATION, "Excessively large number of partitions per request.")}


def test_defaults_come_from_the_node_properties() -> None:
    from support.controller_harness import settings
    h = Harness(settings=settings(static_configs={"num.partitions": "3",
                                                  "default.replication.factor": "2",
                                                  "log.retention.hours": "1"}))
    h.unfenced_broker(2)
    h.unfenced_broker(3)
    r = create(h, topic("d", -1, -1)).topics[0]
    assert (r.error_code, r.num_partitions, r.replication_factor) == (0, 3, 2)
    retention = next(c for c in r.configs if c.name == "retention.ms")
    assert (retention.value, retention.config_source) == ("3600000", 4)  # STATIC_BROKER_CONFIG


# --- placement --------------------------------------------------------------------------------


def test_placement_spreads_leaders_and_racks() -> None:
    brokers = [topic_placement.UsableBroker(i, f"r{i % 3}", False) for i in range(6)]
    placed = topic_placement.place(brokers, 60, 3, random.Random(7))
    assert all(len(set(p)) == 3 for p in placed)
    racks = {b.broker_id: b.rack for b in brokers}
    assert all(len({racks[b] for b in p}) == 3 for p in placed)  # one replica per rack
    leaders = [p[0] for p in placed]
    assert sorted(leaders.count(b) for b in range(6)) == [10] * 6


def test_fenced_brokers_follow_but_never_lead() -> None:
    brokers = [topic_placement.UsableBroker(1, None, False),
               topic_placement.UsableBroker(2, None, True)]
    placed = topic_placement.place(brokers, 10, 2, random.Random(1))
    assert all(p[0] == 1 and sorted(p) == [1, 2] for p in placed)
    with pytest.raises(topic_placement.InvalidReplicationFactor, match="must be positive"):
        topic_placement.place(brokers, 1, 0, random.Random(1))


def test_isr_leaves_out_fenced_and_shutting_down_brokers() -> None:
    h = Harness()
    h.unfenced_broker(2)
    h.register(3)  # registered, still fenced
    r = create(h, topic("t", 4, 2))
    parts = h.qc.replication.topics[r.topics[0].topic_id].partitions.values()
    assert all(p.isr == [2] and p.leader == 2 and sorted(p.replicas) == [2, 3] for p in parts)


def test_several_log_dirs_leave_the_directory_unassigned_until_the_broker_says() -> None:
    h = Harness()
    dirs = [uuid.uuid4(), uuid.uuid4()]
    epoch = h.register(2, log_dirs=dirs).broker_epoch
    assert not h.heartbeat(2, epoch).is_fenced
    topic_id = create(h, topic("t", 2)).topics[0].topic_id
    parts = h.qc.replication.topics[topic_id].partitions
    assert [p.directories for p in parts.values()] == [[ZERO], [ZERO]]
    start = h.end
    r = h.handle(AssignReplicasToDirsRequest(broker_id=2, broker_epoch=epoch, directories=[
        DirectoryData(id=dirs[1], topics=[TopicData(topic_id=topic_id, partitions=[
            PartitionData(partition_index=0), PartitionData(partition_index=7)])]),
        DirectoryData(id=dirs[0], topics=[TopicData(topic_id=uuid.uuid4(), partitions=[
            PartitionData(partition_index=0)])])]), 0)
    codes = [[[p.error_code for p in t.partitions] for t in d.topics] for d in r.directories]
    assert codes == [[[0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]], [[ErrorCode.UNKNOWN_TOPIC_ID]]]
    assert [type(rec).__name__ for rec, _ in written(h, start)] == ["PartitionChangeRecord"]
    assert parts[0].directories == [dirs[1]] and parts[0].partition_epoch == 1
    stale = h.handle(AssignReplicasToDirsRequest(broker_id=2, broker_epoch=epoch + 1,
                                                 directories=[]), 0)
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH


# --- delete, partitions, configs; replay and snapshots -----------------------------------------


def test_delete_by_name_and_id_takes_the_configs_along_and_survives_a_snapshot() -> None:
    h = Harness()
    h.unfenced_broker(2)
    a, b = (t.topic_id for t in create(h, topic("a", configs={"retention.ms": "5"}),
                                       topic("b")).topics)
    r = h.handle(DeleteTopicsRequest(topics=[
        DeleteTopicState(name="a", topic_id=ZERO), DeleteTopicState(name=None, topic_id=b),
        DeleteTopicState(name=None, topic_id=ZERO), DeleteTopicState(name="gone", topic_id=ZERO),
        DeleteTopicState(name=None, topic_id=uuid.uuid4())], timeout_ms=1), 6)
    got = sorted((t.name or "", t.error_code) for t in r.responses)
    assert got == [("", ErrorCode.INVALID_REQUEST), ("", ErrorCode.UNKNOWN_TOPIC_ID),
                   ("a", ErrorCode.NONE), ("b", ErrorCode.NONE),  # by id: answered by name
                   ("gone", ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert h.qc.replication.topics == {} and h.qc.config_control.data == {}
    create(h, topic("a", 2))
    h.restart(use_snapshot=True)
    assert [t["name"] for t in h.qc.replication.describe()] == ["a"]
    assert create(h, topic("a")).topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS


def test_create_partitions() -> None:
    h = Harness()
    h.unfenced_broker(2)
    h.unfenced_broker(3)
    create(h, topic("t", 2, 2))

    def grow(count: int, assignments: list[list[int]] | None = None,
             name: str = "t") -> tuple[int, str | None]:
        r = h.handle(CreatePartitionsRequest(topics=[CreatePartitionsTopic(
            name=name, count=count,
            assignments=None if assignments is None else
            [CreatePartitionsAssignment(broker_ids=a) for a in assignments])],
            timeout_ms=1, validate_only=False), 3)
        return r.results[0].error_code, r.results[0].error_message

    assert grow(2) == (ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partition(s).")
    assert grow(1) == (ErrorCode.INVALID_PARTITIONS,
                       "The topic t currently has 2 partition(s); 1 would not be an increase.")
    assert grow(4, [[2, 3]]) == (ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Attempted to add 2 "
                                 "additional partition(s), but only 1 assignment(s) were "
                                 "specified.")
    assert grow(3, [[2]])[0] == ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert grow(3, name="nope") == (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                    "This server does not host this topic-partition.")
    assert grow(3, [[3, 2]]) == (ErrorCode.NONE, None)
    assert grow(5) == (ErrorCode.NONE, None)
    parts = h.qc.replication.topics[h.qc.replication.topics_by_name["t"]].partitions
    assert sorted(parts) == [0, 1, 2, 3, 4] and parts[2].replicas == [3, 2]


def incremental(h: Harness, kind: int, name: str, *ops: tuple[str, int, str | None],
                validate_only: bool = False) -> tuple[int, str | None]:
    r = h.handle(IncrementalAlterConfigsRequest(resources=[AlterConfigsResource(
        resource_type=kind, resource_name=name,
        configs=[AlterableConfig(name=n, config_operation=o, value=v) for n, o, v in ops])],
        validate_only=validate_only), 1)
    return r.responses[0].error_code, r.responses[0].error_message


def test_incremental_alter_configs() -> None:
    h = elr_harness()
    h.unfenced_broker(2)
    create(h, topic("t"))
    assert incremental(h, 2, "t", ("cleanup.policy", 0, "compact")) == (0, None)
    assert incremental(h, 2, "t", ("cleanup.policy", 2, "delete")) == (0, None)
    assert h.qc.config_control.configs((2, "t")) == {"cleanup.policy": "compact,delete"}
    assert incremental(h, 2, "t", ("cleanup.policy", 3, "compact")) == (0, None)
    assert incremental(h, 2, "t", ("retention.ms", 2, "1")) == (
        ErrorCode.INVALID_CONFIG, "Can't APPEND to key retention.ms because its type is not LIST.")
    assert incremental(h, 2, "nope", ("retention.ms", 0, "1")) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The topic 'nope' does not exist.")
    assert incremental(h, 4, "x1", ("a", 0, "1")) == (
        ErrorCode.INVALID_REQUEST, "Unable to parse broker name as a base 10 number.")
    assert incremental(h, 4, "1", ("min.insync.replicas", 0, "2")) == (
        ErrorCode.INVALID_CONFIG, "Broker-level min.insync.replicas cannot be altered while ELR "
        "is enabled.")
    start = h.end
    assert incremental(h, 2, "t", ("min.insync.replicas", 0, "1"), validate_only=True) == (0, None)
    assert h.end == start
    assert incremental(h, 2, "t", ("min.insync.replicas", 0, "1"),
                       ("cleanup.policy", 1, None)) == (0, None)
    assert sorted(type(r).__name__ for r, _ in written(h, start)) == [
        "ClearElrRecord", "ConfigRecord", "ConfigRecord"]
    start = h.end  # a topic value that does not change writes nothing; a broker's always does
    assert incremental(h, 2, "t", ("min.insync.replicas", 0, "1")) == (0, None)
    assert incremental(h, 4, "", ("log.retention.ms", 0, "100")) == (0, None)
    assert incremental(h, 4, "", ("log.retention.ms", 0, "100")) == (0, None)
    assert [type(r).__name__ for r, _ in written(h, start)] == ["ConfigRecord", "ConfigRecord"]


def describe(h: Harness, kind: int, name: str, keys: list[str] | None = None) -> Any:
    return h.handle(DescribeConfigsRequest(resources=[DescribeConfigsResource(
        resource_type=kind, resource_name=name, configuration_keys=keys)],
        include_synonyms=True, include_documentation=False), 4).results[0]


def test_describe_configs_sources_and_synonyms() -> None:
    h = Harness()
    h.unfenced_broker(2)
    create(h, topic("t", configs={"segment.bytes": "2000000"}))
    incremental(h, 4, "", ("log.retention.ms", 0, "1234"))
    result = describe(h, 2, "t")
    configs = {c.name: c for c in result.configs}
    assert result.error_code == 0 and len(configs) == 33
    seg = configs["segment.bytes"]
    assert (seg.value, seg.config_source) == ("2000000", 1)
    assert [(s.name, s.value, s.source) for s in seg.synonyms] == [
        ("segment.bytes", "2000000", 1), ("log.segment.bytes", "1073741824", 5)]
    ret = configs["retention.ms"]
    assert (ret.value, ret.config_source) == ("1234", 3)  # the cluster's dynamic default
    assert configs["cleanup.policy"].config_source == 5 and configs["cleanup.policy"].config_type == 7
    assert [c.name for c in describe(h, 2, "t", ["retention.ms"]).configs] == ["retention.ms"]
    assert describe(h, 2, "nope").error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    cluster = describe(h, 4, "")
    assert [(c.name, c.value, c.config_source, c.read_only) for c in cluster.configs] == [
        ("log.retention.ms", "1234", 3, False)]
    other = describe(h, 4, "9")
    assert (other.error_code, other.error_message) == (
        ErrorCode.INVALID_REQUEST, "Unexpected broker id, expected 1 or empty string, but "
        "received 9")
    node = describe(h, 4, "1")
    assert len(node.configs) > 300 and all(c.value is None for c in node.configs
                                           if c.is_sensitive)
