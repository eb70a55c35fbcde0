"""InitProducerId (key 22).

Versions served: 0-5. Listeners: client.
Behaviour: decided by the controller (KIP-98/360 decision table, id blocks prefetched so no
request waits on a disk write; COORDINATOR_LOAD_IN_PROGRESS while no id is ready). The answer
to a transactional id is sent only after its __transaction_state record is fsynced. Before v4
PRODUCER_FENCED does not exist: it is sent as INVALID_PRODUCER_EPOCH, as Kafka does.
Skipped: v6 (KIP-939 two-phase commit); Kafka 4.1 does not serve it either.

Idempotent requests (no transactional id), most of a busy client listener's traffic, have a
byte-level answer as well (`quick_answer`, for `quick.py`): the same bytes as this handler's,
packed in one go around the controller's id.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from functools import cache

from kraftpy.controller import api
from kraftpy.controller.quorum_controller import QuorumController
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.framing import frame_response
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.messages.init_producer_id_response import InitProducerIdResponse
from kraftpy.protocol.registry import response_header_version

API_KEY = 22
VERSIONS = (0, 5)
LISTENERS = (api.BROKER,)
REQUEST = InitProducerIdRequest


# The quick answer's pieces (controller/api/quick.py): the frame size, pack(size, correlation
# id bytes, id) -> the framed answer; and the size prefix and the bytes after the correlation
# id of the COORDINATOR_LOAD_IN_PROGRESS answer (no id ready).
QuickAnswer = tuple[int, Callable[[int, bytes, int], bytes], bytes, bytes]


def quick_answer(request: InitProducerIdRequest, api_version: int) -> QuickAnswer | None:
    """How to answer `request` from `Node.take_idempotent_ids` alone, or None when it is not an
    idempotent request (the controller's rule) or the version has no such answer."""
    if not QuorumController.idempotent(request, api_version):
        return None
    return _quick_pieces(api_version)


@cache
def _quick_pieces(api_version: int) -> QuickAnswer | None:
    """The answer's layout, found in and checked against `frame_response`'s bytes: every field
    but the id is a constant (throttle 0, error 0, epoch 0, empty tag sections)."""
    flexible = response_header_version(API_KEY, api_version) == 1

    def full(response: InitProducerIdResponse) -> bytes:
        return frame_response(0, flexible, response, api_version)

    marker = 0x0102030405060708
    marked = full(InitProducerIdResponse(producer_id=marker, producer_epoch=0))
    at = marked.find(marker.to_bytes(8, "big"))
    if at < 8:
        return None
    pack = struct.Struct(f">i4s{at - 8}xq{len(marked) - at - 8}x").pack
    head = marked[:4]
    size = int.from_bytes(head, "big", signed=True)
    not_ready = full(error_response(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS))
    for pid in (0, 1, 1000, marker, 2**63 - 1):
        expected = full(InitProducerIdResponse(producer_id=pid, producer_epoch=0))
        if pack(size, expected[4:8], pid) != expected:
            return None
    if not_ready[:4] != head:
        return None
    return size, pack, head, not_ready[8:]


def error_response(code: int) -> InitProducerIdResponse:
    return InitProducerIdResponse(error_code=code, producer_id=-1, producer_epoch=-1)


async def handle(
    node: api.Node, request: InitProducerIdRequest, ctx: api.RequestContext
) -> InitProducerIdResponse:
    try:  # api.through_controller, inlined on the busiest path
        response = await node.submit(request, ctx.api_version, ctx)
    except Exception:
        api.controller_failed(request, ctx)
        return error_response(-1)
    if ctx.api_version < 4 and response.error_code == ErrorCode.PRODUCER_FENCED:
        response.error_code = ErrorCode.INVALID_PRODUCER_EPOCH
    return response
