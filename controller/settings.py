"""ControllerSettings: everything the sans-IO controller is told instead of reading it.

The server maps Kafka properties onto this (broker.session.timeout.ms and friends); the
control logic never sees a properties file, a socket or a clock.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

# metadata.version levels (Kafka's MetadataVersion feature levels) that change what we write.
MV_3_3_IV3 = 7  # lowest level Kafka 4.x supports; BrokerRegistrationChangeRecord v1
MV_3_4_IV0 = 8  # RegisterBrokerRecord v2
MV_3_6_IV1 = 13  # metadata transactions (BeginTransactionRecord, KIP-868)
MV_3_7_IV2 = 17  # RegisterBrokerRecord v3 with LogDirs; registrations must carry log dirs
MV_4_1_IV1 = 27  # what Kafka 4.1 bootstraps with


@dataclass(frozen=True)
class TxnTopicSettings:
    """Kafka's transaction.state.log.* settings that shape the __transaction_state topic."""

    num_partitions: int = 50  # transaction.state.log.num.partitions
    min_isr: int = 2  # transaction.state.log.min.isr
    segment_bytes: int = 100 * 1024 * 1024  # transaction.state.log.segment.bytes


@dataclass(frozen=True)
class AdvertisedEndpoint:
    """One advertised listener of this node, as DescribeCluster and DescribeQuorum report it."""

    name: str
    host: str
    port: int
    security_protocol: int = 0  # Kafka's SecurityProtocol id: PLAINTEXT 0, SSL 1, SASL_* 2/3


@dataclass(frozen=True, kw_only=True)
class ControllerSettings:
    cluster_id: str
    node_id: int = 1
    broker_session_timeout_ms: int = 9000
    broker_heartbeat_interval_ms: int = 2000
    transaction_max_timeout_ms: int = 900000
    producer_id_block_size: int = 1000
    # This node claims its next block once this share of the current one is handed out.
    producer_id_prefetch_ratio: float = 0.9
    # AllocateProducerIds per broker per second (token bucket, Kafka's KIP-599 shape);
    # 0 means unlimited. The burst is quota * quota_window_num * quota_window_size_seconds.
    allocate_producer_ids_quota: float = 0.0
    quota_window_num: int = 11
    quota_window_size_seconds: int = 1
    # Written once, into an empty log, as the bootstrap metadata transaction.
    metadata_version: int = MV_4_1_IV1
    bootstrap_features: Mapping[str, int] = field(default_factory=dict)
    # min.insync.replicas: the cluster-level ConfigRecord written when ELR is turned on.
    min_insync_replicas: int = 1
    # This node's advertised listeners and which of them are CONTROLLER listeners.
    advertised_listeners: tuple[AdvertisedEndpoint, ...] = ()
    controller_listener_names: tuple[str, ...] = ("CONTROLLER",)
    rack: str | None = None
    # meta.properties' directory.id: partitions this node creates are assigned to it.
    log_directory_id: uuid.UUID = uuid.UUID(int=0)
    # transaction.state.log.*: the __transaction_state topic this node creates.
    txn_topic: TxnTopicSettings = field(default_factory=TxnTopicSettings)
    # metadata.max.idle.interval.ms: a NoOpRecord this often, as Kafka's controller writes
    # one, so fetchers see the log move and its high watermark advance; 0 writes none.
    max_idle_interval_ms: int = 0
    # The node's properties: the static layer under topic and broker configs (num.partitions,
    # default.replication.factor, log.retention.hours, ...), as a Kafka node's own file is.
    static_configs: Mapping[str, str] = field(default_factory=dict)

    def controller_endpoints(self) -> tuple[AdvertisedEndpoint, ...]:
        return tuple(e for e in self.advertised_listeners
                     if e.name in self.controller_listener_names)

    def broker_endpoints(self) -> tuple[AdvertisedEndpoint, ...]:
        return tuple(e for e in self.advertised_listeners
                     if e.name not in self.controller_listener_names)

    @property
    def serves_clients(self) -> bool:
        """Whether this node has a client listener, where InitProducerId is served (and so
        whether it needs producer-id blocks of its own). Settings that name no listeners at
        all (the sans-IO controller on its own) count as serving clients."""
        return not self.advertised_listeners or bool(self.broker_endpoints())
