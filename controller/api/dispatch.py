"""From one request frame to one response frame, or a reason to close the connection.

The only place that routes by API key: header, listener check, the KIP-511 rule, body decode,
handler, encode. What cannot be answered (an unknown key, an API or version this listener does
not serve, a malformed header or body) raises `CloseConnection`, as Kafka closes the socket.
A handler that raises, or answers with what does not encode at the version asked, gets the
API's error response with UNKNOWN_SERVER_ERROR (`errors.py`, Kafka's getErrorResponse) and
one log line; the connection stays open.

Routing costs one dict lookup: per listener type, a table built once maps the frame's first
four bytes (api key, api version) to everything the request needs (handler, header version,
the generated header and body decoders, response header). The decoders read the frame in
place; frames not in the table, or that do not decode, take the checked path, which says why.
Routes of InitProducerId `remember` the idempotent requests they decode, so that later
frames with the same bytes get quick answers (`quick.py`).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kraftpy.controller import api, metrics_requests
from kraftpy.controller.api import api_versions, errors, init_producer_id
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.framing import (
    SplicedFrame,
    encode_response,
    frame_response,
    read_request_header,
)
from kraftpy.protocol.messages.request_header import RequestHeader
from kraftpy.protocol.registry import request_header_version, response_header_version

_KEY_VERSION = struct.Struct(">hh")
_new = object.__new__
_RequestContext = api.RequestContext
_perf_counter = time.perf_counter
_SAMPLE_MASK = metrics_requests.SAMPLE_MASK


class CloseConnection(Exception):
    """The request cannot be answered; the message says why (it goes to the server log)."""


@dataclass(frozen=True, slots=True)
class Route:
    """Everything one (api key, version) on one listener type needs, resolved once."""

    handler: api.ApiHandler
    api_key: int
    api_version: int
    header_version: int
    flexible_response: bool  # response header v1 (a tag section after the correlation id)
    decode_header: Callable[[bytes, int], tuple[RequestHeader, int]]  # generated, at 0
    decode_body: Callable[[bytes, int], tuple[Any, int]]  # generated, at the body's offset
    quick: bool = False  # InitProducerId: remember idempotent requests for quick answers
    # [requests of this key and version answered] (metrics_requests: shared, read by scrapes)
    answered: list[int] = field(default_factory=lambda: [0])


_ROUTES: dict[str, dict[bytes, Route]] = {}


def routes(listener_type: str) -> dict[bytes, Route]:
    """The routing table of a listener type, keyed by a frame's first four bytes."""
    table = _ROUTES.get(listener_type)
    if table is None:
        table = {}
        for h in api.handlers().values():
            if listener_type not in h.listeners:
                continue
            for version in range(h.versions[0], h.versions[1] + 1):
                header_version = request_header_version(h.api_key, version)
                table[_KEY_VERSION.pack(h.api_key, version)] = Route(
                    h, h.api_key, version, header_version,
                    response_header_version(h.api_key, version) == 1,
                    RequestHeader.decoder(header_version), h.request_class.decoder(version),
                    h.api_key == init_producer_id.API_KEY,
                    metrics_requests.cell(h.api_key, version))
        _ROUTES[listener_type] = table
    return table


async def dispatch(node: api.Node, frame: bytes, conn: api.RequestContext
                   ) -> bytes | SplicedFrame:
    """Answer one request frame (without its size prefix) with a framed response (a
    `SplicedFrame` when it carries a region of a file: a FetchSnapshot chunk)."""
    if type(frame) is not bytes:
        frame = bytes(frame)
    table = _ROUTES.get(conn.listener_type) or routes(conn.listener_type)
    route = table.get(frame[:4])
    if route is None:
        return await _unrouted(node, frame, conn)
    # The route's generated decoders read the frame in place, header then body; any failure
    # or trailing bytes take the checked path, which raises the error that says why.
    try:
        header, body_offset = route.decode_header(frame, 0)
        request, end = route.decode_body(frame, body_offset)
    except DecodeError:
        end = -1
    if end != len(frame):
        request = None  # what did decode of a large frame is not kept while it is re-read
        raise _undecodable(route, frame)
    answered = route.answered
    answered[0] += 1
    began = 0.0 if answered[0] & _SAMPLE_MASK else _perf_counter()  # one request in 8 timed
    api_version = route.api_version
    if route.quick and (table := getattr(node, "quick_table", None)) is not None:
        table.remember(conn.listener_type, frame, request, api_version)
    # The connection's context for this request: a copy, far cheaper than replace().
    ctx = _new(_RequestContext)
    fields = ctx.__dict__
    fields.update(conn.__dict__)
    fields["client_id"] = header.client_id or ""
    fields["correlation_id"] = header.correlation_id
    fields["api_key"] = route.api_key
    fields["api_version"] = api_version
    handler = route.handler
    security = getattr(node, "security", None)  # controller/security/layer.py
    try:
        if security is None or not security.checks_requests:
            response = await handler.handle(node, request, ctx)
        else:
            denied = await security.before(ctx, route.api_key, request)
            response = denied if denied is not None else await handler.handle(node, request, ctx)
            response = security.after(ctx, route.api_key, request, response)
        answer = frame_response(header.correlation_id, route.flexible_response, response,
                                api_version)
    except CloseConnection:
        raise
    except Exception as exc:
        return _failed(route, request, ctx, exc)
    if began:
        metrics_requests.timed(route.api_key, _perf_counter() - began, began)
    return answer


def _failed(route: Route, request: Any, ctx: api.RequestContext, exc: Exception) -> bytes:
    """A handler raised, or answered what does not encode at this version: Kafka's error
    response for the API (UNKNOWN_SERVER_ERROR), one log line, and the connection stays."""
    api.request_failed(f"unexpected error handling {route.handler.name} v{route.api_version}",
                       ctx, exc)
    try:
        response = errors.error_response(route.api_key, request, route.api_version)
        return frame_response(ctx.correlation_id, route.flexible_response, response,
                              route.api_version)
    except Exception as again:
        raise CloseConnection(f"{route.handler.name} v{route.api_version} failed and its "
                              f"error response did not encode either: {again}") from None


def _undecodable(route: Route, frame: bytes) -> CloseConnection:
    """Why a routed frame does not decode (offsets count from the header's or body's start)."""
    try:
        _, body_offset = RequestHeader.decode_from(frame, 0, route.header_version)
    except DecodeError as exc:
        return CloseConnection(f"error parsing request header: {exc}")
    handler = route.handler
    cls, version = handler.request_class, route.api_version
    # Read in place (a large frame is not copied again); offsets count from the body's start.
    try:
        _, end = cls.decoder(version)(frame, body_offset)
    except DecodeError as exc:
        at = None if exc.offset is None else exc.offset - body_offset
        why = DecodeError(exc.reason, offset=at, field=exc.field)
    else:
        if end == len(frame):  # pragma: no cover
            raise AssertionError("a frame that failed to decode decoded")
        why = DecodeError(f"{len(frame) - end} trailing bytes after {cls.__name__} v{version}",
                          offset=end - body_offset)
    return CloseConnection(f"error reading {handler.name} v{version} body: {why}")


async def _unrouted(node: api.Node, frame: bytes, conn: api.RequestContext) -> bytes:
    """A frame outside the table: the KIP-511 answer, or why it cannot be answered."""
    try:
        header, api_key, api_version, _ = read_request_header(frame)
    except DecodeError as exc:
        raise CloseConnection(f"error parsing request header: {exc}") from None
    handler = api.lookup(api_key, conn.listener_type)
    if handler is None:
        raise CloseConnection(
            f"received request api key {api_key} with version {api_version} which is not "
            f"enabled on listener {conn.listener}"
        )
    if api_key == api_versions.API_KEY:
        return encode_response(
            header.correlation_id, api_key, 0, api_versions.unsupported_version_response()
        )
    raise CloseConnection(
        f"received request api key {api_key} ({handler.name}) with version {api_version} "
        f"which is not enabled (served: {handler.versions[0]}-{handler.versions[1]})"
    )
