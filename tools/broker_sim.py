"""A Kafka broker as the controller sees it, built on kraftpy's protocol layer.

It registers (BrokerRegistration v4), heartbeats with its metadata offset (read from
DescribeQuorum's high watermark, as a broker that fetched the log would report), takes
producer-ID blocks (AllocateProducerIds) and unregisters, over a real CONTROLLER connection.
Useful against any KRaft controller to see the broker side of KIP-631 and KIP-730 without
running a broker; `kraftpy broker-sim` drives it from the command line.

    broker = BrokerSim(("127.0.0.1", port), broker_id=7)    # cluster id from DescribeCluster
    broker.register(); broker.wait_unfenced(); start, length = broker.allocate()
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from kraftpy.protocol.error_codes import error_name
from kraftpy.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraftpy.protocol.messages.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
    Listener,
)
from kraftpy.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kraftpy.protocol.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from kraftpy.protocol.messages.unregister_broker_request import UnregisterBrokerRequest
from kraftpy.tools.kafka_connection import KafkaConnection

STALE_BROKER_EPOCH = 77
NOT_CONTROLLER = 41
CONTROLLER_ENDPOINT = 2  # DescribeCluster's EndpointType on a CONTROLLER listener (KIP-919)


class BrokerError(RuntimeError):
    """The controller answered with an error code."""

    def __init__(self, what: str, code: int) -> None:
        super().__init__(f"{what}: error {code} ({error_name(code)})")
        self.code = code


def registration_request(broker_id: int, cluster_id: str, incarnation: uuid.UUID,
                         log_dir: uuid.UUID, *, previous_broker_epoch: int = -1
                         ) -> BrokerRegistrationRequest:
    """A broker with one PLAINTEXT listener that supports what a Kafka 4.1 broker supports
    (metadata.version 7-27, that is 3.3-IV3 to 4.1-IV1, and the other features' ranges)."""
    from kraftpy.controller.feature_control import SUPPORTED_FEATURES

    return BrokerRegistrationRequest(
        broker_id=broker_id, cluster_id=cluster_id, incarnation_id=incarnation,
        listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=20000 + broker_id % 10000,
                            security_protocol=0)],
        features=[Feature(name=name, min_supported_version=lo, max_supported_version=hi)
                  for name, (lo, hi) in SUPPORTED_FEATURES.items()],
        rack=None, log_dirs=[log_dir], previous_broker_epoch=previous_broker_epoch)


class BrokerSim:
    def __init__(self, controller: tuple[str, int] | str, broker_id: int,
                 cluster_id: str | None = None, *, incarnation: uuid.UUID | None = None,
                 timeout: float = 10.0, settings: Mapping[str, str] | None = None) -> None:
        self.address = controller
        self.broker_id = broker_id
        self.incarnation = incarnation or uuid.uuid4()
        self.log_dir = uuid.uuid4()
        self.timeout = timeout
        self.settings = dict(settings or {})
        self.epoch = -1
        self.fenced = True
        self.conn = self._connect()
        self.cluster_id = cluster_id if cluster_id is not None else self.describe_cluster_id()

    def _connect(self) -> KafkaConnection:
        return KafkaConnection(self.address, self.settings, timeout=self.timeout,
                               client_id=f"kraftpy-broker-{self.broker_id}")

    def close(self) -> None:
        self.conn.close()

    def reconnect(self) -> None:
        self.conn.close()
        self.conn = self._connect()

    def request(self, message: Any, version: int) -> Any:
        return self.conn.request(message, version)

    def describe_cluster_id(self) -> str:
        """The cluster id the controller reports (a real broker reads it from meta.properties)."""
        r = self.request(DescribeClusterRequest(endpoint_type=CONTROLLER_ENDPOINT), 1)
        if r.error_code:
            raise BrokerError("DescribeCluster", r.error_code)
        return r.cluster_id

    # --- KIP-631 ---------------------------------------------------------------------------
    def registration(self) -> BrokerRegistrationRequest:
        return registration_request(self.broker_id, self.cluster_id, self.incarnation,
                                    self.log_dir, previous_broker_epoch=self.epoch)

    def register(self, *, retry_for: float = 10.0) -> int:
        """Register (retrying NOT_CONTROLLER while the controller bootstraps); the epoch."""
        deadline = time.monotonic() + retry_for
        while True:
            r = self.request(self.registration(), 4)
            if r.error_code == NOT_CONTROLLER and time.monotonic() < deadline:
                time.sleep(0.05)
                continue
            if r.error_code:
                raise BrokerError("BrokerRegistration", r.error_code)
            self.epoch = r.broker_epoch
            self.fenced = True
            return self.epoch

    def metadata_offset(self) -> int:
        r = self.request(DescribeQuorumRequest(topics=[TopicData(
            topic_name="__cluster_metadata", partitions=[PartitionData(partition_index=0)])]), 2)
        return r.topics[0].partitions[0].high_watermark

    def heartbeat(self, *, epoch: int | None = None, offset: int | None = None,
                  want_fence: bool = False, want_shut_down: bool = False) -> Any:
        r = self.request(BrokerHeartbeatRequest(
            broker_id=self.broker_id, broker_epoch=self.epoch if epoch is None else epoch,
            current_metadata_offset=self.metadata_offset() if offset is None else offset,
            want_fence=want_fence, want_shut_down=want_shut_down), 1)
        if r.error_code == 0:
            self.fenced = r.is_fenced
        return r

    def wait_unfenced(self, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            r = self.heartbeat()
            if r.error_code:
                raise BrokerError("BrokerHeartbeat", r.error_code)
            if not r.is_fenced:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"broker {self.broker_id} still fenced after {timeout}s")
            time.sleep(0.05)

    def unregister(self) -> int:
        return self.request(UnregisterBrokerRequest(broker_id=self.broker_id), 0).error_code

    # --- KIP-730 ---------------------------------------------------------------------------
    def allocate_response(self, epoch: int | None = None) -> Any:
        return self.request(AllocateProducerIdsRequest(
            broker_id=self.broker_id, broker_epoch=self.epoch if epoch is None else epoch), 0)

    def allocate(self) -> tuple[int, int]:
        """(first id, length) of a new block; BrokerError on an error code."""
        r = self.allocate_response()
        if r.error_code:
            raise BrokerError("AllocateProducerIds", r.error_code)
        return r.producer_id_start, r.producer_id_len
