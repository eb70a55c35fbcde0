"""Kafka's ACL vocabulary (org.apache.kafka.common.acl / .resource) and its matching rules.

The integer codes are the ones on the wire and in AccessControlEntryRecord, so they must not
change. Filters follow ResourcePatternFilter / AccessControlEntryFilter exactly, because
DescribeAcls and DeleteAcls answers are compared against a real Kafka's.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# An ALLOW for any of these grants DESCRIBE (resp. DESCRIBE_CONFIGS) too; a DENY never widens.
IMPLIES_DESCRIBE = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
     AclOperation.ALTER}
)
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


def _enum(kind: type[IntEnum], value: int) -> IntEnum:
    try:
        return kind(value)
    except ValueError:
        return kind(0)  # every Kafka ACL enum maps unknown codes to UNKNOWN


def parse_enum(kind: type[IntEnum], text: str) -> IntEnum:
    """`"cluster_action"`, `"ClusterAction"` or `"9"` → the member; ValueError names the choices."""
    key = text.strip().replace("-", "_")
    if key.lstrip("-").isdigit():
        return kind(int(key))
    norm = key.upper() if "_" in key or key.isupper() or key.islower() else _camel_to_upper(key)
    try:
        return kind[norm]
    except KeyError:
        names = ", ".join(m.name for m in kind if m.value > 1)
        raise ValueError(f"{text!r} is not a {kind.__name__} (one of {names})") from None


def _camel_to_upper(text: str) -> str:
    out = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(text))
    return out.upper()


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One stored ACL: a resource pattern and an access control entry (StandardAcl)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType

    @classmethod
    def of(cls, resource_type: int, resource_name: str, pattern_type: int, principal: str,
           host: str, operation: int, permission_type: int) -> AclBinding:
        return cls(
            ResourceType(_enum(ResourceType, resource_type)),
            resource_name,
            PatternType(_enum(PatternType, pattern_type)),
            principal,
            host,
            AclOperation(_enum(AclOperation, operation)),
            AclPermissionType(_enum(AclPermissionType, permission_type)),
        )

    def validation_error(self) -> str | None:
        """Why Kafka's controller would refuse to store this ACL (INVALID_REQUEST), or None."""
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            return f"Invalid patternType {self.pattern_type.name}"
        if self.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
            return f"Invalid resourceType {self.resource_type.name}"
        if self.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
            return f"Invalid operation {self.operation.name}"
        if self.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            return f"Invalid permissionType {self.permission_type.name}"
        if not self.resource_name:
            return "Resource name should not be empty"
        if ":" not in self.principal:
            return (f"Could not parse principal from `{self.principal}` (no colon is present "
                    "separating the principal type from the principal name)")
        return None

    def __str__(self) -> str:
        return (f"(principal={self.principal}, host={self.host}, operation={self.operation.name},"
                f" permissionType={self.permission_type.name}) on {self.resource_type.name}:"
                f"{self.pattern_type.name}:{self.resource_name}")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select with; None fields match anything."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    @classmethod
    def of(cls, resource_type: int, resource_name: str | None, pattern_type: int,
           principal: str | None, host: str | None, operation: int,
           permission_type: int) -> AclBindingFilter:
        return cls(
            ResourceType(_enum(ResourceType, resource_type)),
            resource_name,
            PatternType(_enum(PatternType, pattern_type)),
            principal,
            host,
            AclOperation(_enum(AclOperation, operation)),
            AclPermissionType(_enum(AclPermissionType, permission_type)),
        )

    def validation_error(self) -> str | None:
        """Kafka refuses filters with an UNKNOWN part (INVALID_REQUEST)."""
        if ResourceType.UNKNOWN == self.resource_type or PatternType.UNKNOWN == self.pattern_type:
            return "Unknown patternFilter."
        if AclOperation.UNKNOWN == self.operation or (
            AclPermissionType.UNKNOWN == self.permission_type
        ):
            return "Unknown entryFilter."
        return None

    def matches(self, acl: AclBinding) -> bool:
        return self._matches_pattern(acl) and self._matches_entry(acl)

    def _matches_pattern(self, acl: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and (
            self.pattern_type != acl.pattern_type
        ):
            return False
        if self.resource_name is None:
            return True
        if self.pattern_type in (PatternType.ANY, acl.pattern_type):
            return self.resource_name == acl.resource_name
        # MATCH: every stored pattern that would apply to a resource of this name.
        if acl.pattern_type == PatternType.LITERAL:
            return acl.resource_name in (self.resource_name, WILDCARD_RESOURCE)
        if acl.pattern_type == PatternType.PREFIXED:
            return self.resource_name.startswith(acl.resource_name)
        return False

    def _matches_entry(self, acl: AclBinding) -> bool:
        if self.principal is not None and self.principal != acl.principal:
            return False
        if self.host is not None and self.host != acl.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != acl.operation:
            return False
        return self.permission_type in (AclPermissionType.ANY, acl.permission_type)
