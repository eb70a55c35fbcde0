"""Kafka's StandardAuthorizer decision, over the ACLs the controller replayed from its log.

Order of a decision, as Kafka makes it: super users pass; ACLs that apply to the resource
(the literal name, the literal wildcard `*`, and every prefix of the name) and to the caller
(the principal or `User:*`, the host or `*`) are collected; any DENY wins; else any ALLOW
(an ALLOW of READ/WRITE/DELETE/ALTER also grants DESCRIBE, ALTER_CONFIGS grants
DESCRIBE_CONFIGS, ALL grants everything); else, with no ACL on the resource at all,
`allow.everyone.if.no.acl.found` decides.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kraftpy.controller.properties import default
from kraftpy.controller.security.acl import (
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


class AuthorizerConfigError(ValueError):
    """A security setting that cannot run; the message names the key."""


@dataclass(frozen=True)
class AuthorizerSettings:
    enabled: bool = False
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> AuthorizerSettings:
        """`authorizer.class.name` (empty = off), `super.users` (`;`-separated principals),
        `allow.everyone.if.no.acl.found`, with Kafka's names and defaults."""
        name = props.get("authorizer.class.name", default("authorizer.class.name")).strip()
        if name and name.rsplit(".", 1)[-1] != "StandardAuthorizer":
            raise AuthorizerConfigError(
                f"authorizer.class.name: {name!r}; kraftpy provides {STANDARD_AUTHORIZER}"
            )
        supers = frozenset(p.strip() for p in props.get("super.users", default("super.users"))
                           .split(";") if p.strip())
        for p in supers:
            if ":" not in p:
                raise AuthorizerConfigError(
                    f"super.users: {p!r} is not a principal of the form Type:name"
                )
        allow = props.get("allow.everyone.if.no.acl.found",
                          default("allow.everyone.if.no.acl.found")).strip().lower()
        if allow not in ("true", "false"):
            raise AuthorizerConfigError(f"allow.everyone.if.no.acl.found: {allow!r} is not a bool")
        return cls(enabled=bool(name), super_users=supers,
                   allow_everyone_if_no_acl_found=allow == "true")


def _grants(acl: AclBinding, operation: AclOperation) -> bool:
    """Whether this ACL's operation covers the requested one (for its permission type)."""
    if acl.operation in (operation, AclOperation.ALL):
        return True
    if acl.permission_type != AclPermissionType.ALLOW:
        return False
    if operation == AclOperation.DESCRIBE:
        return acl.operation in IMPLIES_DESCRIBE
    if operation == AclOperation.DESCRIBE_CONFIGS:
        return acl.operation in IMPLIES_DESCRIBE_CONFIGS
    return False


def _applies_to(acl: AclBinding, name: str) -> bool:
    if acl.pattern_type == PatternType.LITERAL:
        return acl.resource_name in (name, WILDCARD_RESOURCE)
    return acl.pattern_type == PatternType.PREFIXED and name.startswith(acl.resource_name)


class Authorizer:
    """Answers "may this principal from this host do this to that?" from live ACLs.

    `source` returns the ACLs by id (AclControlManager.acls); `generation` (optional) moves
    whenever they change, so the per-resource-type index is rebuilt only then.
    """

    def __init__(self, settings: AuthorizerSettings,
                 source: Callable[[], Mapping[uuid.UUID, AclBinding]] | None = None,
                 generation: Callable[[], int] | None = None) -> None:
        self.settings = settings
        self._source = source or (lambda: {})
        self._generation = generation
        self._index_key: object = None
        self._index: dict[ResourceType, list[AclBinding]] = {}

    @property
    def enabled(self) -> bool:
        return self.settings.enabled

    def _by_type(self, resource_type: ResourceType) -> list[AclBinding]:
        key = self._generation() if self._generation is not None else object()
        if key != self._index_key or self._generation is None:
            index: dict[ResourceType, list[AclBinding]] = {}
            for acl in self._source().values():
                index.setdefault(acl.resource_type, []).append(acl)
            self._index, self._index_key = index, key
        return self._index.get(resource_type, [])

    def _is_super(self, principal: str) -> bool:
        return principal in self.settings.super_users

    @staticmethod
    def _for_caller(acls: Iterable[AclBinding], principal: str, host: str) -> list[AclBinding]:
        return [a for a in acls
                if a.principal in (principal, WILDCARD_PRINCIPAL) and a.host in (host, WILDCARD_HOST)]

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, resource_name: str) -> bool:
        if not self.enabled or self._is_super(principal):
            return True
        on_resource = [a for a in self._by_type(resource_type) if _applies_to(a, resource_name)]
        if not on_resource:
            return self.settings.allow_everyone_if_no_acl_found
        mine = [a for a in self._for_caller(on_resource, principal, host) if _grants(a, operation)]
        if any(a.permission_type == AclPermissionType.DENY for a in mine):
            return False
        return any(a.permission_type == AclPermissionType.ALLOW for a in mine)

    def authorize_by_resource_type(self, principal: str, host: str, operation: AclOperation,
                                   resource_type: ResourceType) -> bool:
        """May the caller do `operation` on at least one resource of this type (Kafka's
        Authorizer.authorizeByResourceType: a wildcard DENY refuses all; an ALLOW counts
        unless a DENY on the same name or on a prefix of it dominates it)."""
        if not self.enabled or self._is_super(principal):
            return True
        mine = [a for a in self._for_caller(self._by_type(resource_type), principal, host)
                if a.operation in (operation, AclOperation.ALL)]
        deny_literal = {a.resource_name for a in mine
                        if a.permission_type == AclPermissionType.DENY
                        and a.pattern_type == PatternType.LITERAL}
        deny_prefix = [a.resource_name for a in mine
                       if a.permission_type == AclPermissionType.DENY
                       and a.pattern_type == PatternType.PREFIXED]
        if WILDCARD_RESOURCE in deny_literal:
            return False
        for a in mine:
            if a.permission_type != AclPermissionType.ALLOW:
                continue
            if any(a.resource_name.startswith(p) for p in deny_prefix):
                continue
            if a.pattern_type == PatternType.LITERAL and a.resource_name in deny_literal:
                continue
            return True
        return False
