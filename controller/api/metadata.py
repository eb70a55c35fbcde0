"""Metadata (key 3).

Versions served: 0-13. Listeners: client.
Behaviour: lists this node as the one broker, at the advertised address of the listener the
request came in on, and as the controller; the cluster id from meta.properties (v2+). kraftpy
hosts no topics: every topic asked for by name gets UNKNOWN_TOPIC_OR_PARTITION, by id
UNKNOWN_TOPIC_ID; a null list (all topics, v1+) or an empty v0 list gets none.
Skipped: auto topic creation (AllowAutoTopicCreation is ignored); authorized operations are
left at Kafka's "not computed" value.
"""

from __future__ import annotations

import uuid

from kraftpy.controller import api
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
    here = cfg.advertised(ctx.listener)
    topics = []
    for topic in request.topics or []:
        if topic.name is None:
            topics.append(MetadataResponseTopic(
                error_code=UNKNOWN_TOPIC_ID, name=None, topic_id=topic.topic_id))
        else:
            topics.append(MetadataResponseTopic(
                error_code=UNKNOWN_TOPIC_OR_PARTITION, name=topic.name, topic_id=_ZERO_UUID))
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=[MetadataResponseBroker(node_id=cfg.node_id, host=here.host, port=here.port)],
        cluster_id=node.cluster_id,
        controller_id=cfg.node_id,
        topics=topics,
    )


