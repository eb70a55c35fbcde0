"""From one request frame to one response frame, or a reason to close the connection.

The only place that routes by API key: header, listener check, the KIP-511 rule, body decode,
handler, encode. What cannot be answered (an unknown key, an API or version this listener does
not serve, a malformed header or body) raises `CloseConnection`, as Kafka closes the socket.
"""

from __future__ import annotations

from kraftpy.controller import api
from kraftpy.controller.api import api_versions
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.framing import encode_response, read_request_header


def _for_request(conn: api.RequestContext, client_id: str, correlation_id: int, api_key: int,
                 api_version: int) -> api.RequestContext:
    """The connection's context for one request: a copy, far cheaper than replace()."""
    ctx = object.__new__(api.RequestContext)
    ctx.__dict__.update(conn.__dict__)
    ctx.__dict__.update(client_id=client_id, correlation_id=correlation_id, api_key=api_key,
                        api_version=api_version)
    return ctx


class CloseConnection(Exception):
    """The request cannot be answered; the message says why (it goes to the server log)."""


async def dispatch(node: api.Node, frame: bytes, conn: api.RequestContext) -> bytes:
    """Answer one request frame (without its size prefix) with a framed response."""
    try:
        header, api_key, api_version, body_offset = read_request_header(frame)
    except DecodeError as exc:
        raise CloseConnection(f"error parsing request header: {exc}") from None
    handler = api.lookup(api_key, conn.listener_type)
    if handler is None:
        raise CloseConnection(
            f"received request api key {api_key} with version {api_version} which is not "
            f"enabled on listener {conn.listener}"
        )
    ctx = _for_request(conn, header.client_id or "", header.correlation_id, api_key, api_version)
    if not handler.serves(api_version):
        if api_key == api_versions.API_KEY:
            return encode_response(
                header.correlation_id, api_key, 0, api_versions.unsupported_version_response()
            )
        raise CloseConnection(
            f"received request api key {api_key} ({handler.name}) with version {api_version} "
            f"which is not enabled (served: {handler.versions[0]}-{handler.versions[1]})"
        )
    try:
        request = handler.request_class.decode(frame[body_offset:], api_version)
    except DecodeError as exc:
        raise CloseConnection(f"error reading {handler.name} v{api_version} body: {exc}") from None
    security = getattr(node, "security", None)  # controller/security/layer.py
    if security is None:
        response = await handler.handle(node, request, ctx)
    else:
        denied = await security.before(ctx, api_key, request)
        response = denied if denied is not None else await handler.handle(node, request, ctx)
        response = security.after(ctx, api_key, request, response)
    return encode_response(header.correlation_id, api_key, api_version, response)
