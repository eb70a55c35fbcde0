"""DescribeConfigs (key 32).

Versions served: 1-4. Listeners: client and CONTROLLER.
Behaviour: as Kafka's ConfigHelper on a controller (controller/config_commands.py): a topic
lists every topic config with its effective value, source and (when asked) synonyms; an
unknown topic UNKNOWN_TOPIC_OR_PARTITION; the cluster default (BROKER "") its dynamic configs;
this node's id every broker config; another broker id INVALID_REQUEST, as Kafka's node
answers for a broker other than itself. With an authorizer, DESCRIBE_CONFIGS on the topic (or
the cluster, for brokers) is needed per resource.
Skipped: documentation strings (always null); BROKER_LOGGER lists no loggers; CLIENT_METRICS
and GROUP resources are refused as unsupported.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.controller.api import topic_auth
from kraftpy.controller.config_schema import TOPIC
from kraftpy.controller.security.acl import AclOperation as Op
from kraftpy.controller.security.checks import MESSAGES
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.describe_configs_request import DescribeConfigsRequest
from kraftpy.protocol.messages.describe_configs_response import (
    DescribeConfigsResponse,
    DescribeConfigsResult,
)

API_KEY = 32
VERSIONS = (1, 4)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = DescribeConfigsRequest


def error_response(request: DescribeConfigsRequest, code: int) -> DescribeConfigsResponse:
    return DescribeConfigsResponse(throttle_time_ms=0, results=[
        DescribeConfigsResult(error_code=code, resource_type=r.resource_type,
                              resource_name=r.resource_name, configs=[])
        for r in request.resources])


def may_see(node: api.Node, ctx: api.RequestContext, kind: int, name: str, op: Op) -> bool:
    if kind == TOPIC:
        return topic_auth.allowed(node, ctx, op, topic_auth.ResourceType.TOPIC, name)
    return topic_auth.on_cluster(node, ctx, op)


async def handle(node: api.Node, request: DescribeConfigsRequest, ctx: api.RequestContext
                 ) -> DescribeConfigsResponse:
    denied = [r for r in request.resources
              if not may_see(node, ctx, r.resource_type, r.resource_name, Op.DESCRIBE_CONFIGS)]
    request.resources = [r for r in request.resources if r not in denied]
    response = await api.through_controller(
        node, request, ctx, lambda code: error_response(request, code))
    for r in denied:
        code = ErrorCode.TOPIC_AUTHORIZATION_FAILED if r.resource_type == TOPIC \
            else ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        response.results.append(DescribeConfigsResult(
            error_code=code, error_message=MESSAGES[code], resource_type=r.resource_type,
            resource_name=r.resource_name, configs=[]))
    return response
