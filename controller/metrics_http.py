"""The metrics listener: `GET /metrics` (Prometheus) and `GET /ready` (readiness), over HTTP.

Turned on by one property, `kraftpy.metrics.listener=http://HOST:PORT` (off by default).
It is served by trio on the node's own event loop, not by prometheus_client's server thread:
a scrape then reads the controller's state between two events, never in the middle of one
(a thread could see a dict change size under it, or counts of two different moments), and
the hot paths need no lock. The cost is that a scrape takes its turn on the loop: the
exposition of a few hundred series, well under a millisecond. The exposition itself is
prometheus_client's (`choose_encoder`: the text format, or OpenMetrics when asked for).

The listener is bound before the data dir is opened, so an orchestrator's probe gets its 503
from `/ready` while the log is recovered, and 200 once the controller is active. Each
connection gets one request and `Connection: close`; a request that is not HTTP, too large
(8 KiB of head) or too slow (10 s) is answered 400 or dropped, and never reaches the node.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

import trio
from kraftpy.controller.config import ConfigError, ServerConfig
from kraftpy.controller.metrics import NodeCollector
from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector
from prometheus_client.exposition import choose_encoder

log = logging.getLogger("kraftpy.metrics")

LISTENER_PROPERTY = "kraftpy.metrics.listener"
MAX_HEAD = 8192
REQUEST_TIMEOUT_S = 10.0
_LISTENER = re.compile(r"^http://(?P<host>\[[^\]]*\]|[^:/\[\]]*):(?P<port>\d+)/?$")


@dataclass(frozen=True)
class MetricsAddress:
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"


def metrics_address(config: ServerConfig) -> MetricsAddress | None:
    """The listener `kraftpy.metrics.listener` asks for, or None (unset or empty: off)."""
    raw = config.extra.get(LISTENER_PROPERTY, "").strip()
    if not raw:
        return None
    m = _LISTENER.match(raw)
    if m is None:
        raise ConfigError(f"{LISTENER_PROPERTY}: {raw!r} is not http://host:port")
    port = int(m["port"])
    if port > 65535:
        raise ConfigError(f"{LISTENER_PROPERTY}: port {port} is out of range")
    return MetricsAddress(m["host"].strip("[]"), port)


class MetricsServer:
    """Answers /metrics and /ready from a NodeCollector."""

    def __init__(self, address: MetricsAddress, collector: NodeCollector) -> None:
        self.address = address
        self.collector = collector
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(collector)
        ProcessCollector(registry=self.registry)  # process_cpu_seconds_total, memory, fds
        PlatformCollector(registry=self.registry)  # python_info
        self._listeners: list[trio.SocketListener] = []
        self.port = address.port

    async def bind(self) -> int:
        """Open the listening socket (port 0 asks the OS); the bound port. OSError if taken."""
        try:
            self._listeners = await trio.open_tcp_listeners(
                self.address.port, host=self.address.host or None)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot listen on {self.address} "
                                     f"({LISTENER_PROPERTY}): {exc.strerror}") from None
        self.port = self._listeners[0].socket.getsockname()[1]
        return self.port

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        if not self._listeners:
            await self.bind()
        log.info("metrics listener on %s (/metrics, /ready)",
                 MetricsAddress(self.address.host, self.port))
        try:
            async with trio.open_nursery() as nursery:
                task_status.started()
                await trio.serve_listeners(self._handle, self._listeners,
                                           handler_nursery=nursery)
        finally:
            for listener in self._listeners:
                with trio.CancelScope(shield=True):
                    await listener.aclose()

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            with trio.move_on_after(REQUEST_TIMEOUT_S):
                head = await _read_head(stream)
                if head is None:
                    return
                try:
                    answer = self.answer(head)
                except Exception:  # a scrape must never take the node down with it
                    log.exception("metrics request failed")
                    answer = _response(500, b"internal error\n")
                await stream.send_all(answer)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            await trio.aclose_forcefully(stream)

    def answer(self, head: bytes) -> bytes:
        """The whole HTTP response to one request head (without its blank line)."""
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            return _response(400, b"bad request\n")
        method, target, _ = parts
        headers = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if sep:
                headers[name.strip().lower()] = value.strip()
        path = target.split("?", 1)[0]
        if method not in ("GET", "HEAD"):
            return _response(405, b"only GET and HEAD\n", extra=b"Allow: GET, HEAD\r\n")
        if path == "/metrics":
            encoder, content_type = choose_encoder(headers.get("accept", ""))
            body = encoder(self.registry)
            return _response(200, body, content_type, head_only=method == "HEAD")
        if path == "/ready":
            ready, why = self.collector.readiness()
            return _response(200 if ready else 503, (why + "\n").encode(),
                             head_only=method == "HEAD")
        if path == "/":
            return _response(200, b"kraftpy: /metrics (Prometheus), /ready (readiness)\n",
                             head_only=method == "HEAD")
        return _response(404, b"not found: /metrics and /ready are served\n")


async def _read_head(stream: trio.SocketStream) -> bytes | None:
    """The request line and headers; None when the peer closed or sent too much first."""
    data = b""
    while b"\r\n\r\n" not in data:
        if len(data) > MAX_HEAD:
            await stream.send_all(_response(431, b"request head too large\n"))
            return None
        chunk = await stream.receive_some(4096)
        if not chunk:
            return None
        data += chunk
    return data.split(b"\r\n\r\n", 1)[0]


_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            431: "Request Header Fields Too Large", 500: "Internal Server Error",
            503: "Service Unavailable"}


def _response(status: int, body: bytes, content_type: str = "text/plain; charset=utf-8",
              *, head_only: bool = False, extra: bytes = b"") -> bytes:
    head = (f"HTTP/1.1 {status} {_REASONS[status]}\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n").encode() + extra + b"\r\n"
    return head if head_only else head + body
