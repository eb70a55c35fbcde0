"""ControllerRegistration (KIP-919): what the active controller writes for a quorum
controller's registration, what it refuses, and when a kraftpy voter registers itself."""

from __future__ import annotations

import uuid

from kraftpy.controller.feature_control import SUPPORTED_FEATURES
from kraftpy.controller.registration import (
    RegistrationSchedule,
    needs_registration,
    registration_request,
)
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.controller_registration_request import Listener
from kraftpy.protocol.records.register_controller_record import RegisterControllerRecord
from support.controller_harness import Harness, settings

INCARNATION = uuid.UUID("4f0a8e1c-0000-4000-8000-000000000001")
LISTENERS = (("CONTROLLER", "10.0.0.2", 9093, 0),)


def test_the_leader_writes_the_registration_a_controller_sends() -> None:
    h = Harness()
    request = registration_request(2, INCARNATION, LISTENERS, SUPPORTED_FEATURES)
    result = h.result(request, 0)
    assert result.response.error_code == ErrorCode.NONE
    [(record, version)] = result.records
    assert isinstance(record, RegisterControllerRecord) and version == 0
    assert (record.controller_id, record.incarnation_id, record.zk_migration_ready) == (
        2, INCARNATION, False)
    assert [(e.name, e.host, e.port, e.security_protocol) for e in record.end_points] == [
        ("CONTROLLER", "10.0.0.2", 9093, 0)]
    assert {f.name: (f.min_supported_version, f.max_supported_version)
            for f in record.features} == dict(SUPPORTED_FEATURES)
    # replayed: the image has it, and a restart from the log keeps it
    assert h.qc.cluster.controllers[2].incarnation_id == INCARNATION
    assert h.restart().cluster.controllers[2].incarnation_id == INCARNATION


def test_registrations_are_refused_as_kafka_refuses_them() -> None:
    old = Harness(settings(metadata_version=14))  # 3.6-IV2: before controller registrations
    answer = old.handle(registration_request(2, INCARNATION, LISTENERS, SUPPORTED_FEATURES), 0)
    assert answer.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert 2 not in old.qc.cluster.controllers

    h = Harness()
    bad = registration_request(2, INCARNATION, LISTENERS, SUPPORTED_FEATURES)
    bad.listeners = [Listener(name="CONTROLLER", host="h", port=1, security_protocol=9)]
    result = h.result(bad, 0)
    assert result.response.error_code == ErrorCode.UNKNOWN_SERVER_ERROR and not result.records


def test_a_voter_registers_once_per_incarnation_after_the_bootstrap() -> None:
    h = Harness()
    assert needs_registration(h.qc, 1, INCARNATION)
    h.handle(registration_request(1, INCARNATION, LISTENERS, SUPPORTED_FEATURES), 0)
    assert not needs_registration(h.qc, 1, INCARNATION)
    assert needs_registration(h.qc, 1, uuid.uuid4())  # a restart is a new incarnation
    assert not needs_registration(Harness(settings(metadata_version=14)).qc, 1, INCARNATION)


def test_an_acknowledged_registration_is_not_sent_again_until_the_log_changes() -> None:
    """A node whose replay lags the commit (a large rebuild) waits for its log as Kafka's
    ControllerRegistrationManager waits for its image: the leader writes one record, not one
    every retry; a record of another incarnation arriving later makes it send again."""
    leader = Harness()
    lagging = Harness()  # this node's own replayed state, not yet at the leader's commit
    schedule = RegistrationSchedule(1, INCARNATION)
    assert schedule.due(lagging.qc)
    request = registration_request(1, INCARNATION, LISTENERS, SUPPORTED_FEATURES)
    assert leader.handle(request, 0).error_code == ErrorCode.NONE
    schedule.acknowledged(lagging.qc)
    assert not schedule.due(lagging.qc) and not schedule.due(lagging.qc)
    other = uuid.uuid4()  # an older incarnation's record, replayed after the acknowledgement
    lagging.handle(registration_request(1, other, LISTENERS, SUPPORTED_FEATURES), 0)
    assert schedule.due(lagging.qc)
    lagging.handle(request, 0)  # its own record reaches its log
    assert not schedule.due(lagging.qc)
    assert RegistrationSchedule(1, uuid.uuid4()).due(lagging.qc)  # the next incarnation


def test_features_go_in_the_order_a_kafka_controller_sends_them() -> None:
    request = registration_request(3, INCARNATION, LISTENERS, SUPPORTED_FEATURES)
    # as Kafka 4.1's ControllerRegistrationManager sent them in a recorded session
    assert [f.name for f in request.features] == [
        "group.version", "transaction.version", "eligible.leader.replicas.version",
        "kraft.version", "metadata.version", "share.version"]
