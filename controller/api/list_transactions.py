"""ListTransactions (key 66).

Versions served: 0-2. Listeners: client.
Behaviour: answered by the controller with the transactional ids it coordinates, filtered by
state, producer id, duration (v1+) and id pattern (v2+).
Skipped: nothing.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.messages.list_transactions_request import ListTransactionsRequest
from kraftpy.protocol.messages.list_transactions_response import ListTransactionsResponse

API_KEY = 66
VERSIONS = (0, 2)
LISTENERS = (api.BROKER,)
REQUEST = ListTransactionsRequest


def error_response(code: int) -> ListTransactionsResponse:
    return ListTransactionsResponse(error_code=code)


async def handle(
    node: api.Node, request: ListTransactionsRequest, ctx: api.RequestContext
) -> ListTransactionsResponse:
    return await api.through_controller(node, request, ctx, error_response)
