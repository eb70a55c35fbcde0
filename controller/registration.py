"""This controller's registration with the active controller (KIP-919), as every Kafka
controller of a quorum makes it.

Why: a Kafka leader finalizes a feature level only once every voter has registered the
ranges it supports ("controller N has not registered"), and brokers and tools read the
quorum's controllers from these records. So each process registers once per incarnation, as
soon as the metadata log it has replayed has a metadata.version that knows registrations
(3.7-IV0 and later), and again whenever the log's record for it is of another incarnation.
The request goes to the leader, whoever it is (to itself when it leads); the answer says it
was committed. Once it is, nothing more is sent until the replayed log's record for this
node changes (Kafka's ControllerRegistrationManager waits for its image the same way): a
node whose replay lags, say while it rebuilds a million partitions from a snapshot, must not
have the leader write its registration again every half second.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import trio
from kraftpy.controller.feature_control import METADATA_VERSION, MV_3_7_IV0
from kraftpy.controller.feature_updates import java_hash_map_order
from kraftpy.protocol.messages.controller_registration_request import (
    ControllerRegistrationRequest,
    Feature,
    Listener,
)

API_VERSION = 0
REGISTRATION_INTERVAL_S = 0.5
REGISTRATION_RETRY_S = 0.1  # while this incarnation is not registered yet

log = logging.getLogger("kraftpy.controller")


def registration_request(node_id: int, incarnation: uuid.UUID,
                         listeners: Iterable[tuple[str, str, int, int]],
                         supported: Mapping[str, tuple[int, int]]
                         ) -> ControllerRegistrationRequest:
    """`listeners` are (name, advertised host, port, security protocol id); `supported` the
    feature ranges this node runs, sent in the order Kafka's controller sends them: its
    supported-feature map is a HashMap created with capacity 1, metadata.version put first."""
    return ControllerRegistrationRequest(
        controller_id=node_id, incarnation_id=incarnation, zk_migration_ready=False,
        listeners=[Listener(name=name, host=host, port=port, security_protocol=protocol)
                   for name, host, port, protocol in listeners],
        features=[Feature(name=name, min_supported_version=supported[name][0],
                          max_supported_version=supported[name][1])
                  for name in java_hash_map_order(
                      [METADATA_VERSION, *(n for n in supported if n != METADATA_VERSION)],
                      capacity=1)])


def needs_registration(controller: Any, node_id: int, incarnation: uuid.UUID) -> bool:
    """Whether the replayed log still lacks this incarnation's registration, and can take it."""
    if controller.features.metadata_version < MV_3_7_IV0:  # 0 until bootstrapped
        return False
    record = controller.cluster.controllers.get(node_id)
    return record is None or record.incarnation_id != incarnation


_NOT_ACKNOWLEDGED = object()


class RegistrationSchedule:
    """Whether to send this incarnation's registration now: while the replayed log lacks it,
    and the leader has not acknowledged one since the log's record for this node last
    changed."""

    def __init__(self, node_id: int, incarnation: uuid.UUID) -> None:
        self.node_id = node_id
        self.incarnation = incarnation
        self._acknowledged_at: Any = _NOT_ACKNOWLEDGED  # the record's incarnation then

    def _seen(self, controller: Any) -> uuid.UUID | None:
        record = controller.cluster.controllers.get(self.node_id)
        return None if record is None else record.incarnation_id

    def due(self, controller: Any) -> bool:
        if not needs_registration(controller, self.node_id, self.incarnation):
            return False
        if self._acknowledged_at is not _NOT_ACKNOWLEDGED:
            if self._seen(controller) == self._acknowledged_at:
                return False  # committed: waiting for this node's replay to reach it
            self._acknowledged_at = _NOT_ACKNOWLEDGED  # the log's record changed since
        return True

    def acknowledged(self, controller: Any) -> None:
        self._acknowledged_at = self._seen(controller)


async def register_controller(quorum: Any) -> None:
    """Register this incarnation with the leader (`RegistrationSchedule`): tried every
    0.1 s until a leader takes it (as Kafka's ControllerRegistrationManager registers once
    it knows the leader), the leader found anew each time, this node itself when it leads."""
    from kraftpy.controller.host import NodeStopped
    from kraftpy.controller.raft.peers import request_once

    schedule = RegistrationSchedule(quorum.node_id, quorum.incarnation)
    runner = quorum.runner
    while not runner.stopping:
        pending = schedule.due(quorum.controller)
        await trio.sleep(REGISTRATION_RETRY_S if pending else REGISTRATION_INTERVAL_S)
        if not schedule.due(quorum.controller):
            continue
        leader = runner.core.leader_id
        request = registration_request(quorum.node_id, quorum.incarnation,
                                       quorum.controller_listeners, quorum.supported_features)
        if leader == quorum.node_id and quorum.running:
            try:
                answer = await quorum.submit(request, API_VERSION)
            except NodeStopped:
                return
        elif leader is not None and leader in runner.peers.addresses:
            answer = await request_once(runner.peers.addresses[leader], request, API_VERSION,
                                        runner.peers.client_id, REGISTRATION_INTERVAL_S * 4)
        else:
            continue
        if answer is not None and answer.error_code == 0:
            schedule.acknowledged(quorum.controller)
            log.info("registered controller incarnation %s with the leader (%d)",
                     quorum.incarnation, leader)
