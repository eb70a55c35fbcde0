"""DescribeAcls (key 29).

Versions served: 1-3. Listeners: client and CONTROLLER.
Behaviour: DESCRIBE on CLUSTER is required (security layer). The ACLs the filter selects,
grouped by resource pattern in the order they were created, as the controller has replayed
them. A filter with an UNKNOWN part gets INVALID_REQUEST. Without an authorizer:
SECURITY_DISABLED.
Skipped: nothing.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.controller.api.create_acls import authorizer_enabled
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.describe_acls_request import DescribeAclsRequest
from kraftpy.protocol.messages.describe_acls_response import DescribeAclsResponse

API_KEY = 29
VERSIONS = (1, 3)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = DescribeAclsRequest


# Kafka's AclApis words DescribeAcls' answer apart from Create/DeleteAcls' "No Authorizer is
# configured.", on every listener.
NO_AUTHORIZER = "No Authorizer is configured on the broker"


def error_response(code: int, message: str | None = None) -> DescribeAclsResponse:
    return DescribeAclsResponse(error_code=code, error_message=message, resources=[])


async def handle(
    node: api.Node, request: DescribeAclsRequest, ctx: api.RequestContext
) -> DescribeAclsResponse:
    if not authorizer_enabled(node):
        return error_response(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    return await api.through_controller(node, request, ctx, error_response)
