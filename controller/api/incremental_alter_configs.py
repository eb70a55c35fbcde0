"""IncrementalAlterConfigs (key 44).

Versions served: 0-1. Listeners: client and CONTROLLER.
Behaviour: SET, DELETE, APPEND and SUBTRACT (the last two on LIST configs only) per key, each
resource validated whole before anything is written (controller/config_control.py): a topic
config Kafka's LogConfig does not know or whose value does not parse is INVALID_CONFIG with
Kafka's message; a broker name that is no base-10 id INVALID_REQUEST; an unknown topic
UNKNOWN_TOPIC_OR_PARTITION. ConfigRecords (a broker's for every key named, changed or not, so
brokers reload) go in one batch, with a ClearElrRecord after a min.insync.replicas change when
ELR is on; validateOnly writes nothing. With an authorizer, ALTER_CONFIGS on the topic (or the
cluster, for brokers) is needed.
Skipped: BROKER_LOGGER changes (kraftpy's loggers are not Kafka's log4j loggers); alter config
policies.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.controller.api.alter_configs import denied_answers
from kraftpy.protocol.messages.incremental_alter_configs_request import (
    IncrementalAlterConfigsRequest,
)
from kraftpy.protocol.messages.incremental_alter_configs_response import (
    AlterConfigsResourceResponse,
    IncrementalAlterConfigsResponse,
)

API_KEY = 44
VERSIONS = (0, 1)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = IncrementalAlterConfigsRequest


def error_response(request: IncrementalAlterConfigsRequest, code: int
                   ) -> IncrementalAlterConfigsResponse:
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=[
        AlterConfigsResourceResponse(error_code=code, resource_type=r.resource_type,
                                     resource_name=r.resource_name)
        for r in request.resources])


async def handle(node: api.Node, request: IncrementalAlterConfigsRequest,
                 ctx: api.RequestContext) -> IncrementalAlterConfigsResponse:
    denied = denied_answers(node, request, ctx, AlterConfigsResourceResponse)
    response = await api.through_controller(
        node, request, ctx, lambda code: error_response(request, code))
    response.responses += denied
    return response
