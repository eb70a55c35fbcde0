"""DeleteTopics (key 20).

Versions served: 1-6. Listeners: client and CONTROLLER.
Behaviour: topics by name (and, v6, by id) as Kafka's ControllerApis resolves them: duplicates,
a name and an id together, neither, unknown names (UNKNOWN_TOPIC_OR_PARTITION) and ids
(UNKNOWN_TOPIC_ID) answered; one RemoveTopicRecord per topic, all in one batch (the topic's
configs go with it on replay); answers shuffled, as Kafka's. `delete.topic.enable=false`
answers TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3). With an authorizer, topics named
without DELETE on the cluster or the topic get TOPIC_AUTHORIZATION_FAILED.
Skipped: per-topic DELETE / DESCRIBE checks for topics given by id (the cluster-level DELETE
decides for those); controller mutation quotas.
"""

from __future__ import annotations

import uuid

from kraftpy.controller import api
from kraftpy.controller.api import topic_auth
from kraftpy.controller.security.acl import AclOperation as Op
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.delete_topics_request import DeleteTopicsRequest
from kraftpy.protocol.messages.delete_topics_response import (
    DeletableTopicResult,
    DeleteTopicsResponse,
)

API_KEY = 20
VERSIONS = (1, 6)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = DeleteTopicsRequest
_ZERO = uuid.UUID(int=0)


def error_response(request: DeleteTopicsRequest, version: int, code: int
                   ) -> DeleteTopicsResponse:
    if version >= 6:
        return DeleteTopicsResponse(throttle_time_ms=0, responses=[
            DeletableTopicResult(name=t.name, topic_id=t.topic_id, error_code=code)
            for t in request.topics])
    return DeleteTopicsResponse(throttle_time_ms=0, responses=[
        DeletableTopicResult(name=n, error_code=code) for n in request.topic_names])


async def handle(node: api.Node, request: DeleteTopicsRequest, ctx: api.RequestContext
                 ) -> DeleteTopicsResponse:
    denied: list[DeletableTopicResult] = []
    if not topic_auth.on_cluster(node, ctx, Op.DELETE):
        if ctx.api_version >= 6:
            keep = []
            for t in request.topics:
                if t.name is None or topic_auth.on_topic(node, ctx, Op.DELETE, t.name):
                    keep.append(t)
                else:
                    denied.append(DeletableTopicResult(
                        name=t.name, topic_id=_ZERO,
                        error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED))
            request.topics = keep
        else:
            denied = [DeletableTopicResult(name=n, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                      for n in request.topic_names
                      if not topic_auth.on_topic(node, ctx, Op.DELETE, n)]
            names = {d.name for d in denied}
            request.topic_names = [n for n in request.topic_names if n not in names]
    response = await api.through_controller(
        node, request, ctx, lambda code: error_response(request, ctx.api_version, code))
    response.responses += denied
    return response
