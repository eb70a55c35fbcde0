"""DeleteAcls (key 31).

Versions served: 1-3. Listeners: client and CONTROLLER.
Behaviour: ALTER on CLUSTER is required (security layer). Each filter selects stored ACLs as
Kafka's AclBindingFilter does; every ACL selected (once, even if several filters select it)
gets a RemoveAccessControlEntryRecord, all in one batch, answered after fsync with the ACLs
each filter matched. A filter with an UNKNOWN part gets INVALID_REQUEST. Without an authorizer:
SECURITY_DISABLED.
Skipped: nothing.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.controller.api.create_acls import NO_AUTHORIZER, authorizer_enabled
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.delete_acls_request import DeleteAclsRequest
from kraftpy.protocol.messages.delete_acls_response import (
    DeleteAclsFilterResult,
    DeleteAclsResponse,
)

API_KEY = 31
VERSIONS = (1, 3)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = DeleteAclsRequest


def error_response(request: DeleteAclsRequest, code: int, message: str | None = None
                   ) -> DeleteAclsResponse:
    return DeleteAclsResponse(filter_results=[
        DeleteAclsFilterResult(error_code=code, error_message=message, matching_acls=[])
        for _ in request.filters
    ])


async def handle(
    node: api.Node, request: DeleteAclsRequest, ctx: api.RequestContext
) -> DeleteAclsResponse:
    if not authorizer_enabled(node):
        return error_response(request, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    return await api.through_controller(node, request, ctx,
                                        lambda code: error_response(request, code))
