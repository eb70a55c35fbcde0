"""A sans-IO stand-in for the quorum task: an in-memory log, a fake clock, simulated restarts.

It drives QuorumController exactly as DESIGN.md says the loop does (handle/tick, append,
apply, commit, on_committed), so controller tests run as plain function calls. Records are
round-tripped through their encoders on append, so what replays is what the log would hold.
`restart()` builds a new controller from the durable prefix only (optionally via a snapshot),
which is how a kill -9 looks to the control logic.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kraftpy.controller.quorum_controller import QuorumController
from kraftpy.controller.result import ControllerResult
from kraftpy.controller.settings import ControllerSettings
from kraftpy.controller.transaction_control import TxnPartition, TxnRecord
from kraftpy.protocol import txn_log
from kraftpy.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraftpy.protocol.messages.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
    Listener,
)
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.metadata_frame import decode_metadata_record, encode_metadata_record

CLUSTER_ID = "kraftpy-test-cluster-0"

# What a Kafka 4.1 broker registers with (features from a real RegisterBrokerRecord).
KAFKA_41_FEATURES = (("group.version", 0, 1), ("kraft.version", 0, 1),
                     ("metadata.version", 7, 27), ("share.version", 0, 1),
                     ("transaction.version", 0, 2), ("eligible.leader.replicas.version", 0, 1))


def settings(**overrides: Any) -> ControllerSettings:
    return ControllerSettings(cluster_id=CLUSTER_ID, **overrides)


@dataclass
class Harness:
    settings: ControllerSettings = field(default_factory=settings)
    now_ms: int = 1_000_000
    leader_epoch: int = 1
    auto_commit: bool = True
    records: list[tuple[bytes, int]] = field(default_factory=list)  # (framed value, offset)
    # __transaction_state: (key bytes, value bytes or None, the TxnPartition it went to)
    txn: list[tuple[bytes, bytes | None, TxnPartition]] = field(default_factory=list)
    hwm: int = 0
    txn_hwm: int = 0
    snapshot: list[bytes] | None = None
    snapshot_end: int = 0
    qc: QuorumController = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.qc is None:
            self.qc = QuorumController(self.settings)
            self.qc.activate(leader_epoch=self.leader_epoch, now_ms=self.now_ms)
            self.tick()  # bootstrap

    # --- the loop -------------------------------------------------------------------------

    @property
    def end(self) -> int:
        return self.snapshot_end + len(self.records)

    def write(self, result: ControllerResult) -> ControllerResult:
        offset, txn_offset = self.end, len(self.txn)
        for record, version in result.records:
            self.records.append((encode_metadata_record(record, version), self.end))
        for rec in result.txn_records:
            self.txn.append((txn_log.encode_key(rec.key),
                             None if rec.value is None
                             else txn_log.encode_value(rec.value, rec.value_version),
                             rec.partition))
        if result.records or result.txn_records:
            decoded = ControllerResult(
                result.response,
                [decode_metadata_record(v) for v, _ in self.records[offset - self.snapshot_end:]],
                [TxnRecord(p, txn_log.decode_key(k)[0], *txn_log.decode_value(v))
                 for k, v, p in self.txn[txn_offset:]])
            self.qc.apply(decoded, offset=offset, txn_offset=txn_offset)
        if self.auto_commit:
            self.commit()
        return result

    def commit(self) -> None:
        self.hwm, self.txn_hwm = self.end, len(self.txn)
        self.qc.on_committed(self.hwm, self.txn_hwm)

    def handle(self, request: Any, version: int, listener: str | None = None) -> Any:
        result = self.qc.handle(request, version, now_ms=self.now_ms, next_offset=self.end,
                                listener=listener)
        return self.write(result).response

    def result(self, request: Any, version: int, listener: str | None = None) -> ControllerResult:
        return self.write(self.qc.handle(request, version, now_ms=self.now_ms,
                                         next_offset=self.end, listener=listener))

    def tick(self) -> ControllerResult:
        return self.write(self.qc.tick(now_ms=self.now_ms, next_offset=self.end))

    def advance(self, ms: int) -> ControllerResult:
        self.now_ms += ms
        return self.tick()

    # --- durability -----------------------------------------------------------------------

    def restart(self, *, use_snapshot: bool = False) -> QuorumController:
        """Lose everything not committed, then recover as the node would."""
        self.records = self.records[:self.hwm - self.snapshot_end]
        self.txn = self.txn[:self.txn_hwm]
        if use_snapshot:
            self.snapshot = [encode_metadata_record(r, v) for r, v in
                             self.qc.snapshot_records()]
            self.snapshot_end, self.records = self.hwm, []
        self.qc = QuorumController(self.settings)
        if self.snapshot is not None:
            for value in self.snapshot:
                record, version = decode_metadata_record(value)
                self.qc.replay(record, version, self.snapshot_end - 1)
        for value, offset in self.records:
            record, version = decode_metadata_record(value)
            self.qc.replay(record, version, offset)
        for i, (k, v, p) in enumerate(self.txn):
            self.qc.replay_txn(txn_log.decode_key(k)[0], txn_log.decode_value(v)[0], i,
                               p.index)
        self.qc.on_committed(self.end, len(self.txn))
        self.leader_epoch += 1
        self.qc.activate(leader_epoch=self.leader_epoch, now_ms=self.now_ms)
        self.tick()
        return self.qc

    # --- request helpers ------------------------------------------------------------------

    def register(self, broker_id: int, *, incarnation: uuid.UUID | None = None,
                 features: tuple[tuple[str, int, int], ...] = KAFKA_41_FEATURES,
                 cluster_id: str = CLUSTER_ID, version: int = 4,
                 log_dirs: list[uuid.UUID] | None = None, previous_epoch: int = -1) -> Any:
        return self.handle(BrokerRegistrationRequest(
            broker_id=broker_id, cluster_id=cluster_id,
            incarnation_id=incarnation or uuid.uuid4(),
            listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=19092 + broker_id,
                                security_protocol=0)],
            features=[Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                      for n, lo, hi in features],
            rack=None,
            log_dirs=[uuid.uuid4()] if log_dirs is None else log_dirs,
            previous_broker_epoch=previous_epoch), version)

    def heartbeat(self, broker_id: int, epoch: int, *, offset: int | None = None,
                  want_fence: bool = False, want_shut_down: bool = False,
                  offline_log_dirs: list[uuid.UUID] | None = None) -> Any:
        return self.handle(BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=epoch,
            current_metadata_offset=self.end if offset is None else offset,
            want_fence=want_fence, want_shut_down=want_shut_down,
            offline_log_dirs=offline_log_dirs or []), 1)

    def unfenced_broker(self, broker_id: int) -> int:
        """Register and heartbeat until unfenced; returns the broker epoch."""
        epoch = self.register(broker_id).broker_epoch
        reply = self.heartbeat(broker_id, epoch)
        assert not reply.is_fenced, reply
        return epoch

    def brokers_and_topics(self, partitions_per_topic: list[int],
                           brokers: tuple[int, ...] = (101, 102, 103)) -> None:
        """Brokers registered, unfenced and given an id block each, then topics replayed
        straight into the controller (TopicRecord, PartitionRecords over those brokers): an
        image for snapshot tests."""
        from kraftpy.protocol.records.partition_record import PartitionRecord
        from kraftpy.protocol.records.topic_record import TopicRecord

        for broker_id in brokers:
            self.allocate(broker_id, self.unfenced_broker(broker_id))
        for t, count in enumerate(partitions_per_topic):
            topic_id = uuid.UUID(int=t + 1)
            self.qc.replay(TopicRecord(name=f"t{t}", topic_id=topic_id), 0, self.end)
            for p in range(count):
                replicas = [brokers[(p + i) % len(brokers)] for i in range(len(brokers))]
                self.qc.replay(PartitionRecord(
                    topic_id=topic_id, partition_id=p, replicas=replicas, isr=replicas[:2],
                    leader=replicas[0], leader_epoch=0, partition_epoch=0), 0, self.end)

    def allocate(self, broker_id: int, epoch: int) -> Any:
        return self.handle(AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=epoch), 0)

    def init(self, transactional_id: str | None = None, *, pid: int = -1, epoch: int = -1,
             timeout_ms: int = 60000, version: int = 4) -> Any:
        return self.handle(InitProducerIdRequest(
            transactional_id=transactional_id, transaction_timeout_ms=timeout_ms,
            producer_id=pid, producer_epoch=epoch), version)

    def ready_ids(self) -> None:
        """Make this node's first id block durable (as the loop's tick after a commit)."""
        self.tick()
