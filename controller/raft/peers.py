"""Outgoing Raft requests to the other voters' CONTROLLER listeners, over trio TCP streams.

One task per peer, one connection per peer (opened on demand, dropped on any error), one
request in flight per peer (the core never has more): `send` hands a request to the peer's
task and returns at once; the answer, or the failure (no connection, no answer within the
request timeout, a frame that does not decode), comes back through the callbacks, which
feed the core. Nothing here decides anything.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

import trio
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.framing import FrameReader, decode_response, encode_request
from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest

log = logging.getLogger("kraftpy.raft.peers")

# The highest versions kraftpy's core speaks to a peer (Kafka 4.1's raft client's latest
# ones); each connection uses the highest the peer also serves, as its ApiVersions says.
VERSIONS = {52: 2, 53: 1, 54: 1, 1: 17, 59: 1}
# The lowest that still carry what the core sends (Fetch with the replica state and the
# leader's epoch in its answer).
MIN_VERSIONS = {1: 15}
VOTE = 52
API_VERSIONS_VERSION = 3
UNSUPPORTED_VERSION = 35
SOFTWARE_VERSION = "1"
MAX_FRAME = 100 * 1024 * 1024
CONNECT_TIMEOUT_S = 1.0

OnResponse = Callable[[int, int, Any], None]
OnFailure = Callable[[int, int], None]


class Peers:
    """The voters this node sends to: id -> (host, port)."""

    def __init__(self, node_id: int, addresses: Mapping[int, tuple[str, int]], *,
                 request_timeout_ms: int, on_response: OnResponse,
                 on_failure: OnFailure) -> None:
        self.client_id = f"raft-client-{node_id}"
        self.addresses = dict(addresses)
        self.timeout_s = request_timeout_ms / 1000
        self.on_response = on_response
        self.on_failure = on_failure
        self._channels: dict[int, tuple[trio.MemorySendChannel[Any],
                                        trio.MemoryReceiveChannel[Any]]] = {
            peer: trio.open_memory_channel(64) for peer in self.addresses}

    def send(self, destination: int, correlation_id: int, request: Any) -> None:
        channel = self._channels.get(destination)
        if channel is None:
            self.on_failure(destination, correlation_id)
            return
        try:
            channel[0].send_nowait((correlation_id, request))
        except trio.WouldBlock:
            self.on_failure(destination, correlation_id)

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            for peer in self.addresses:
                nursery.start_soon(self._peer, peer)

    async def _peer(self, peer: int) -> None:
        host, port = self.addresses[peer]
        receive = self._channels[peer][1]
        connection: _Connection | None = None
        async for correlation_id, request in receive:
            response = None
            with trio.move_on_after(self.timeout_s):
                try:
                    if connection is None:
                        connection = await _Connection.open(host, port, self.client_id)
                    version = connection.version_for(request)
                    response = await connection.request(request, version)
                except (OSError, trio.BrokenResourceError, trio.ClosedResourceError,
                        trio.TooSlowError, ConnectionError, DecodeError,
                        UnsupportedByPeer) as exc:
                    log.debug("request to voter %d at %s:%d failed: %s", peer, host, port,
                              exc)
            if response is None:
                if connection is not None:
                    await _close(connection.stream)
                    connection = None
                self.on_failure(peer, correlation_id)
            else:
                self.on_response(peer, correlation_id, response)


class UnsupportedByPeer(ConnectionError):
    """The peer does not serve a version of this API that can carry the request."""


class _Connection:
    """One connection to a peer, with the versions negotiated on it: ApiVersions first, then
    each API at the highest version both sides serve (what Kafka's NetworkClient does, so
    that a Kafka controller of another release, or a kraftpy one, is spoken to in its terms)."""

    def __init__(self, stream: trio.SocketStream, client_id: str) -> None:
        self.stream = stream
        self.client_id = client_id
        self.reader = FrameReader(MAX_FRAME)
        self.wire_id = 0
        self.served: dict[int, tuple[int, int]] = {}

    @classmethod
    async def open(cls, host: str, port: int, client_id: str) -> _Connection:
        with trio.fail_after(CONNECT_TIMEOUT_S):
            stream = await trio.open_tcp_stream(host, port)
        connection = cls(stream, client_id)
        try:
            await connection.negotiate()
        except BaseException:
            await _close(stream)
            raise
        return connection

    async def negotiate(self) -> None:
        answer = await self.request(ApiVersionsRequest(
            client_software_name="kraftpy", client_software_version=SOFTWARE_VERSION),
            API_VERSIONS_VERSION)
        if answer.error_code == UNSUPPORTED_VERSION and answer.api_keys:
            answer = await self.request(ApiVersionsRequest(), 0)  # what it lists it serves
        if answer.error_code:
            raise ConnectionError(f"ApiVersions answered error {answer.error_code}")
        self.served = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}

    def version_for(self, request: Any) -> int:
        key = request.API_KEY
        lo, hi = self.served.get(key, (0, -1))
        version = min(VERSIONS[key], hi)
        if version < max(lo, MIN_VERSIONS.get(key, 0)):
            raise UnsupportedByPeer(f"API {key}: the peer serves {lo}-{hi}")
        if key == VOTE and version < 2 and any(
                p.pre_vote for t in request.topics for p in t.partitions):
            raise UnsupportedByPeer("a pre-vote needs Vote v2")  # else it would be a vote
        return version

    async def request(self, request: Any, version: int) -> Any:
        self.wire_id = (self.wire_id + 1) & 0x7FFFFFFF
        wire_id = self.wire_id
        await self.stream.send_all(encode_request(request, version, wire_id, self.client_id))
        while True:
            frame = self.reader.next_frame()
            if frame is None:
                data = await self.stream.receive_some(65536)
                if not data:
                    raise ConnectionError("closed by the peer")
                self.reader.feed(data)
                continue
            got, decoded = decode_response(bytes(frame), request.API_KEY, version)
            if got == wire_id:
                return decoded


async def request_once(address: tuple[str, int], request: Any, version: int, client_id: str,
                       timeout_s: float) -> Any | None:
    """One request on a connection of its own (for the rare ones that are not the core's, such
    as this controller's registration or a new voter's ApiVersions): the decoded answer, or
    None on any failure."""
    host, port = address
    with trio.move_on_after(timeout_s):
        connection: _Connection | None = None
        try:
            connection = _Connection(await trio.open_tcp_stream(host, port), client_id)
            return await connection.request(request, version)
        except (OSError, trio.BrokenResourceError, trio.ClosedResourceError,
                DecodeError) as exc:
            log.debug("request to %s:%d failed: %s", host, port, exc)
            return None
        finally:
            if connection is not None:
                await _close(connection.stream)
    return None


async def _close(stream: trio.SocketStream) -> None:
    with trio.CancelScope(shield=True):
        try:
            await trio.aclose_forcefully(stream)
        except Exception:  # noqa: BLE001 - a broken socket: nothing more to do with it
            pass
