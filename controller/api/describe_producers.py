"""DescribeProducers (key 61).

Versions served: 0. Listeners: client.
Behaviour: answered by the controller; kraftpy leads no partition, so each partition asked
for gets an error code rather than a closed connection.
Skipped: producer state of partitions (there is none here).
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.messages.describe_producers_request import DescribeProducersRequest
from kraftpy.protocol.messages.describe_producers_response import (
    DescribeProducersResponse,
    PartitionResponse,
    TopicResponse,
)

API_KEY = 61
VERSIONS = (0, 0)
LISTENERS = (api.BROKER,)
REQUEST = DescribeProducersRequest


def error_response(request: DescribeProducersRequest, code: int) -> DescribeProducersResponse:
    return DescribeProducersResponse(topics=[
        TopicResponse(name=t.name, partitions=[
            PartitionResponse(partition_index=i, error_code=code) for i in t.partition_indexes
        ])
        for t in request.topics
    ])


async def handle(
    node: api.Node, request: DescribeProducersRequest, ctx: api.RequestContext
) -> DescribeProducersResponse:
    return await api.through_controller(
        node, request, ctx, lambda code: error_response(request, code)
    )
