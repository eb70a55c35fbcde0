"""Metadata (key 3).

Versions served: 0-13. Listeners: client.
Behaviour: lists this node as the one broker, at the advertised address of the listener the
request came in on, and as the controller; the cluster id from meta.properties (v2+). kraftpy
hosts no topics. As Kafka's KafkaApis: before v12 a topic without a name or with a topic id
makes the whole request INVALID_REQUEST (the error response, each topic echoed with the
error, a null name as ""); from v12, when any topic id is given only the ids are answered,
each UNKNOWN_TOPIC_ID with a null name, else each distinct name UNKNOWN_TOPIC_OR_PARTITION;
a null list (all topics, v1+) or an empty v0 list gets none.
Skipped: auto topic creation (AllowAutoTopicCreation is ignored); authorized operations are
left at Kafka's "not computed" value.
"""

from __future__ import annotations

import uuid

from kraftpy.controller import api
from kraftpy.controller.api import errors
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.metadata_request import MetadataRequest
from kraftpy.protocol.messages.metadata_response import (
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponseTopic,
)

API_KEY = 3
VERSIONS = (0, 13)
LISTENERS = (api.BROKER,)
REQUEST = MetadataRequest

UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_TOPIC_ID = 100
_ZERO_UUID = uuid.UUID(int=0)


async def handle(
    node: api.Node, request: MetadataRequest, ctx: api.RequestContext
) -> MetadataResponse:
    cfg = node.config
    version = ctx.api_version
    asked = request.topics or []
    if version < 12 and any(t.name is None or t.topic_id != _ZERO_UUID for t in asked):
        return errors.error_response(API_KEY, request, version, ErrorCode.INVALID_REQUEST)
    ids = list(dict.fromkeys(t.topic_id for t in asked if t.topic_id != _ZERO_UUID))
    if ids:
        topics = [MetadataResponseTopic(error_code=UNKNOWN_TOPIC_ID, name=None, topic_id=i)
                  for i in ids]
    else:
        topics = [MetadataResponseTopic(error_code=UNKNOWN_TOPIC_OR_PARTITION, name=name,
                                        topic_id=_ZERO_UUID)
                  for name in dict.fromkeys(t.name for t in asked)]
    here = cfg.advertised(ctx.listener)
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponseBroker(node_id=cfg.node_id, host=here.host, port=here.port)],
        cluster_id=node.cluster_id,
        controller_id=cfg.node_id,
        topics=topics,
    )
