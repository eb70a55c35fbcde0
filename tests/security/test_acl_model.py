"""Kafka's ACL enums and filter rules (ResourcePatternFilter / AccessControlEntryFilter)."""

from __future__ import annotations

import pytest
from kraftpy.controller.security.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    parse_enum,
)

ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(rt=ResourceType.TOPIC, name="orders", pt=PatternType.LITERAL, principal="User:alice",
        host="*", op=AclOperation.WRITE, perm=ALLOW) -> AclBinding:
    return AclBinding(rt, name, pt, principal, host, op, perm)


def test_wire_codes_are_kafkas() -> None:
    assert (ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID, ResourceType.USER) == (4, 5, 7)
    assert (PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED) == (2, 3, 4)
    assert (AclOperation.CLUSTER_ACTION, AclOperation.IDEMPOTENT_WRITE) == (9, 12)
    assert (AclPermissionType.DENY, AclPermissionType.ALLOW) == (2, 3)


def test_unknown_codes_read_as_unknown() -> None:
    b = AclBinding.of(99, "x", 77, "User:a", "*", 120, 9)
    assert (b.resource_type, b.pattern_type, b.operation, b.permission_type) == (0, 0, 0, 0)


@pytest.mark.parametrize(
    ("binding", "message"),
    [
        (acl(pt=PatternType.MATCH), "Invalid patternType MATCH"),
        (acl(rt=ResourceType.ANY), "Invalid resourceType ANY"),
        (acl(op=AclOperation.ANY), "Invalid operation ANY"),
        (acl(perm=AclPermissionType.ANY), "Invalid permissionType ANY"),
        (acl(name=""), "Resource name should not be empty"),
        (acl(principal="alice"), "Could not parse principal"),
    ],
)
def test_invalid_acls_are_named(binding: AclBinding, message: str) -> None:
    error = binding.validation_error()
    assert error is not None and error.startswith(message)


def test_valid_acl_has_no_error() -> None:
    assert acl().validation_error() is None
    assert acl(rt=ResourceType.CLUSTER, name="kafka-cluster",
               op=AclOperation.CLUSTER_ACTION).validation_error() is None


def test_filter_any_matches_everything() -> None:
    assert AclBindingFilter().matches(acl())
    assert AclBindingFilter().matches(acl(pt=PatternType.PREFIXED, perm=DENY))


def test_filter_exact_fields() -> None:
    f = AclBindingFilter(principal="User:bob")
    assert not f.matches(acl())
    assert AclBindingFilter(host="10.0.0.1").matches(acl(host="10.0.0.1"))
    assert not AclBindingFilter(host="10.0.0.1").matches(acl())
    assert not AclBindingFilter(operation=AclOperation.READ).matches(acl())
    assert not AclBindingFilter(permission_type=DENY).matches(acl())
    assert not AclBindingFilter(resource_type=ResourceType.GROUP).matches(acl())


def test_filter_pattern_type_any_compares_names_exactly() -> None:
    f = AclBindingFilter(resource_name="orders-eu")
    assert not f.matches(acl(pt=PatternType.PREFIXED, name="orders"))
    assert AclBindingFilter(resource_name="orders").matches(acl())


def test_filter_match_finds_every_pattern_that_applies() -> None:
    f = AclBindingFilter(resource_name="orders-eu", pattern_type=PatternType.MATCH)
    assert f.matches(acl(name="orders-eu"))
    assert f.matches(acl(name="*"))
    assert f.matches(acl(pt=PatternType.PREFIXED, name="orders"))
    assert not f.matches(acl(pt=PatternType.PREFIXED, name="payments"))
    assert not f.matches(acl(name="orders"))


def test_filter_with_unknown_parts_is_refused() -> None:
    assert AclBindingFilter(pattern_type=PatternType.UNKNOWN).validation_error()
    assert AclBindingFilter(operation=AclOperation.UNKNOWN).validation_error()
    assert AclBindingFilter().validation_error() is None


def test_parse_enum_accepts_kafka_spellings() -> None:
    assert parse_enum(AclOperation, "ClusterAction") == AclOperation.CLUSTER_ACTION
    assert parse_enum(AclOperation, "cluster-action") == AclOperation.CLUSTER_ACTION
    assert parse_enum(AclOperation, "IDEMPOTENT_WRITE") == AclOperation.IDEMPOTENT_WRITE
    assert parse_enum(ResourceType, "transactional_id") == ResourceType.TRANSACTIONAL_ID
    assert parse_enum(ResourceType, "Topic") == ResourceType.TOPIC
    assert parse_enum(PatternType, "4") == PatternType.PREFIXED
    with pytest.raises(ValueError, match="not a AclOperation"):
        parse_enum(AclOperation, "fly")
