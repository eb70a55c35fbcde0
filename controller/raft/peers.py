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

log = logging.getLogger("kraftpy.raft.peers")

# The versions kraftpy's core speaks to a peer (Kafka 4.1's raft client's latest ones).
VERSIONS = {52: 2, 53: 1, 54: 1, 1: 17, 59: 1}
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
        stream: trio.SocketStream | None = None
        reader = FrameReader(MAX_FRAME)
        wire_id = 0
        async for correlation_id, request in receive:
            key = request.API_KEY
            version = VERSIONS[key]
            wire_id = (wire_id + 1) & 0x7FFFFFFF
            response = None
            with trio.move_on_after(self.timeout_s):
                try:
                    if stream is None:
                        with trio.fail_after(CONNECT_TIMEOUT_S):
                            stream = await trio.open_tcp_stream(host, port)
                        reader = FrameReader(MAX_FRAME)
                    await stream.send_all(encode_request(request, version, wire_id,
                                                         self.client_id))
                    while response is None:
                        frame = reader.next_frame()
                        if frame is None:
                            data = await stream.receive_some(65536)
                            if not data:
                                raise ConnectionError("closed by the peer")
                            reader.feed(data)
                            continue
                        got, decoded = decode_response(bytes(frame), key, version)
                        if got == wire_id:
                            response = decoded
                except (OSError, trio.BrokenResourceError, trio.ClosedResourceError,
                        trio.TooSlowError, ConnectionError, DecodeError) as exc:
                    log.debug("request to voter %d at %s:%d failed: %s", peer, host, port,
                              exc)
            if response is None:
                if stream is not None:
                    await _close(stream)
                    stream = None
                self.on_failure(peer, correlation_id)
            else:
                self.on_response(peer, correlation_id, response)


async def _close(stream: trio.SocketStream) -> None:
    with trio.CancelScope(shield=True):
        try:
            await trio.aclose_forcefully(stream)
        except Exception:  # noqa: BLE001 - a broken socket: nothing more to do with it
            pass
