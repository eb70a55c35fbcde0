"""CreateTopics (key 19).

Versions served: 2-7 (Kafka 4.1's range). Listeners: client and CONTROLLER.
Behaviour: Kafka's controller's checks and records (controller/topic_control.py): names,
TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR, manual assignments,
configs validated as Kafka's LogConfig does; partitions placed over the registered brokers
(StripedReplicaPlacer); all records of the request in one batch, answered once fsynced;
validateOnly writes nothing. v5+ answers carry the partition count, replication factor and
every effective config with its source. With an authorizer, CREATE on the cluster or on each
topic is needed (TOPIC_AUTHORIZATION_FAILED, "Authorization failed."), and a topic whose
configs the caller may not describe (DESCRIBE_CONFIGS) is answered without them.
Skipped: create topic policies and controller mutation quotas (none are configurable here).
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.controller.api import topic_auth
from kraftpy.controller.security.acl import AclOperation as Op
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.create_topics_request import CreateTopicsRequest
from kraftpy.protocol.messages.create_topics_response import (
    CreatableTopicResult,
    CreateTopicsResponse,
)

API_KEY = 19
VERSIONS = (2, 7)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = CreateTopicsRequest


def error_response(request: CreateTopicsRequest, code: int, message: str | None = None
                   ) -> CreateTopicsResponse:
    return CreateTopicsResponse(throttle_time_ms=0, topics=[
        CreatableTopicResult(name=t.name, error_code=code, error_message=message)
        for t in request.topics])


async def handle(node: api.Node, request: CreateTopicsRequest, ctx: api.RequestContext
                 ) -> CreateTopicsResponse:
    denied = [t for t in request.topics if not topic_auth.on_topic(node, ctx, Op.CREATE, t.name)]
    if denied:
        names = {t.name for t in denied}
        request.topics = [t for t in request.topics if t.name not in names]
    response = await api.through_controller(
        node, request, ctx, lambda code: error_response(request, code))
    for t in denied:
        response.topics.append(CreatableTopicResult(
            name=t.name, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED,
            error_message="Authorization failed."))
    for result in response.topics:
        if result.error_code == ErrorCode.NONE and not topic_auth.on_topic(
                node, ctx, Op.DESCRIBE_CONFIGS, result.name):
            result.configs, result.num_partitions, result.replication_factor = [], -1, -1
            result.topic_config_error_code = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return response
