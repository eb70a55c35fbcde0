"""AlterConfigs (key 33), the legacy whole-resource form.

Versions served: 0-2. Listeners: client and CONTROLLER.
Behaviour: each resource's given configs replace all its dynamic configs (keys left out are
deleted), validated as Kafka's controller validates them (controller/config_commands.py);
ConfigRecords for every resource that passes go in one batch; validateOnly writes nothing.
Unknown resource types answer UNSUPPORTED_VERSION, a resource named twice INVALID_REQUEST.
With an authorizer, ALTER_CONFIGS on the topic (or the cluster, for brokers) is needed.
Skipped: alter config policies (none are configurable here).
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.controller.api.describe_configs import may_see
from kraftpy.controller.config_schema import TOPIC
from kraftpy.controller.security.acl import AclOperation as Op
from kraftpy.controller.security.checks import MESSAGES
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.alter_configs_request import AlterConfigsRequest
from kraftpy.protocol.messages.alter_configs_response import (
    AlterConfigsResourceResponse,
    AlterConfigsResponse,
)

API_KEY = 33
VERSIONS = (0, 2)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = AlterConfigsRequest


def error_response(request: AlterConfigsRequest, code: int) -> AlterConfigsResponse:
    return AlterConfigsResponse(throttle_time_ms=0, responses=[
        AlterConfigsResourceResponse(error_code=code, resource_type=r.resource_type,
                                     resource_name=r.resource_name)
        for r in request.resources])


def denied_answers(node: api.Node, request: object, ctx: api.RequestContext,
                   answer: type) -> list[object]:
    """Take the resources the caller may not alter out of `request`; their answers."""
    resources = request.resources  # type: ignore[attr-defined]
    denied = [r for r in resources
              if not may_see(node, ctx, r.resource_type, r.resource_name, Op.ALTER_CONFIGS)]
    request.resources = [r for r in resources if r not in denied]  # type: ignore[attr-defined]
    out = []
    for r in denied:
        code = ErrorCode.TOPIC_AUTHORIZATION_FAILED if r.resource_type == TOPIC \
            else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        out.append(answer(error_code=code, error_message=MESSAGES[code],
                          resource_type=r.resource_type, resource_name=r.resource_name))
    return out


async def handle(node: api.Node, request: AlterConfigsRequest, ctx: api.RequestContext
                 ) -> AlterConfigsResponse:
    denied = denied_answers(node, request, ctx, AlterConfigsResourceResponse)
    response = await api.through_controller(
        node, request, ctx, lambda code: error_response(request, code))
    response.responses += denied
    return response
