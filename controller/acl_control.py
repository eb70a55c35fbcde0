"""AclControlManager: ACLs as metadata records (Kafka's AclControlManager).

CreateAcls and DeleteAcls never change state here; they return AccessControlEntryRecord /
RemoveAccessControlEntryRecord records, and only `replay` applies them, so ACLs come back
from the log and from snapshots exactly as they were granted. DescribeAcls reads the state.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

from kraftpy.controller.result import ControllerResult
from kraftpy.controller.security.acl import AclBinding, AclBindingFilter
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.create_acls_response import (
    AclCreationResult,
    CreateAclsResponse,
)
from kraftpy.protocol.messages.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsResponse,
)
from kraftpy.protocol.messages.describe_acls_response import (
    AclDescription,
    DescribeAclsResource,
    DescribeAclsResponse,
)
from kraftpy.protocol.records.access_control_entry_record import AccessControlEntryRecord
from kraftpy.protocol.records.remove_access_control_entry_record import (
    RemoveAccessControlEntryRecord,
)
from kraftpy.protocol.uuid import random_kafka_uuid

ACCESS_CONTROL_ENTRY_RECORD = 18
REMOVE_ACCESS_CONTROL_ENTRY_RECORD = 19


class AclReplayError(ValueError):
    """A record that contradicts the ACLs already replayed: the log is not ours or is damaged."""


def binding_of(record: AccessControlEntryRecord) -> AclBinding:
    return AclBinding.of(record.resource_type, record.resource_name, record.pattern_type,
                         record.principal, record.host, record.operation,
                         record.permission_type)


def record_of(acl_id: uuid.UUID, acl: AclBinding) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        id=acl_id,
        resource_type=int(acl.resource_type),
        resource_name=acl.resource_name,
        pattern_type=int(acl.pattern_type),
        principal=acl.principal,
        host=acl.host,
        operation=int(acl.operation),
        permission_type=int(acl.permission_type),
    )


class AclControlManager:
    """Owns the ACL image; `generation` moves on every change so readers can cache indexes."""

    def __init__(self, new_id: Callable[[], uuid.UUID] = random_kafka_uuid) -> None:
        self._new_id = new_id
        self._by_id: dict[uuid.UUID, AclBinding] = {}
        self._ids: dict[AclBinding, uuid.UUID] = {}
        self.generation = 0

    # --- state --------------------------------------------------------------------------

    def replay(self, record: Any, version: int = 0, offset: int = -1) -> None:
        kind = record.API_KEY
        if kind == ACCESS_CONTROL_ENTRY_RECORD:
            acl = binding_of(record)
            if record.id in self._by_id:
                raise AclReplayError(f"offset {offset}: ACL id {record.id} is already present")
            self._by_id[record.id] = acl
            self._ids[acl] = record.id
        elif kind == REMOVE_ACCESS_CONTROL_ENTRY_RECORD:
            acl = self._by_id.pop(record.id, None)
            if acl is None:
                raise AclReplayError(f"offset {offset}: no ACL with id {record.id} to remove")
            self._ids.pop(acl, None)
        else:
            raise AclReplayError(f"offset {offset}: record type {kind} is not an ACL record")
        self.generation += 1

    def snapshot_records(self) -> list[tuple[Any, int]]:
        return [(record_of(acl_id, acl), 0) for acl_id, acl in self._by_id.items()]

    def acls(self) -> Mapping[uuid.UUID, AclBinding]:
        """The live ACLs by id (read-only view, in the order they were granted)."""
        return MappingProxyType(self._by_id)

    # --- requests -----------------------------------------------------------------------

    def create_acls(self, request: Any, api_version: int) -> ControllerResult:
        records: list[tuple[Any, int]] = []
        results: list[AclCreationResult] = []
        planned: set[AclBinding] = set()
        for c in request.creations:
            acl = AclBinding.of(c.resource_type, c.resource_name, c.resource_pattern_type,
                                c.principal, c.host, c.operation, c.permission_type)
            error = acl.validation_error()
            if error is not None:
                results.append(AclCreationResult(error_code=ErrorCode.INVALID_REQUEST,
                                                 error_message=error))
                continue
            if acl not in self._ids and acl not in planned:
                planned.add(acl)
                records.append((record_of(self._fresh_id(), acl), 0))
            results.append(AclCreationResult(error_code=ErrorCode.NONE, error_message=None))
        return ControllerResult(CreateAclsResponse(throttle_time_ms=0, results=results),
                                records=records)

    def delete_acls(self, request: Any, api_version: int) -> ControllerResult:
        records: list[tuple[Any, int]] = []
        removed: set[uuid.UUID] = set()
        results: list[DeleteAclsFilterResult] = []
        for f in request.filters:
            flt = AclBindingFilter.of(f.resource_type_filter, f.resource_name_filter,
                                      f.pattern_type_filter, f.principal_filter, f.host_filter,
                                      f.operation, f.permission_type)
            error = flt.validation_error()
            if error is not None:
                results.append(DeleteAclsFilterResult(error_code=ErrorCode.INVALID_REQUEST,
                                                      error_message=error, matching_acls=[]))
                continue
            matching: list[DeleteAclsMatchingAcl] = []
            for acl_id, acl in self._by_id.items():
                if acl_id in removed or not flt.matches(acl):
                    continue
                removed.add(acl_id)
                records.append((RemoveAccessControlEntryRecord(id=acl_id), 0))
                matching.append(DeleteAclsMatchingAcl(
                    error_code=ErrorCode.NONE, error_message=None,
                    resource_type=int(acl.resource_type), resource_name=acl.resource_name,
                    pattern_type=int(acl.pattern_type), principal=acl.principal, host=acl.host,
                    operation=int(acl.operation), permission_type=int(acl.permission_type)))
            results.append(DeleteAclsFilterResult(error_code=ErrorCode.NONE, error_message=None,
                                                  matching_acls=matching))
        return ControllerResult(DeleteAclsResponse(throttle_time_ms=0, filter_results=results),
                                records=records)

    def describe_acls(self, request: Any, api_version: int) -> ControllerResult:
        flt = AclBindingFilter.of(request.resource_type_filter, request.resource_name_filter,
                                  request.pattern_type_filter, request.principal_filter,
                                  request.host_filter, request.operation, request.permission_type)
        error = flt.validation_error()
        if error is not None:
            return ControllerResult(DescribeAclsResponse(
                throttle_time_ms=0, error_code=ErrorCode.INVALID_REQUEST, error_message=error,
                resources=[]))
        grouped: dict[tuple[int, str, int], list[AclDescription]] = {}
        for acl in self._by_id.values():
            if flt.matches(acl):
                key = (int(acl.resource_type), acl.resource_name, int(acl.pattern_type))
                grouped.setdefault(key, []).append(AclDescription(
                    principal=acl.principal, host=acl.host, operation=int(acl.operation),
                    permission_type=int(acl.permission_type)))
        resources = [
            DescribeAclsResource(resource_type=rt, resource_name=name, pattern_type=pt, acls=acls)
            for (rt, name, pt), acls in grouped.items()
        ]
        return ControllerResult(DescribeAclsResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None,
            resources=resources))

    def _fresh_id(self) -> uuid.UUID:
        while True:
            acl_id = self._new_id()
            if acl_id not in self._by_id:
                return acl_id
