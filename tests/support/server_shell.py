"""An in-process server with a scripted node, for testing the network shell alone."""

from __future__ import annotations

import contextlib
import struct
from collections.abc import AsyncIterator, Callable
from typing import Any

import trio
from kraftpy.controller import api
from kraftpy.controller.config import ServerConfig, build_config
from kraftpy.controller.server import Server
from kraftpy.protocol.framing import decode_response, encode_request

CLUSTER_ID = "G0dMBTBsQ--_v26MQTG0jA"


class ScriptedNode:
    """A node whose controller answers are given by the test."""

    def __init__(self, config: ServerConfig,
                 answer: Callable[[Any, int, api.RequestContext], Any] | None = None) -> None:
        self.config = config
        self.cluster_id = CLUSTER_ID
        self.answer = answer
        self.submitted: list[tuple[Any, int, api.RequestContext]] = []
        self.delay = 0.0

    async def submit(self, request: Any, api_version: int, ctx: api.RequestContext) -> Any:
        self.submitted.append((request, api_version, ctx))
        if self.delay:
            await trio.sleep(self.delay)
        if self.answer is None:
            raise RuntimeError("no controller in this test")
        return self.answer(request, api_version, ctx)

    def describe(self) -> dict[str, Any]:
        return {}

    def features(self) -> api.Features:
        return api.Features(supported={"metadata.version": (7, 27)},
                            finalized={"metadata.version": 27}, epoch=5, image_epoch=9)


def shell_config(**overrides: str) -> ServerConfig:
    return build_config({
        "process.roles": "broker,controller", "node.id": "1",
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "controller.listener.names": "CONTROLLER", "metadata.log.dir": "unused",
        **overrides,
    })


@contextlib.asynccontextmanager
async def running_shell(answer: Callable[..., Any] | None = None, **overrides: str
                        ) -> AsyncIterator[tuple[Server, ScriptedNode]]:
    config = shell_config(**overrides)
    server = Server(config)
    bound = await server.bind()
    server.config = config.with_bound_ports(bound)
    node = ScriptedNode(server.config, answer)
    server.node = node
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        try:
            yield server, node
        finally:
            await server.drain(timeout_s=5)
            nursery.cancel_scope.cancel()


class Client:
    """A raw Kafka connection over trio, for shell tests."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buf = b""
        self.correlation = 0

    @classmethod
    async def connect(cls, server: Server, listener: str) -> Client:
        return cls(await trio.open_tcp_stream("127.0.0.1", server.bound[listener]))

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def frame(self) -> bytes | None:
        """The next frame, or None when the server closed the connection."""
        while True:
            if len(self.buf) >= 4:
                (size,) = struct.unpack(">i", self.buf[:4])
                if len(self.buf) >= 4 + size:
                    out, self.buf = self.buf[4 : 4 + size], self.buf[4 + size :]
                    return out
            try:
                data = await self.stream.receive_some(65536)
            except trio.BrokenResourceError:
                return None
            if not data:
                return None
            self.buf += data

    async def request(self, message: Any, version: int) -> Any:
        self.correlation += 1
        await self.send(encode_request(message, version, self.correlation, "shell-test"))
        raw = await self.frame()
        assert raw is not None, "connection closed instead of an answer"
        correlation, response = decode_response(raw, message.API_KEY, version)
        assert correlation == self.correlation
        return response

    async def closed(self, wait: float = 2.0) -> bool:
        with trio.move_on_after(wait):
            return await self.frame() is None
        return False

    async def aclose(self) -> None:
        await self.stream.aclose()
