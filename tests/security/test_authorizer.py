"""The StandardAuthorizer decision: deny beats allow, implications, wildcards, super users."""

from __future__ import annotations

import uuid

import pytest
from kraftpy.controller.security.acl import (
    CLUSTER_NAME,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kraftpy.controller.security.authorizer import (
    Authorizer,
    AuthorizerConfigError,
    AuthorizerSettings,
)

Op, RT, PT = AclOperation, ResourceType, PatternType
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
ON = AuthorizerSettings(enabled=True, super_users=frozenset({"User:admin"}))


def make(acls: list[AclBinding], settings: AuthorizerSettings = ON) -> Authorizer:
    table = {uuid.uuid4(): a for a in acls}
    return Authorizer(settings, lambda: table)


def cluster(principal: str, op: AclOperation, perm=ALLOW, host="*") -> AclBinding:
    return AclBinding(RT.CLUSTER, CLUSTER_NAME, PT.LITERAL, principal, host, op, perm)


def txn(principal: str, name: str, op=Op.WRITE, perm=ALLOW, pt=PT.LITERAL) -> AclBinding:
    return AclBinding(RT.TRANSACTIONAL_ID, name, pt, principal, "*", op, perm)


def test_disabled_allows_everything() -> None:
    az = make([], AuthorizerSettings(enabled=False))
    assert az.authorize("User:x", "1.2.3.4", Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_NAME)


def test_enabled_denies_without_acl() -> None:
    az = make([])
    assert not az.authorize("User:x", "1.2.3.4", Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_NAME)


def test_allow_everyone_if_no_acl_found() -> None:
    settings = AuthorizerSettings(enabled=True, allow_everyone_if_no_acl_found=True)
    az = make([txn("User:bob", "t1")], settings)
    assert az.authorize("User:x", "h", Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_NAME)
    # t1 has an ACL (for bob), so the fallback no longer applies to it
    assert not az.authorize("User:x", "h", Op.WRITE, RT.TRANSACTIONAL_ID, "t1")


def test_super_user_passes_even_a_deny() -> None:
    az = make([cluster("User:admin", Op.ALL, DENY)])
    assert az.authorize("User:admin", "h", Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_NAME)


def test_deny_beats_allow() -> None:
    az = make([cluster("User:b", Op.CLUSTER_ACTION), cluster("User:b", Op.CLUSTER_ACTION, DENY)])
    assert not az.authorize("User:b", "h", Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_NAME)


def test_wildcard_principal_deny_beats_specific_allow() -> None:
    az = make([cluster("User:b", Op.ALL), cluster("User:*", Op.CLUSTER_ACTION, DENY)])
    assert not az.authorize("User:b", "h", Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_NAME)
    assert az.authorize("User:b", "h", Op.DESCRIBE, RT.CLUSTER, CLUSTER_NAME)


def test_host_must_match() -> None:
    az = make([cluster("User:b", Op.CLUSTER_ACTION, host="10.0.0.1")])
    assert az.authorize("User:b", "10.0.0.1", Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_NAME)
    assert not az.authorize("User:b", "10.0.0.2", Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_NAME)


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE])
def test_allow_implies_describe(granted: AclOperation) -> None:
    az = make([txn("User:p", "t", granted)])
    assert az.authorize("User:p", "h", Op.DESCRIBE, RT.TRANSACTIONAL_ID, "t")


def test_describe_does_not_imply_write_and_cluster_action_implies_nothing() -> None:
    az = make([txn("User:p", "t", Op.DESCRIBE), cluster("User:p", Op.CLUSTER_ACTION)])
    assert not az.authorize("User:p", "h", Op.WRITE, RT.TRANSACTIONAL_ID, "t")
    assert not az.authorize("User:p", "h", Op.IDEMPOTENT_WRITE, RT.CLUSTER, CLUSTER_NAME)
    assert not az.authorize("User:p", "h", Op.DESCRIBE, RT.CLUSTER, CLUSTER_NAME)


def test_deny_write_does_not_deny_describe() -> None:
    az = make([txn("User:p", "t", Op.ALL), txn("User:p", "t", Op.WRITE, DENY)])
    assert az.authorize("User:p", "h", Op.DESCRIBE, RT.TRANSACTIONAL_ID, "t")
    assert not az.authorize("User:p", "h", Op.WRITE, RT.TRANSACTIONAL_ID, "t")


def test_alter_configs_implies_describe_configs() -> None:
    az = make([cluster("User:p", Op.ALTER_CONFIGS)])
    assert az.authorize("User:p", "h", Op.DESCRIBE_CONFIGS, RT.CLUSTER, CLUSTER_NAME)


def test_prefixed_and_wildcard_resources() -> None:
    az = make([txn("User:p", "app-", pt=PT.PREFIXED), txn("User:q", "*")])
    assert az.authorize("User:p", "h", Op.WRITE, RT.TRANSACTIONAL_ID, "app-1")
    assert not az.authorize("User:p", "h", Op.WRITE, RT.TRANSACTIONAL_ID, "other")
    assert az.authorize("User:q", "h", Op.WRITE, RT.TRANSACTIONAL_ID, "anything")


def test_prefixed_deny_beats_literal_allow() -> None:
    az = make([txn("User:p", "app-1"), txn("User:p", "app-", Op.WRITE, DENY, PT.PREFIXED)])
    assert not az.authorize("User:p", "h", Op.WRITE, RT.TRANSACTIONAL_ID, "app-1")


def test_authorize_by_resource_type() -> None:
    topic = lambda name, perm=ALLOW, pt=PT.LITERAL: AclBinding(  # noqa: E731
        RT.TOPIC, name, pt, "User:p", "*", Op.WRITE, perm)
    by_type = lambda acls: make(acls).authorize_by_resource_type(  # noqa: E731
        "User:p", "h", Op.WRITE, RT.TOPIC)
    assert by_type([topic("orders")])
    assert not by_type([])
    assert not by_type([topic("orders"), topic("orders", DENY)])
    assert not by_type([topic("orders"), topic("ord", DENY, PT.PREFIXED)])
    assert not by_type([topic("orders"), topic("*", DENY)])
    assert by_type([topic("orders"), topic("payments", DENY)])
    assert by_type([topic("ord", pt=PT.PREFIXED), topic("orders", DENY)])


def test_index_follows_generation() -> None:
    table: dict[uuid.UUID, AclBinding] = {}
    gen = [0]
    az = Authorizer(ON, lambda: table, lambda: gen[0])
    assert not az.authorize("User:p", "h", Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_NAME)
    table[uuid.uuid4()] = cluster("User:p", Op.CLUSTER_ACTION)
    gen[0] += 1
    assert az.authorize("User:p", "h", Op.CLUSTER_ACTION, RT.CLUSTER, CLUSTER_NAME)


def test_settings_from_kafka_properties() -> None:
    s = AuthorizerSettings.from_properties({
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:admin; User:CN=broker,O=Acme",
        "allow.everyone.if.no.acl.found": "true",
    })
    assert s.enabled and s.allow_everyone_if_no_acl_found
    assert s.super_users == {"User:admin", "User:CN=broker,O=Acme"}
    assert not AuthorizerSettings.from_properties({}).enabled
    with pytest.raises(AuthorizerConfigError, match="authorizer.class.name"):
        AuthorizerSettings.from_properties({"authorizer.class.name": "kafka.security.AclAuthorizer"})
    with pytest.raises(AuthorizerConfigError, match="super.users"):
        AuthorizerSettings.from_properties({"super.users": "admin"})
