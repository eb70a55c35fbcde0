"""The request hot path: routing table, plain-socket I/O, security checks only when configured."""

from __future__ import annotations

import socket
import struct

import trio
from kraftpy.controller import api
from kraftpy.controller import server as server_module
from kraftpy.controller.api import dispatch as dispatch_module
from kraftpy.controller.config import build_config
from kraftpy.controller.security.layer import SecurityLayer
from kraftpy.protocol.framing import FrameReader, decode_response, encode_request, encode_response
from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.messages.init_producer_id_response import InitProducerIdResponse
from kraftpy.protocol.registry import response_header_version
from support.server_shell import Client, running_shell

V3 = {"client_software_name": "hot-path", "client_software_version": "1.0"}


def test_routing_table_holds_exactly_what_each_listener_serves() -> None:
    for kind in (api.BROKER, api.CONTROLLER):
        table = dispatch_module.routes(kind)
        expected = {(key, v) for key, lo, hi in api.served(kind) for v in range(lo, hi + 1)}
        assert {(r.api_key, r.api_version) for r in table.values()} == expected
        for prefix, route in table.items():
            assert struct.unpack(">hh", prefix) == (route.api_key, route.api_version)
            assert route.flexible_response == (
                response_header_version(route.api_key, route.api_version) == 1)


def _answer_with_correlation(request, version, ctx):
    return InitProducerIdResponse(producer_id=ctx.correlation_id, producer_epoch=3)


async def test_routed_answers_are_the_framing_modules_bytes() -> None:
    """The one-go encoding of dispatch equals encode_response, for both header versions."""
    async with running_shell(_answer_with_correlation) as (server, _):
        c = await Client.connect(server, "PLAINTEXT")
        for version in (0, 1, 2, 3, 4, 5):  # response header v0 below 2, v1 from 2 on
            request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000)
            await c.send(encode_request(request, version, 1000 + version, "hot"))
            raw = await c.frame()
            expected = encode_response(1000 + version, 22, version, InitProducerIdResponse(
                producer_id=1000 + version, producer_epoch=3))
            assert raw is not None and struct.pack(">i", len(raw)) + raw == expected, version


async def test_answers_larger_than_the_socket_buffer_arrive_whole_and_in_order(
        monkeypatch) -> None:
    """A client that pipelines and reads late makes the server wait for writability mid-frame."""
    waits = []
    send_rest = server_module._SocketIO._send_rest

    async def counted(self, rest):
        waits.append(len(rest))
        await send_rest(self, rest)

    monkeypatch.setattr(server_module._SocketIO, "_send_rest", counted)
    async with running_shell(_answer_with_correlation) as (server, _):
        c = await Client.connect(server, "PLAINTEXT")
        c.stream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32768)
        n = 3000
        await c.send(b"".join(encode_request(ApiVersionsRequest(**V3), 3, i, "hot")
                              for i in range(n)))
        await trio.sleep(0.3)  # the answers (about 1 MB) pile up against a full buffer
        reader, seen = FrameReader(), []
        with trio.fail_after(20):
            while len(seen) < n:
                data = await c.stream.receive_some(65536)
                assert data, f"closed after {len(seen)} answers"
                reader.feed(data)
                while (raw := reader.next_frame()) is not None:
                    corr, response = decode_response(raw, 18, 3)
                    assert response.error_code == 0
                    seen.append(corr)
        assert seen == list(range(n))
        assert waits, "the socket buffer never filled"
        other = await Client.connect(server, "PLAINTEXT")
        assert (await other.request(ApiVersionsRequest(**V3), 3)).error_code == 0


async def test_a_reset_connection_ends_quietly_and_others_go_on() -> None:
    async with running_shell(_answer_with_correlation) as (server, _):
        victim = await Client.connect(server, "PLAINTEXT")
        await victim.send(encode_request(ApiVersionsRequest(**V3), 3, 1, "hot"))
        victim.stream.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        await victim.aclose()  # RST, with an answer possibly on its way
        with trio.fail_after(5):
            while server.open_connections:
                await trio.sleep(0.01)
        c = await Client.connect(server, "PLAINTEXT")
        r = await c.request(InitProducerIdRequest(transactional_id=None,
                                                  transaction_timeout_ms=1000), 4)
        assert r.producer_id == 1


def _layer(**props: str) -> SecurityLayer:
    return SecurityLayer.from_config(build_config({
        "process.roles": "broker,controller", "node.id": "1",
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "controller.listener.names": "CONTROLLER", "metadata.log.dir": "unused", **props}))


def test_requests_pass_the_security_layer_only_when_it_can_change_something() -> None:
    assert not _layer().checks_requests
    assert _layer(**{"authorizer.class.name":
                     "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}).checks_requests
    assert _layer(**{"quota.request.rate.per.principal": "10"}).checks_requests
    assert _layer(**{"quota.request.rate.overrides": "User:alice=5"}).checks_requests


async def test_dispatch_runs_before_and_after_only_when_checks_are_on() -> None:
    calls: list[str] = []

    class Recording:
        checks_requests = False

        async def before(self, ctx, key, request):
            calls.append("before")
            return None

        def after(self, ctx, key, request, response):
            calls.append("after")
            return response

    async with running_shell(_answer_with_correlation) as (server, node):
        node.security = Recording()
        c = await Client.connect(server, "PLAINTEXT")
        request = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000)
        assert (await c.request(request, 4)).producer_id == 1
        assert calls == []
        node.security.checks_requests = True
        assert (await c.request(request, 4)).producer_id == 2
        assert calls == ["before", "after"]


async def test_drain_ends_a_connection_whose_client_never_reads(monkeypatch) -> None:
    """A send stuck on a full socket buffer does not hold shutdown past drain's timeout."""
    stuck_sends = []
    send_rest = server_module._SocketIO._send_rest

    async def counted(self, rest):
        stuck_sends.append(len(rest))
        await send_rest(self, rest)

    async def send_quietly(client: Client, data: bytes) -> None:
        try:
            await client.send(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the server closed the connection under it

    monkeypatch.setattr(server_module._SocketIO, "_send_rest", counted)
    async with running_shell(_answer_with_correlation) as (server, _):
        stuck = await Client.connect(server, "PLAINTEXT")
        stuck.stream.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        data = b"".join(encode_request(ApiVersionsRequest(**V3), 3, i, "hot")
                        for i in range(20000))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_quietly, stuck, data)
            with trio.fail_after(5):
                while not stuck_sends:
                    await trio.sleep(0.05)
            assert server.open_connections == 1
            with trio.fail_after(5):
                await server.drain(timeout_s=0.5)  # cancels what is still busy, then returns
                while server.open_connections:
                    await trio.sleep(0.01)
