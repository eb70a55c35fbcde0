"""AclControlManager: CreateAcls/DeleteAcls become records, replay is the only change."""

from __future__ import annotations

import itertools
import uuid

import pytest
from kraftpy.controller.acl_control import AclControlManager, AclReplayError
from kraftpy.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from kraftpy.protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from kraftpy.protocol.messages.describe_acls_request import DescribeAclsRequest
from kraftpy.protocol.metadata_frame import decode_metadata_record, encode_metadata_record
from kraftpy.protocol.records.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)

TOPIC, CLUSTER, TXN = 2, 4, 5
LITERAL, PREFIXED, ANY_PATTERN, MATCH = 3, 4, 1, 2
WRITE, CLUSTER_ACTION, ANY_OP, ALL = 4, 9, 1, 2
DENY, ALLOW, ANY_PERM = 2, 3, 1


def creation(rt=CLUSTER, name="kafka-cluster", pt=LITERAL, principal="User:broker", host="*",
             op=CLUSTER_ACTION, perm=ALLOW) -> AclCreation:
    return AclCreation(resource_type=rt, resource_name=name, resource_pattern_type=pt,
                       principal=principal, host=host, operation=op, permission_type=perm)


# Nullable filter strings default to "" in the codecs (as in Kafka); None means "any".
ANY_NAME = {"resource_name_filter": None, "principal_filter": None, "host_filter": None}


def new_manager() -> AclControlManager:
    counter = itertools.count(1)
    return AclControlManager(new_id=lambda: uuid.UUID(int=next(counter)))


def apply(mgr: AclControlManager, result) -> None:
    """Replay through the real metadata frame, as the log would."""
    for offset, (record, version) in enumerate(result.records):
        decoded, v = decode_metadata_record(encode_metadata_record(record, version))
        mgr.replay(decoded, v, offset)


def test_create_writes_records_and_changes_nothing_until_replay() -> None:
    mgr = new_manager()
    result = mgr.create_acls(CreateAclsRequest(creations=[creation(), creation(op=WRITE, rt=TXN,
                                                                              name="t")]), 3)
    assert [r.error_code for r in result.response.results] == [0, 0]
    assert [type(r).__name__ for r, _ in result.records] == ["AccessControlEntryRecord"] * 2
    assert mgr.acls() == {} and not result.respond_before_commit
    apply(mgr, result)
    assert len(mgr.acls()) == 2 and mgr.generation == 2


def test_duplicates_succeed_without_new_records() -> None:
    mgr = new_manager()
    first = mgr.create_acls(CreateAclsRequest(creations=[creation(), creation()]), 3)
    assert len(first.records) == 1 and [r.error_code for r in first.response.results] == [0, 0]
    apply(mgr, first)
    again = mgr.create_acls(CreateAclsRequest(creations=[creation()]), 3)
    assert again.records == [] and again.response.results[0].error_code == 0


@pytest.mark.parametrize(("bad", "message"), [
    (creation(pt=MATCH), "Invalid patternType MATCH"),
    (creation(rt=1), "Invalid resourceType ANY"),
    (creation(op=ANY_OP), "Invalid operation ANY"),
    (creation(perm=ANY_PERM), "Invalid permissionType ANY"),
    (creation(name=""), "Resource name should not be empty"),
    (creation(principal="broker"), "Could not parse principal"),
])
def test_invalid_creations_get_invalid_request_and_no_record(bad, message) -> None:
    result = new_manager().create_acls(CreateAclsRequest(creations=[bad, creation()]), 3)
    codes = [r.error_code for r in result.response.results]
    assert codes == [42, 0] and result.response.results[0].error_message.startswith(message)
    assert len(result.records) == 1


def test_describe_groups_by_resource_and_filters() -> None:
    mgr = new_manager()
    apply(mgr, mgr.create_acls(CreateAclsRequest(creations=[
        creation(), creation(principal="User:other"),
        creation(rt=TXN, name="app-", pt=PREFIXED, op=WRITE, principal="User:app"),
    ]), 3))
    everything = DescribeAclsRequest(resource_type_filter=1, pattern_type_filter=ANY_PATTERN,
                                     operation=ANY_OP, permission_type=ANY_PERM, **ANY_NAME)
    r = mgr.describe_acls(everything, 3).response
    assert r.error_code == 0
    assert [(x.resource_type, x.resource_name, x.pattern_type, len(x.acls)) for x in r.resources] \
        == [(CLUSTER, "kafka-cluster", LITERAL, 2), (TXN, "app-", PREFIXED, 1)]
    match = DescribeAclsRequest(**{**ANY_NAME, "resource_name_filter": "app-1"},
                                resource_type_filter=TXN, pattern_type_filter=MATCH,
                                operation=ANY_OP, permission_type=ANY_PERM)
    r = mgr.describe_acls(match, 3).response
    assert [(x.resource_name, x.acls[0].principal) for x in r.resources] == [("app-", "User:app")]
    bad = DescribeAclsRequest(resource_type_filter=0, operation=ANY_OP, permission_type=ANY_PERM)
    assert mgr.describe_acls(bad, 3).response.error_code == 42


def test_delete_by_filter_removes_each_acl_once() -> None:
    mgr = new_manager()
    apply(mgr, mgr.create_acls(CreateAclsRequest(creations=[
        creation(), creation(principal="User:other"), creation(rt=TXN, name="t", op=WRITE)]), 3))
    by_broker = DeleteAclsFilter(**{**ANY_NAME, "principal_filter": "User:broker"},
                                 resource_type_filter=1, pattern_type_filter=ANY_PATTERN,
                                 operation=ANY_OP, permission_type=ANY_PERM)
    on_cluster = DeleteAclsFilter(resource_type_filter=CLUSTER, pattern_type_filter=ANY_PATTERN,
                                  operation=ANY_OP, permission_type=ANY_PERM, **ANY_NAME)
    result = mgr.delete_acls(DeleteAclsRequest(filters=[by_broker, on_cluster]), 3)
    first, second = result.response.filter_results
    assert {(m.resource_type, m.principal) for m in first.matching_acls} == {
        (CLUSTER, "User:broker"), (TXN, "User:broker")}
    assert [(m.resource_type, m.principal) for m in second.matching_acls] == [
        (CLUSTER, "User:other")]
    assert len(result.records) == 3
    assert all(isinstance(r, RemoveAccessControlEntryRecord) for r, _ in result.records)
    apply(mgr, result)
    assert mgr.acls() == {}


def test_snapshot_rebuilds_the_same_acls() -> None:
    mgr = new_manager()
    apply(mgr, mgr.create_acls(CreateAclsRequest(creations=[
        creation(), creation(rt=TXN, name="t", op=WRITE, perm=DENY)]), 3))
    copy = AclControlManager()
    for offset, (record, version) in enumerate(mgr.snapshot_records()):
        copy.replay(record, version, offset)
    assert dict(copy.acls()) == dict(mgr.acls())


def test_replay_refuses_contradictions() -> None:
    mgr = new_manager()
    result = mgr.create_acls(CreateAclsRequest(creations=[creation()]), 3)
    apply(mgr, result)
    with pytest.raises(AclReplayError, match="already present"):
        mgr.replay(result.records[0][0], 0, 7)
    with pytest.raises(AclReplayError, match="no ACL with id"):
        mgr.replay(RemoveAccessControlEntryRecord(id=uuid.UUID(int=999)), 0, 8)
