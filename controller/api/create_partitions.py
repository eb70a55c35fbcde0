"""CreatePartitions (key 37).

Versions served: 0-3. Listeners: client and CONTROLLER.
Behaviour: Kafka's checks (ReplicationControlManager.createPartitions): unknown topic, a count
that is no increase (INVALID_PARTITIONS), assignments that do not match the new partitions or
name unregistered or repeated brokers (INVALID_REPLICA_ASSIGNMENT), a topic named twice
(INVALID_REQUEST); new partitions placed as CreateTopics places them, their PartitionRecords in
one batch; validateOnly writes nothing. With an authorizer, ALTER on the cluster or on each
topic is needed (TOPIC_AUTHORIZATION_FAILED).
Skipped: controller mutation quotas.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.controller.api import topic_auth
from kraftpy.controller.security.acl import AclOperation as Op
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.create_partitions_request import CreatePartitionsRequest
from kraftpy.protocol.messages.create_partitions_response import (
    CreatePartitionsResponse,
    CreatePartitionsTopicResult,
)

API_KEY = 37
VERSIONS = (0, 3)
LISTENERS = (api.BROKER, api.CONTROLLER)
REQUEST = CreatePartitionsRequest


def error_response(request: CreatePartitionsRequest, code: int) -> CreatePartitionsResponse:
    return CreatePartitionsResponse(throttle_time_ms=0, results=[
        CreatePartitionsTopicResult(name=t.name, error_code=code) for t in request.topics])


async def handle(node: api.Node, request: CreatePartitionsRequest, ctx: api.RequestContext
                 ) -> CreatePartitionsResponse:
    denied = {t.name for t in request.topics
              if not topic_auth.on_topic(node, ctx, Op.ALTER, t.name)}
    request.topics = [t for t in request.topics if t.name not in denied]
    response = await api.through_controller(
        node, request, ctx, lambda code: error_response(request, code))
    response.results += [CreatePartitionsTopicResult(
        name=n, error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED) for n in sorted(denied)]
    return response
