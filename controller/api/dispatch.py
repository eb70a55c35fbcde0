"""From one request frame to one response frame, or a reason to close the connection.

The only place that routes by API key: header, listener check, the KIP-511 rule, body decode,
handler, encode. What cannot be answered (an unknown key, an API or version this listener does
not serve, a malformed header or body) raises `CloseConnection`, as Kafka closes the socket.

Routing costs one dict lookup: per listener type, a table built once maps the frame's first
four bytes (api key, api version) to everything the request needs (handler, header version,
the generated header and body decoders, response header). The decoders read the frame in
place; frames not in the table, or that do not decode, take the checked path, which says why.

Quick answers: an idempotent InitProducerId is the same bytes every time for one client and
version, but for its correlation id. The full path remembers those bytes once it has decoded
such a request (per listener type); `quick_answerer` answers a remembered frame by its bytes
alone with the controller's next id (`Node.idempotent_ids`), in one synchronous loop over the
frames of a receive: no decode, context, coroutine or result object per request. It answers
only where the full path would decide nothing else (no security checks configured, the
quorum running, no claim due); any other frame goes to `dispatch`, in order.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kraftpy.controller import api
from kraftpy.controller.api import api_versions, init_producer_id
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.framing import encode_response, frame_response, read_request_header
from kraftpy.protocol.messages.request_header import RequestHeader
from kraftpy.protocol.registry import request_header_version, response_header_version

_KEY_VERSION = struct.Struct(">hh")
_new = object.__new__
_RequestContext = api.RequestContext


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


_ROUTES: dict[str, dict[bytes, Route]] = {}
# Per listener type: a frame's bytes without its correlation id (bytes 4-8) -> how to answer it.
_QUICK: dict[str, dict[bytes, init_producer_id.QuickAnswer]] = {}
MAX_QUICK = 1024  # distinct requests remembered per listener type (client ids, versions)


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
                    h.api_key == init_producer_id.API_KEY)
        _ROUTES[listener_type] = table
    return table


async def dispatch(node: api.Node, frame: bytes, conn: api.RequestContext) -> bytes:
    """Answer one request frame (without its size prefix) with a framed response."""
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
        raise _undecodable(route, frame)
    api_version = route.api_version
    if route.quick:
        _remember(conn.listener_type, frame, request, api_version)
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
    if security is None or not security.checks_requests:
        response = await handler.handle(node, request, ctx)
    else:
        denied = await security.before(ctx, route.api_key, request)
        response = denied if denied is not None else await handler.handle(node, request, ctx)
        response = security.after(ctx, route.api_key, request, response)
    return frame_response(header.correlation_id, route.flexible_response, response, api_version)


def _remember(listener_type: str, frame: bytes, request: Any, api_version: int) -> None:
    """Keep a decoded idempotent InitProducerId's bytes for `quick_answerer`."""
    key = frame[:4] + frame[8:]
    known = _QUICK.setdefault(listener_type, {})
    if key in known:
        return
    pieces = init_producer_id.quick_answer(request, api_version)
    if pieces is not None:
        if len(known) >= MAX_QUICK:
            known.clear()
        known[key] = pieces


# (next_frame, outgoing) -> the first frame that needs `dispatch`, or None when none is left
QuickAnswerer = Callable[[Callable[[], bytes | None], list[bytes]], bytes | None]


def quick_answerer(node: api.Node, conn: api.RequestContext) -> QuickAnswerer | None:
    """A connection's quick answers: takes frames from `next_frame` and, while each is one the
    full path remembered, appends its framed answer to `outgoing`. None when the node gives
    no ids this way (then every frame goes to `dispatch`)."""
    ids_for: Callable[[], Callable[[], int | None] | None] | None = getattr(
        node, "idempotent_ids", None)
    if ids_for is None:
        return None
    known = _QUICK.setdefault(conn.listener_type, {})
    get = known.get

    def answer_quickly(next_frame: Callable[[], bytes | None], outgoing: list[bytes]
                       ) -> bytes | None:
        frame = next_frame()
        if frame is None or not known:
            return frame
        security = getattr(node, "security", None)
        if security is not None and security.checks_requests:
            return frame  # the full path decides who may ask, and throttles
        ids = None  # the controller's, asked for at the first remembered frame
        append = outgoing.append
        while True:
            quick = get(frame[:4] + frame[8:])
            if quick is None:
                return frame
            if ids is None:
                ids = ids_for()
                if ids is None:
                    return frame
            pid = ids()
            if pid is None:  # the controller must decide more (a claim due): the full path
                return frame
            head, pack, not_ready = quick
            append(head + frame[4:8] + (pack(pid) if pid >= 0 else not_ready))
            frame = next_frame()
            if frame is None:
                return None

    return answer_quickly


def _undecodable(route: Route, frame: bytes) -> CloseConnection:
    """Why a routed frame does not decode (offsets count from the header's or body's start)."""
    try:
        _, body_offset = RequestHeader.decode_from(frame, 0, route.header_version)
    except DecodeError as exc:
        return CloseConnection(f"error parsing request header: {exc}")
    handler = route.handler
    try:
        handler.request_class.decode(frame[body_offset:], route.api_version)
    except DecodeError as exc:
        return CloseConnection(f"error reading {handler.name} v{route.api_version} body: {exc}")
    raise AssertionError("a frame that failed to decode decoded")  # pragma: no cover


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
