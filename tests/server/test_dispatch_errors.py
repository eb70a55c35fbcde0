"""Frames that route but do not decode close the connection with the reason, as before the
routes decoded in place: offsets count from the start of the header or of the body."""

from __future__ import annotations

import pytest
from kraftpy.controller import api
from kraftpy.controller.api.dispatch import CloseConnection, dispatch
from kraftpy.protocol.framing import encode_request
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest

CTX = api.RequestContext(listener="PLAINTEXT", listener_type=api.BROKER,
                         security_protocol="PLAINTEXT", client_host="127.0.0.1", client_port=1)


def _frame(version: int = 4) -> bytes:
    request = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=1000)
    return encode_request(request, version, 7, "client")[4:]


async def _reason(frame: bytes) -> str:
    with pytest.raises(CloseConnection) as info:
        await dispatch(object(), frame, CTX)  # type: ignore[arg-type]
    return str(info.value)


async def test_trailing_bytes_after_the_body() -> None:
    assert await _reason(_frame() + b"\x00\x01") == (
        "error reading init_producer_id v4 body: 2 trailing bytes after "
        "InitProducerIdRequest v4 (offset 18)")


async def test_truncated_body() -> None:
    assert await _reason(_frame()[:-3]) == (
        "error reading init_producer_id v4 body: truncated input "
        "(field TransactionTimeoutMs, offset 3)")


async def test_truncated_header() -> None:
    assert await _reason(_frame()[:9]) == (
        "error parsing request header: truncated input (field ClientId, offset 8)")
