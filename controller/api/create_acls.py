"""CreateAcls (key 30).

Versions served: 1-3 (Kafka 4 removed v0). Listeners: client and CONTROLLER.
Behaviour: ALTER on CLUSTER is required (checked in the security layer). The controller's
AclControlManager writes one AccessControlEntryRecord per new ACL, all in one batch; the answer
is sent once they are fsynced. An invalid ACL gets INVALID_REQUEST with Kafka's message, an
existing one succeeds without a record. Without an authorizer (`authorizer.class.name` unset)
every creation gets SECURITY_DISABLED, as in Kafka.
Skipped: nothing.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.create_acls_request import CreateAclsRequest
from kraftpy.protocol.messages.create_acls_response import AclCreationResult, CreateAclsResponse

API_KEY = 30
VERSIONS = (1, 3)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = CreateAclsRequest
NO_AUTHORIZER = "No Authorizer is configured."


def error_response(request: CreateAclsRequest, code: int, message: str | None = None
                   ) -> CreateAclsResponse:
    return CreateAclsResponse(results=[AclCreationResult(error_code=code, error_message=message)
                                       for _ in request.creations])


def authorizer_enabled(node: api.Node) -> bool:
    security = getattr(node, "security", None)
    return security is not None and security.authorizer.enabled


async def handle(
    node: api.Node, request: CreateAclsRequest, ctx: api.RequestContext
) -> CreateAclsResponse:
    if not authorizer_enabled(node):
        return error_response(request, ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    return await api.through_controller(node, request, ctx,
                                        lambda code: error_response(request, code))
