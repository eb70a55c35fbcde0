"""This controller's registration with the active controller (KIP-919), as every Kafka
controller of a quorum makes it.

Why: a Kafka leader finalizes a feature level only once every voter has registered the
ranges it supports ("controller N has not registered"), and brokers and tools read the
quorum's controllers from these records. So each process registers once per incarnation, as
soon as the metadata log it has replayed has a metadata.version that knows registrations
(3.7-IV0 and later), and again whenever the log's record for it is of another incarnation.
The request goes to the leader, whoever it is (to itself when it leads); the answer only
says it was committed, the replayed record is what counts.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from kraftpy.controller.feature_control import METADATA_VERSION, MV_3_7_IV0
from kraftpy.controller.feature_updates import java_hash_map_order
from kraftpy.protocol.messages.controller_registration_request import (
    ControllerRegistrationRequest,
    Feature,
    Listener,
)

API_VERSION = 0


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
