"""Envelope (key 58).

Versions served: 0. Listeners: CONTROLLER.
Behaviour: a broker forwards its clients' admin requests inside an Envelope (Kafka's
ControllerApis.handleEnvelopeRequest, EnvelopeUtils): the client's principal (Kafka's
DefaultPrincipalData, version-prefixed), its address (4 or 16 bytes) and the whole inner request
frame. The inner request is dispatched as if it came from that principal and address, on this
connection's listener, through the same routing, authorization and controller as any other;
its whole response frame (header and body) is the Envelope's ResponseData. An inner API Kafka
does not forward is INVALID_REQUEST; an inner request that does not parse, or an API or
version not served here, UNSUPPORTED_VERSION; a principal that does not decode
PRINCIPAL_DESERIALIZATION_FAILURE; an address of another length INVALID_REQUEST. With an
authorizer the Envelope itself needs CLUSTER_ACTION (the security layer's check).
Skipped: nothing.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import replace
from typing import Any

from kraftpy.controller import api
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.framing import decode_response, read_request_header
from kraftpy.protocol.message import Message
from kraftpy.protocol.messages.default_principal_data import DefaultPrincipalData
from kraftpy.protocol.messages.envelope_request import EnvelopeRequest
from kraftpy.protocol.messages.envelope_response import EnvelopeResponse

API_KEY = 58
VERSIONS = (0, 0)
LISTENERS = (api.CONTROLLER,)
REQUEST = EnvelopeRequest

# ApiKeys whose `forwardable` is true in Kafka 4.1: what a broker may put in an Envelope.
FORWARDABLE = frozenset({19, 20, 30, 31, 33, 37, 38, 39, 40, 43, 44, 45, 46, 49, 51, 55, 57,
                         64, 67, 80, 81})
_VERSION = struct.Struct(">h")
DESCRIBE_QUORUM = 55


class EnvelopeError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def error_response(code: int) -> EnvelopeResponse:
    return EnvelopeResponse(response_data=None, error_code=code)


def forwarded_principal(data: bytes | None) -> str:
    """`Type:Name` from DefaultKafkaPrincipalBuilder's serialized form."""
    if data is None or len(data) < 2:
        raise EnvelopeError(ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE,
                            "Failed to deserialize client principal from envelope")
    (version,) = _VERSION.unpack_from(data, 0)
    lo, hi = DefaultPrincipalData.VALID_VERSIONS
    try:
        if not lo <= version <= hi:
            raise DecodeError(f"version {version}", offset=0, field="version")
        principal = DefaultPrincipalData.decode(data[2:], version)
    except DecodeError:
        raise EnvelopeError(ErrorCode.PRINCIPAL_DESERIALIZATION_FAILURE,
                            "Failed to deserialize client principal from envelope") from None
    return f"{principal.type}:{principal.name}"


def forwarded_address(data: bytes) -> str:
    if len(data) not in (4, 16):
        raise EnvelopeError(ErrorCode.INVALID_REQUEST,
                            "Failed to parse client address from envelope")
    return str(ipaddress.ip_address(data))


async def handle(node: api.Node, request: EnvelopeRequest, ctx: api.RequestContext
                 ) -> EnvelopeResponse:
    from kraftpy.controller.api import dispatch  # dispatch imports every handler

    frame = bytes(request.request_data)
    try:
        principal = forwarded_principal(request.request_principal)
        host = forwarded_address(bytes(request.client_host_address))
        try:
            _, api_key, api_version, _ = read_request_header(frame)
        except DecodeError:
            raise EnvelopeError(ErrorCode.UNSUPPORTED_VERSION,
                                "Failed to parse request header from envelope") from None
        if api_key not in FORWARDABLE:
            raise EnvelopeError(ErrorCode.INVALID_REQUEST, f"API {api_key} is not enabled or "
                                "is not eligible for forwarding")
    except EnvelopeError as exc:
        api._log.info("Envelope from %s refused: %s", ctx.client_host, exc)
        return error_response(exc.code)
    inner = replace(ctx, principal=principal, client_host=host, client_port=0)
    try:
        answer = await dispatch.dispatch(node, frame, inner)
    except dispatch.CloseConnection as exc:  # not parsed, or not served here
        api._log.info("Envelope from %s: inner request not answered: %s", ctx.client_host, exc)
        return error_response(ErrorCode.UNSUPPORTED_VERSION)
    if _redirects(answer[4:], api_key, api_version):
        # As Kafka's RequestChannel: a NOT_CONTROLLER answer goes back as the Envelope's own
        # error, which is what makes the broker's forwarding channel look for the leader again
        # (inside a successful Envelope it would hand the client NOT_CONTROLLER forever).
        return error_response(ErrorCode.NOT_CONTROLLER)
    return EnvelopeResponse(response_data=answer[4:], error_code=ErrorCode.NONE)


def _redirects(frame: bytes, api_key: int, api_version: int) -> bool:
    """Whether the inner answer carries NOT_CONTROLLER anywhere (NOT_LEADER_OR_FOLLOWER for
    DescribeQuorum): Kafka's errorCounts of the response."""
    try:
        _, response = decode_response(frame, api_key, api_version)
    except DecodeError:
        return False
    wanted = (ErrorCode.NOT_LEADER_OR_FOLLOWER if api_key == DESCRIBE_QUORUM
              else ErrorCode.NOT_CONTROLLER)
    return wanted in _error_codes(response)


def _error_codes(value: Any) -> set[int]:
    """Every `error_code` in a decoded message, its structs and their arrays."""
    found: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
            continue
        for name in getattr(item, "__slots__", ()):
            field = getattr(item, name, None)
            if name == "error_code":
                found.add(field)
            elif isinstance(field, (list, Message)):
                stack.append(field)
    return found
