"""DescribeTransactions (key 65).

Versions served: 0. Listeners: client.
Behaviour: answered by the controller from the transactional ids it coordinates
(__transaction_state); an unknown id gets TRANSACTIONAL_ID_NOT_FOUND.
Skipped: topic partitions of a transaction (kraftpy hosts no partitions).
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.protocol.messages.describe_transactions_request import DescribeTransactionsRequest
from kraftpy.protocol.messages.describe_transactions_response import (
    DescribeTransactionsResponse,
    TransactionState,
)

API_KEY = 65
VERSIONS = (0, 0)
LISTENERS = (api.BROKER,)
REQUEST = DescribeTransactionsRequest


def error_response(request: DescribeTransactionsRequest, code: int
                   ) -> DescribeTransactionsResponse:
    return DescribeTransactionsResponse(transaction_states=[
        TransactionState(error_code=code, transactional_id=t) for t in request.transactional_ids
    ])


async def handle(
    node: api.Node, request: DescribeTransactionsRequest, ctx: api.RequestContext
) -> DescribeTransactionsResponse:
    return await api.through_controller(
        node, request, ctx, lambda code: error_response(request, code)
    )
