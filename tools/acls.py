"""`kraftpy acls`: list, add and remove ACLs on a running server, over the wire protocol.

It speaks DescribeAcls, CreateAcls and DeleteAcls like any Kafka admin client, so the same
ACLs could be managed with Kafka's kafka-acls.sh; the output follows that tool's layout.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

from kraftpy.controller.security.acl import (
    CLUSTER_NAME,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from kraftpy.protocol.messages.create_acls_request import AclCreation, CreateAclsRequest
from kraftpy.protocol.messages.delete_acls_request import DeleteAclsFilter, DeleteAclsRequest
from kraftpy.protocol.messages.describe_acls_request import DescribeAclsRequest
from kraftpy.tools.kafka_connection import KafkaConnection, error_name


def _error_name(code: int) -> str:
    return error_name(code) or f"error {code}"


def _pattern(rt: int, name: str, pt: int) -> str:
    return (f"ResourcePattern(resourceType={ResourceType(rt).name}, name={name}, "
            f"patternType={PatternType(pt).name})")


def _entry(principal: str, host: str, op: int, perm: int) -> str:
    return (f"(principal={principal}, host={host}, operation={AclOperation(op).name}, "
            f"permissionType={AclPermissionType(perm).name})")


def list_acls(conn: KafkaConnection, flt: Mapping[str, Any], out: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    response = conn.request(DescribeAclsRequest(**flt))
    if response.error_code:
        print(f"Error: {_error_name(response.error_code)}: {response.error_message or ''}",
              file=sys.stderr)
        return 1
    for res in response.resources:
        print(f"Current ACLs for resource `{_pattern(res.resource_type, res.resource_name, res.pattern_type)}`: ",
              file=out)
        for acl in res.acls:
            print(f" \t{_entry(acl.principal, acl.host, acl.operation, acl.permission_type)} ",
                  file=out)
        print(file=out)
    return 0


def add_acls(conn: KafkaConnection, creations: Iterable[AclCreation],
             out: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    creations = list(creations)
    response = conn.request(CreateAclsRequest(creations=creations))
    status = 0
    for c, result in zip(creations, response.results, strict=True):
        what = (f"{_entry(c.principal, c.host, c.operation, c.permission_type)} on "
                f"{_pattern(c.resource_type, c.resource_name, c.resource_pattern_type)}")
        if result.error_code:
            status = 1
            print(f"Error adding {what}: {_error_name(result.error_code)}: "
                  f"{result.error_message or ''}", file=sys.stderr)
        else:
            print(f"Added {what}", file=out)
    return status


def remove_acls(conn: KafkaConnection, filters: Iterable[Mapping[str, Any]],
                out: TextIO | None = None) -> int:
    out = sys.stdout if out is None else out
    response = conn.request(DeleteAclsRequest(filters=[DeleteAclsFilter(**f) for f in filters]))
    status = 0
    for result in response.filter_results:
        if result.error_code:
            status = 1
            print(f"Error: {_error_name(result.error_code)}: {result.error_message or ''}",
                  file=sys.stderr)
            continue
        for m in result.matching_acls:
            print(f"Removed {_entry(m.principal, m.host, m.operation, m.permission_type)} on "
                  f"{_pattern(m.resource_type, m.resource_name, m.pattern_type)}", file=out)
    return status


def resource_of(cluster: bool, topic: str | None, group: str | None,
                transactional_id: str | None) -> tuple[ResourceType, str | None]:
    """The one resource named on the command line (ANY when none is)."""
    chosen = [(ResourceType.CLUSTER, CLUSTER_NAME)] if cluster else []
    chosen += [(rt, v) for rt, v in ((ResourceType.TOPIC, topic), (ResourceType.GROUP, group),
                                     (ResourceType.TRANSACTIONAL_ID, transactional_id))
               if v is not None]
    if len(chosen) > 1:
        raise ValueError("name at most one resource (--cluster, --topic, --group, "
                         "--transactional-id)")
    return chosen[0] if chosen else (ResourceType.ANY, None)
