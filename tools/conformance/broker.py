"""The broker suite's plumbing: a target, a per-check session, and each request it speaks.

A check runs inside one `Session`: the session knows the cluster from Metadata, opens one
connection per broker it needs (the partition leader, the transaction or group coordinator),
names every topic, transactional id and group after the run and the check, and on leaving
aborts what the check left open, deletes its groups and its topics, and closes every
connection. Every wait is bounded by the check's deadline, so a broker that never answers
fails one check, not the run.

Each helper sends one request at a version the caller names (the rules differ by version:
Produce v12 adds a partition to a transaction, v11 does not) or, when the rule does not
depend on it, at the highest version both sides speak, and returns the answer's fields the
checks read. Answers are kept as `observed` values: error names, offsets relative to the
check's own topic, and producer ids only as "the same one" or "a new one", so that two
clusters' runs of a check can be compared value by value.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kraftpy.protocol.control_records import ControlType, parse_control_key
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.messages.add_offsets_to_txn_request import AddOffsetsToTxnRequest
from kraftpy.protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
)
from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
from kraftpy.protocol.messages.create_topics_request import CreatableTopic, CreateTopicsRequest
from kraftpy.protocol.messages.delete_groups_request import DeleteGroupsRequest
from kraftpy.protocol.messages.delete_records_request import (
    DeleteRecordsPartition,
    DeleteRecordsRequest,
    DeleteRecordsTopic,
)
from kraftpy.protocol.messages.delete_topics_request import DeleteTopicsRequest
from kraftpy.protocol.messages.describe_producers_request import (
    DescribeProducersRequest,
    TopicRequest,
)
from kraftpy.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from kraftpy.protocol.messages.end_txn_request import EndTxnRequest
from kraftpy.protocol.messages.fetch_request import FetchPartition, FetchRequest, FetchTopic
from kraftpy.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.messages.join_group_request import JoinGroupRequest, JoinGroupRequestProtocol
from kraftpy.protocol.messages.leave_group_request import LeaveGroupRequest, MemberIdentity
from kraftpy.protocol.messages.list_offsets_request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kraftpy.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kraftpy.protocol.messages.offset_fetch_request import (
    OffsetFetchRequest,
    OffsetFetchRequestGroup,
    OffsetFetchRequestTopics,
)
from kraftpy.protocol.messages.produce_request import (
    PartitionProduceData,
    ProduceRequest,
    TopicProduceData,
)
from kraftpy.protocol.messages.sync_group_request import (
    SyncGroupRequest,
    SyncGroupRequestAssignment,
)
from kraftpy.protocol.messages.txn_offset_commit_request import (
    TxnOffsetCommitRequest,
    TxnOffsetCommitRequestPartition,
    TxnOffsetCommitRequestTopic,
)
from kraftpy.protocol.record_batch import (
    TruncatedBatchError,
    build_record_batch,
    iter_record_batches,
)
from kraftpy.tools.kafka_connection import ClientError, KafkaConnection

E = ErrorCode
T = TypeVar("T")

# Answers a client retries: a coordinator still loading or moving, a partition whose leader
# has not learnt of it yet, a transaction still being completed.
RETRIABLE = frozenset({E.COORDINATOR_LOAD_IN_PROGRESS, E.COORDINATOR_NOT_AVAILABLE,
                       E.NOT_COORDINATOR, E.CONCURRENT_TRANSACTIONS,
                       E.UNKNOWN_TOPIC_OR_PARTITION, E.NOT_LEADER_OR_FOLLOWER,
                       E.LEADER_NOT_AVAILABLE, E.REBALANCE_IN_PROGRESS})
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LATEST, EARLIEST = -1, -2  # ListOffsets timestamps


def error_name(code: int) -> str:
    try:
        return E(code).name
    except ValueError:
        return f"error {code}"


class CheckFailed(AssertionError):
    """A rule was broken: what was asked, what Kafka 4.1 answers, and what came back."""

    def __init__(self, what: str, expected: Any = None, actual: Any = None) -> None:
        super().__init__(what if expected is None and actual is None
                         else f"{what}: got {actual!r}, expected {expected!r}")
        self.what, self.expected, self.actual = what, expected, actual


@dataclass
class BrokerTarget:
    """The cluster under test, reached through one or more bootstrap brokers."""

    bootstrap: list[tuple[str, int]]
    settings: dict[str, str] = field(default_factory=dict)
    timeout: float = 10.0  # one request's answer
    check_timeout: float = 60.0  # one whole check, cleanup included
    # One wait for the cluster to act on its own (a marker to land, a leader to serve a new
    # topic): a broker that never does fails the check after this long.
    wait_timeout: float = 15.0
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    prefix: str = "kraftpy-conformance"


@dataclass(frozen=True)
class Topic:
    name: str
    topic_id: uuid.UUID
    leaders: dict[int, int]  # partition -> leader node id


@dataclass(frozen=True)
class ProduceAnswer:
    error: str
    base_offset: int
    log_start_offset: int
    message: str | None


@dataclass(frozen=True)
class Batch:
    """One batch of a Fetch answer, as the checks read it."""

    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    count: int
    transactional: bool
    control: str | None  # "COMMIT" / "ABORT" for a transaction marker
    values: tuple[bytes | None, ...]


@dataclass(frozen=True)
class FetchAnswer:
    error: str
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted: list[tuple[int, int]] | None  # (producer id, first offset); None if not sent
    batches: list[Batch]


@dataclass(frozen=True)
class BrokerCheck:
    """One rule: `slug` names it in output and in the names of what it creates."""

    slug: str
    kip: str
    rule: str
    run: Callable[[Session], None]
    # The check's time bound in check timeouts: more for one that must make tens of thousands
    # of coordinator writes.
    timeout_scale: float = 1.0


BROKER_CHECKS: list[BrokerCheck] = []


def broker_check(slug: str, kip: str, rule: str, *, timeout_scale: float = 1.0
                 ) -> Callable[[Callable[[Session], None]], Callable[[Session], None]]:
    def register(fn: Callable[[Session], None]) -> Callable[[Session], None]:
        BROKER_CHECKS.append(BrokerCheck(slug, kip, rule, fn, timeout_scale))
        return fn

    return register


class Session:
    """One check's connections, names, deadline and cleanup."""

    def __init__(self, target: BrokerTarget, slug: str, timeout_scale: float = 1.0) -> None:
        self.target = target
        self.slug = slug
        self.timeout = target.check_timeout * timeout_scale
        self.deadline = time.monotonic() + self.timeout
        self.observed: dict[str, Any] = {}
        self.cleanup_errors: list[str] = []
        self._conns: dict[Any, KafkaConnection] = {}
        self._brokers: dict[int, tuple[str, int]] = {}
        self._cleanups: list[Callable[[], None]] = []
        self._pids: dict[int, str] = {}

    # --- lifetime ------------------------------------------------------------------------------
    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        # Cleanup gets its own short deadline: a check that ran out of time still tidies up.
        self.deadline = max(self.deadline, time.monotonic() + min(15.0, self.target.timeout * 2))
        for undo in reversed(self._cleanups):
            try:
                undo()
            except Exception as e:  # cleanup must not hide the check's own answer
                self.cleanup_errors.append(f"{type(e).__name__}: {e}")
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    def on_exit(self, undo: Callable[[], None]) -> None:
        self._cleanups.append(undo)

    def name(self, what: str = "") -> str:
        """A name of this run and check (topic, transactional id, group)."""
        return f"{self.target.prefix}-{self.target.run_id}-{self.slug}{'-' + what if what else ''}"

    def local(self, name: str) -> str:
        """A name as observed: without the run's prefix, the same on every run."""
        return name.removeprefix(f"{self.target.prefix}-{self.target.run_id}-")

    # --- observing and expecting ---------------------------------------------------------------
    def observe(self, what: str, value: T) -> T:
        self.observed[what] = value
        return value

    def expect(self, what: str, actual: T, expected: Any) -> T:
        """Record `actual` under `what`; the check fails unless it equals `expected`."""
        self.observed[what] = actual
        if actual != expected:
            raise CheckFailed(what, expected, actual)
        return actual

    def pid_label(self, producer_id: int) -> str:
        """P0, P1, ...: producer ids by the order this check first saw them."""
        if producer_id < 0:
            return str(producer_id)
        return self._pids.setdefault(producer_id, f"P{len(self._pids)}")

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def wait_for(self, what: str, probe: Callable[[], T], done: Callable[[T], bool],
                 expected: str, step: float = 0.05) -> T:
        """Ask `probe` until `done(answer)`; past the deadline the check fails with the last
        answer. Every wait in the suite goes through here."""
        until = min(self.deadline, time.monotonic() + self.target.wait_timeout)
        while True:
            answer = probe()
            if done(answer):
                return answer
            left = until - time.monotonic()
            if left <= 0:
                raise CheckFailed(f"{what} (waited {self.target.wait_timeout:g} s)", expected,
                                  answer)
            time.sleep(min(step, left))
            step = min(step * 1.5, 0.5)

    # --- connections ---------------------------------------------------------------------------
    def _connect(self, address: tuple[str, int]) -> KafkaConnection:
        return KafkaConnection(address, self.target.settings,
                               timeout=max(0.5, min(self.target.timeout, self.left() + 5)),
                               client_id="kraftpy-conformance")

    def any(self) -> KafkaConnection:
        """A connection to a bootstrap broker (the first that answers)."""
        conn = self._conns.get("bootstrap")
        if conn is None:
            failures = []
            for address in self.target.bootstrap:
                try:
                    conn = self._connect(address)
                    break
                except ClientError as exc:
                    failures.append(str(exc))
            else:
                raise ClientError("; ".join(failures))
            self._conns["bootstrap"] = conn
        return conn

    def node(self, node_id: int) -> KafkaConnection:
        conn = self._conns.get(node_id)
        if conn is None:
            if node_id not in self._brokers:
                self.metadata([])
            if node_id not in self._brokers:
                raise CheckFailed(f"broker {node_id} is not in Metadata",
                                  "a listed broker", sorted(self._brokers))
            conn = self._conns[node_id] = self._connect(self._brokers[node_id])
        return conn

    def _request_timeout_ms(self) -> int:
        """A request's own timeout (Produce, CreateTopics, ...): half the wait for its answer,
        so that a broker that runs out of it still answers in time."""
        return int(max(0.5, min(self.target.timeout / 2, self.left())) * 1000)

    def version(self, conn: KafkaConnection, message: Any, lo: int, hi: int) -> int:
        """The highest version of `message` in [lo, hi] that the broker serves; fails the check
        (naming the range the rule needs) when there is none."""
        served = conn.api_versions().get(message.API_KEY)
        ours = message.VALID_VERSIONS
        top = min(hi, ours[1], served[1] if served else -1)
        if served is None or top < max(lo, served[0], ours[0]):
            raise CheckFailed(f"{type(message).__name__[:-7]} v{lo}-{hi} served",
                              f"v{lo}-{hi}", None if served is None else f"v{served[0]}-{served[1]}")
        return top

    def finalized_feature(self, name: str) -> int:
        response = self.any().request(ApiVersionsRequest(client_software_name="kraftpy",
                                                         client_software_version="1"), 3)
        for f in response.finalized_features:
            if f.name == name:
                return f.max_version_level
        return 0

    # --- metadata and topics -------------------------------------------------------------------
    def metadata(self, topics: list[str]) -> Any:
        response = self.any().request(MetadataRequest(
            topics=[MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=False), 12)
        self._brokers = {b.node_id: (b.host, b.port) for b in response.brokers}
        return response

    def create_topic(self, suffix: str = "", partitions: int = 1,
                     configs: dict[str, str] | None = None) -> Topic:
        """A topic of this check, deleted when the check ends; returned once its leaders serve
        it (ListOffsets answers without error)."""
        from kraftpy.protocol.messages.create_topics_request import CreatableTopicConfig

        name = self.name(suffix)
        response = self.any().request(CreateTopicsRequest(topics=[CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=-1,
            configs=[CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
            timeout_ms=self._request_timeout_ms()), 5)
        (result,) = response.topics
        if result.error_code != E.NONE:
            raise CheckFailed(f"CreateTopics {name}", "NONE",
                              f"{error_name(result.error_code)}: {result.error_message}")
        self.on_exit(lambda: self.delete_topic(name))

        def leaders(conn: KafkaConnection) -> dict[int, int]:
            (t,) = conn.request(MetadataRequest(topics=[MetadataRequestTopic(name=name)],
                                                allow_auto_topic_creation=False), 12).topics
            if t.error_code != E.NONE:
                return {}
            return {p.partition_index: p.leader_id for p in t.partitions
                    if p.error_code == E.NONE and p.leader_id >= 0}

        # Every broker must know it (a coordinator elsewhere answers UNKNOWN_TOPIC_OR_PARTITION
        # to AddPartitionsToTxn until its metadata has the topic).
        self.metadata([])
        found: dict[int, int] = {}
        for node in sorted(self._brokers):
            found = self.wait_for(f"leaders of {self.local(name)} known to broker {node}",
                                  lambda node=node: leaders(self.node(node)),
                                  lambda got: len(got) == partitions,
                                  f"{partitions} partitions with leaders")
        (t,) = self.metadata([name]).topics
        topic = Topic(name, t.topic_id, found)
        for p in range(partitions):
            self.wait_for(f"{name}-{p} served by its leader",
                          lambda p=p: self._list_offset_error(topic, p),
                          lambda code: code == E.NONE, "NONE")
        return topic

    def delete_topic(self, name: str) -> None:
        response = self.any().request(DeleteTopicsRequest(topic_names=[name],
                                                        timeout_ms=self._request_timeout_ms()), 5)
        code = response.responses[0].error_code
        if code not in (E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION):
            raise ClientError(f"DeleteTopics {name}: {error_name(code)}")

    # --- producing and reading ------------------------------------------------------------------
    def batch(self, values: list[bytes], *, producer_id: int = -1, epoch: int = -1,
              sequence: int = -1, transactional: bool = False) -> bytes:
        return build_record_batch(values, timestamp=int(time.time() * 1000),
                                  producer_id=producer_id, producer_epoch=epoch,
                                  base_sequence=sequence, transactional=transactional)

    def produce(self, topic: Topic, batch: bytes, *, partition: int = 0,
                version: tuple[int, int] = (3, 13), transactional_id: str | None = None,
                acks: int = -1) -> ProduceAnswer:
        conn = self.node(topic.leaders[partition])
        v = self.version(conn, ProduceRequest, *version)
        response = conn.request(ProduceRequest(
            transactional_id=transactional_id, acks=acks,
            timeout_ms=self._request_timeout_ms(),
            topic_data=[TopicProduceData(name=topic.name, topic_id=topic.topic_id,
                                         partition_data=[PartitionProduceData(
                                             index=partition, records=batch)])]), v)
        (t,) = response.responses
        (p,) = t.partition_responses
        return ProduceAnswer(error_name(p.error_code), p.base_offset, p.log_start_offset,
                             p.error_message)

    def fetch(self, topic: Topic, offset: int = 0, *, partition: int = 0,
              isolation: int = READ_UNCOMMITTED) -> FetchAnswer:
        conn = self.node(topic.leaders[partition])
        v = self.version(conn, FetchRequest, 4, 17)
        response = conn.request(FetchRequest(
            replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=8 << 20,
            isolation_level=isolation, session_id=0, session_epoch=-1,
            topics=[FetchTopic(topic=topic.name, topic_id=topic.topic_id, partitions=[
                FetchPartition(partition=partition, fetch_offset=offset,
                               partition_max_bytes=4 << 20)])]), v)
        if response.error_code != E.NONE:
            return FetchAnswer(error_name(response.error_code), -1, -1, -1, None, [])
        (t,) = response.responses
        (p,) = t.partitions
        aborted = None if p.aborted_transactions is None else [
            (a.producer_id, a.first_offset) for a in p.aborted_transactions]
        return FetchAnswer(error_name(p.error_code), p.high_watermark, p.last_stable_offset,
                           p.log_start_offset, aborted, decode_batches(p.records or b""))

    def _list_offset_error(self, topic: Topic, partition: int) -> int:
        conn = self.node(topic.leaders[partition])
        return self._list_offsets(conn, topic, partition, LATEST, READ_UNCOMMITTED)[0]

    def _list_offsets(self, conn: KafkaConnection, topic: Topic, partition: int, timestamp: int,
                      isolation: int) -> tuple[int, int]:
        v = self.version(conn, ListOffsetsRequest, 2, 10)
        response = conn.request(ListOffsetsRequest(
            replica_id=-1, isolation_level=isolation, timeout_ms=1000,
            topics=[ListOffsetsTopic(name=topic.name, partitions=[ListOffsetsPartition(
                partition_index=partition, timestamp=timestamp)])]), v)
        (p,) = response.topics[0].partitions
        return p.error_code, p.offset

    def list_offset(self, topic: Topic, *, partition: int = 0, timestamp: int = LATEST,
                    isolation: int = READ_UNCOMMITTED) -> int:
        """The latest offset (log end offset, or the last stable offset read_committed), or
        the earliest; -1 with the error's name recorded if the broker refuses."""
        code, offset = self._list_offsets(self.node(topic.leaders[partition]), topic, partition,
                                          timestamp, isolation)
        if code != E.NONE:
            raise CheckFailed(f"ListOffsets {topic.name}-{partition}", "NONE", error_name(code))
        return offset

    def delete_records(self, topic: Topic, before: int, partition: int = 0) -> tuple[str, int]:
        conn = self.node(topic.leaders[partition])
        response = conn.request(DeleteRecordsRequest(
            topics=[DeleteRecordsTopic(name=topic.name, partitions=[
                DeleteRecordsPartition(partition_index=partition, offset=before)])],
            timeout_ms=self._request_timeout_ms()),
            self.version(conn, DeleteRecordsRequest, 0, 2))
        (p,) = response.topics[0].partitions
        return error_name(p.error_code), p.low_watermark

    def describe_producers(self, topic: Topic, partition: int = 0) -> Any:
        conn = self.node(topic.leaders[partition])
        response = conn.request(DescribeProducersRequest(topics=[TopicRequest(
            name=topic.name, partition_indexes=[partition])]), 0)
        (p,) = response.topics[0].partitions
        return p

    # --- producer ids and coordinators -----------------------------------------------------------
    def coordinator(self, key: str, key_type: int) -> KafkaConnection:
        """The group (0) or transaction (1) coordinator of `key`, found as clients find it."""
        cache = ("coordinator", key_type, key)
        if cache in self._conns:
            return self._conns[cache]

        def find() -> Any:
            return self.any().request(FindCoordinatorRequest(key=key, key_type=key_type), 2)

        found = self.wait_for(f"FindCoordinator {key}", find,
                              lambda r: r.error_code not in RETRIABLE, "a coordinator")
        if found.error_code != E.NONE:
            raise CheckFailed(f"FindCoordinator {key}", "NONE", error_name(found.error_code))
        self._brokers.setdefault(found.node_id, (found.host, found.port))
        conn = self.node(found.node_id)
        self._conns[cache] = conn
        return conn

    def init_producer_id(self, transactional_id: str | None = None, *, producer_id: int = -1,
                         epoch: int = -1, version: tuple[int, int] = (0, 6),
                         timeout_ms: int = 60000, retry: bool = True) -> tuple[str, int, int]:
        """(error, producer id, epoch) of InitProducerId; retriable answers are asked again."""
        conn = self.coordinator(transactional_id, 1) if transactional_id else self.any()
        v = self.version(conn, InitProducerIdRequest, *version)
        request = InitProducerIdRequest(transactional_id=transactional_id,
                                        transaction_timeout_ms=timeout_ms,
                                        producer_id=producer_id, producer_epoch=epoch)
        answer = self.wait_for(
            f"InitProducerId v{v}", lambda: conn.request(request, v),
            lambda r: not retry or r.error_code not in RETRIABLE, "an answer a client keeps")
        return error_name(answer.error_code), answer.producer_id, answer.producer_epoch

    def idempotent_producer(self) -> tuple[int, int]:
        error, pid, epoch = self.init_producer_id()
        if error != "NONE":
            raise CheckFailed("InitProducerId for an idempotent producer", "NONE", error)
        return pid, epoch

    def transactional_producer(self, suffix: str = "", timeout_ms: int = 60000
                               ) -> tuple[str, int, int]:
        """(transactional id, producer id, epoch), the transaction aborted when the check ends
        if it is still open then."""
        txn = self.name(suffix or "txn")
        error, pid, epoch = self.init_producer_id(txn, timeout_ms=timeout_ms)
        if error != "NONE":
            raise CheckFailed(f"InitProducerId {txn}", "NONE", error)
        self.on_exit(lambda: self._abandon(txn))
        return txn, pid, epoch

    def _abandon(self, txn: str) -> None:
        """Fence whatever the check left open: InitProducerId aborts an ongoing transaction."""
        state = self.describe_transaction(txn)
        if state.transaction_state in ("Ongoing", "PrepareCommit", "PrepareAbort"):
            self.init_producer_id(txn)

    def settled(self, txn: str) -> Any:
        """The transaction's state once the coordinator has finished ending it (its markers
        written and acknowledged: no longer PrepareCommit or PrepareAbort)."""
        return self.wait_for(f"{self.local(txn)} to complete", lambda: self.describe_transaction(txn),
                             lambda st: not st.transaction_state.startswith("Prepare"),
                             "a state other than PrepareCommit or PrepareAbort")

    def describe_transaction(self, txn: str) -> Any:
        conn = self.coordinator(txn, 1)
        (state,) = conn.request(DescribeTransactionsRequest(transactional_ids=[txn]),
                                0).transaction_states
        return state

    def add_partitions(self, txn: str, pid: int, epoch: int, topic: Topic,
                       partitions: tuple[int, ...] = (0,), version: tuple[int, int] = (0, 3)
                       ) -> str:
        """AddPartitionsToTxn as a client sends it (v3 and below); the partition's error."""
        conn = self.coordinator(txn, 1)
        v = self.version(conn, AddPartitionsToTxnRequest, *version)
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=txn, v3_and_below_producer_id=pid,
            v3_and_below_producer_epoch=epoch, v3_and_below_topics=[AddPartitionsToTxnTopic(
                name=topic.name, partitions=list(partitions))])
        answer = self.wait_for("AddPartitionsToTxn", lambda: conn.request(request, v),
                               lambda r: not _partition_codes(r) <= RETRIABLE or not
                               _partition_codes(r),
                               "an answer a client keeps")
        codes = _partition_codes(answer)
        return error_name(codes.pop()) if len(codes) == 1 else str(sorted(codes))

    def add_offsets(self, txn: str, pid: int, epoch: int, group: str,
                    version: tuple[int, int] = (0, 4)) -> str:
        conn = self.coordinator(txn, 1)
        v = self.version(conn, AddOffsetsToTxnRequest, *version)
        request = AddOffsetsToTxnRequest(transactional_id=txn, producer_id=pid,
                                         producer_epoch=epoch, group_id=group)
        answer = self.wait_for("AddOffsetsToTxn", lambda: conn.request(request, v),
                               lambda r: r.error_code not in RETRIABLE, "an answer a client keeps")
        return error_name(answer.error_code)

    def end_txn(self, txn: str, pid: int, epoch: int, commit: bool,
                version: tuple[int, int] = (0, 5), retry: bool = True) -> tuple[str, int, int]:
        """(error, producer id, epoch) of EndTxn; v5 answers the next epoch (KIP-890)."""
        conn = self.coordinator(txn, 1)
        v = self.version(conn, EndTxnRequest, *version)
        request = EndTxnRequest(transactional_id=txn, producer_id=pid, producer_epoch=epoch,
                                committed=commit)
        answer = self.wait_for("EndTxn", lambda: conn.request(request, v),
                               lambda r: not retry or r.error_code not in RETRIABLE,
                               "an answer a client keeps")
        return error_name(answer.error_code), answer.producer_id, answer.producer_epoch

    # --- groups --------------------------------------------------------------------------------
    def join_group(self, group: str, topic: Topic) -> tuple[str, int]:
        """Join `group` as its one classic consumer and sync: (member id, generation). The
        group is deleted when the check ends."""
        conn = self.coordinator(group, 0)
        self.on_exit(lambda: self.delete_group(group))
        member = ""
        metadata = _subscription(topic.name)
        answer = None
        for _ in range(3):  # v4+: the first join answers MEMBER_ID_REQUIRED with the member id
            answer = self.wait_for("JoinGroup", lambda m=member: conn.request(JoinGroupRequest(
                group_id=group, session_timeout_ms=30000, rebalance_timeout_ms=30000,
                member_id=m, protocol_type="consumer", protocols=[JoinGroupRequestProtocol(
                    name="range", metadata=metadata)]), 5),
                lambda r: r.error_code not in RETRIABLE, "an answer a client keeps")
            if answer.error_code != E.MEMBER_ID_REQUIRED:
                break
            member = answer.member_id
        assert answer is not None
        if answer.error_code != E.NONE:
            raise CheckFailed(f"JoinGroup {group}", "NONE", error_name(answer.error_code))
        member, generation = answer.member_id, answer.generation_id
        self.on_exit(lambda: conn.request(LeaveGroupRequest(group_id=group, members=[
            MemberIdentity(member_id=member)]), 3))
        synced = conn.request(SyncGroupRequest(group_id=group, generation_id=generation,
                                               member_id=member, assignments=[
                                                   SyncGroupRequestAssignment(
                                                       member_id=member, assignment=b"")]), 3)
        if synced.error_code != E.NONE:
            raise CheckFailed(f"SyncGroup {group}", "NONE", error_name(synced.error_code))
        return member, generation

    def delete_group(self, group: str) -> None:
        conn = self.coordinator(group, 0)
        response = conn.request(DeleteGroupsRequest(groups_names=[group]), 1)
        code = response.results[0].error_code
        if code not in (E.NONE, E.GROUP_ID_NOT_FOUND):
            raise ClientError(f"DeleteGroups {group}: {error_name(code)}")

    def txn_offset_commit(self, txn: str, pid: int, epoch: int, group: str, topic: Topic,
                          offset: int, *, member_id: str = "", generation: int = -1,
                          version: tuple[int, int] = (3, 5)) -> str:
        conn = self.coordinator(group, 0)
        v = self.version(conn, TxnOffsetCommitRequest, *version)
        request = TxnOffsetCommitRequest(
            transactional_id=txn, group_id=group, producer_id=pid, producer_epoch=epoch,
            generation_id=generation, member_id=member_id, topics=[TxnOffsetCommitRequestTopic(
                name=topic.name, partitions=[TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=offset, committed_metadata="")])])
        answer = self.wait_for(
            "TxnOffsetCommit", lambda: conn.request(request, v),
            lambda r: r.topics[0].partitions[0].error_code not in RETRIABLE - {
                E.UNKNOWN_TOPIC_OR_PARTITION}, "an answer a client keeps")
        return error_name(answer.topics[0].partitions[0].error_code)

    def offset_fetch(self, group: str, topic: Topic, *, require_stable: bool) -> tuple[str, int]:
        """(partition error, committed offset) of partition 0, OffsetFetch v8+ (groups)."""
        conn = self.coordinator(group, 0)
        v = self.version(conn, OffsetFetchRequest, 8, 10)
        response = conn.request(OffsetFetchRequest(require_stable=require_stable, groups=[
            OffsetFetchRequestGroup(group_id=group, topics=[OffsetFetchRequestTopics(
                name=topic.name, topic_id=topic.topic_id, partition_indexes=[0])])]), v)
        (g,) = response.groups
        if g.error_code != E.NONE:
            return error_name(g.error_code), -1
        (p,) = g.topics[0].partitions
        return error_name(p.error_code), p.committed_offset


def _partition_codes(response: Any) -> set[int]:
    return {p.partition_error_code for t in response.results_by_topic_v3_and_below
            for p in t.results_by_partition}


def _subscription(topic: str) -> bytes:
    """ConsumerProtocolSubscription v0 for one topic: what a classic consumer joins with."""
    from kraftpy.protocol.messages.consumer_protocol_subscription import (
        ConsumerProtocolSubscription,
    )

    return b"\x00\x00" + ConsumerProtocolSubscription(topics=[topic]).encode(0)


def decode_batches(records: bytes) -> list[Batch]:
    out = []
    try:
        for b in iter_record_batches(records):
            control = None
            values: tuple[bytes | None, ...] = ()
            recs = b.records()
            if b.is_control and recs:
                kind = parse_control_key(recs[0].key)
                control = ControlType(kind).name if kind >= 0 else f"type {kind}"
            else:
                values = tuple(r.value for r in recs)
            out.append(Batch(b.base_offset, b.last_offset, b.producer_id, b.producer_epoch,
                             b.base_sequence, b.records_count, b.is_transactional, control,
                             values))
    except TruncatedBatchError:
        pass  # a fetch may end inside a batch; the whole ones are what counts
    except DecodeError as exc:
        raise CheckFailed("records of a Fetch answer", "valid v2 batches", str(exc)) from None
    return out


def data_batches(batches: list[Batch]) -> Iterator[Batch]:
    return (b for b in batches if b.control is None)
