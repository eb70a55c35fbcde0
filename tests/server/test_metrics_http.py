"""The metrics listener in process: before a node is attached, a failing collector, bad heads."""

from __future__ import annotations

from pathlib import Path

import trio
from kraftpy.controller.metrics import NodeCollector
from kraftpy.controller.metrics_http import MAX_HEAD, MetricsAddress, MetricsServer


async def ask(port: int, raw: bytes) -> bytes:
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(raw)
        await stream.send_eof()
        data = b""
        while chunk := await stream.receive_some(65536):
            data += chunk
        return data


class Broken(NodeCollector):
    def collect(self):  # type: ignore[override]
        raise RuntimeError("a bug in a metric")


async def serving(collector: NodeCollector, nursery: trio.Nursery) -> int:
    server = MetricsServer(MetricsAddress("127.0.0.1", 0), collector)
    port = await server.bind()
    await nursery.start(server.serve)
    return port


async def test_before_recovery_ends_not_ready_and_not_active(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        port = await serving(NodeCollector(3, tmp_path), nursery)
        ready = await ask(port, b"GET /ready HTTP/1.1\r\nHost: x\r\n\r\n")
        assert ready.startswith(b"HTTP/1.1 503 ") and ready.endswith(b"recovering the metadata log\n")
        metrics = (await ask(port, b"GET /metrics HTTP/1.0\r\n\r\n")).decode()
        assert metrics.startswith("HTTP/1.1 200 ")
        assert "\nkafka_controller_kafkacontroller_activecontrollercount 0.0\n" in metrics
        assert "\nkafka_server_raft_metrics_current_leader -1.0\n" in metrics
        head = await ask(port, b"HEAD /ready HTTP/1.1\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 503 ") and head.endswith(b"\r\n\r\n")
        nursery.cancel_scope.cancel()


async def test_a_failing_collector_answers_500_and_the_listener_goes_on(tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery:
        port = await serving(Broken(1, tmp_path), nursery)
        assert (await ask(port, b"GET /metrics HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 500 ")
        assert (await ask(port, b"GET /ready HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 503 ")
        too_large = b"GET /metrics HTTP/1.1\r\nX: " + b"a" * (MAX_HEAD + 10)
        assert (await ask(port, too_large)).startswith(b"HTTP/1.1 431 ")
        assert await ask(port, b"") == b""  # a peer that sends nothing gets nothing
        nursery.cancel_scope.cancel()
