"""The network shell: trio listeners and connections that move Kafka frames, nothing more.

A connection reads size-prefixed frames, hands each to `dispatch` and writes the answer before
reading the next request (one request at a time, responses in order, as Kafka mutes a socket
while its request is processed). A frame that cannot be answered closes that connection with
a log line saying why; other connections are unaffected. A connection silent for
`connections.max.idle.ms` is closed. `drain()` stops accepting, lets every connection finish
the request it is processing, then closes them.

Connection setup is one function, `open_connection`, the place where TLS wrapping and a SASL
gate belong.

Frames a connection's `QuickAnswers` knows (idempotent InitProducerId, controller/api/quick.py)
are answered in one loop, straight from a receive that begins at a frame or from the
FrameReader; the first other frame goes to `dispatch`, so the order of answers is kept.

Only the connection's own task sends on it, so answers need no lock, and sends are not
shielded: the one cancellation is drain's timeout, which closes the connection anyway (a
client then sees the connection drop, never a cut frame followed by more bytes).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import trio
from kraftpy.controller import api
from kraftpy.controller.api.dispatch import CloseConnection, dispatch
from kraftpy.controller.api.quick import QuickAnswers
from kraftpy.controller.config import Endpoint, ServerConfig
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.framing import FrameReader

log = logging.getLogger("kraftpy.server")

RECEIVE_SIZE = 65536
# A frame this large that is still arriving is received into one buffer of its own size.
LARGE_FRAME = RECEIVE_SIZE
MAX_COALESCED = 64


@dataclass
class Connection:
    """An accepted, set-up connection: its stream and the context its requests carry."""

    stream: trio.abc.Stream
    context: api.RequestContext

    @property
    def peer(self) -> str:
        return f"{self.context.client_host}:{self.context.client_port}"


class _StreamIO:
    """Receives and sends on any trio stream (TLS, the SASL exchange's prefixed stream)."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream

    async def receive(self) -> bytes:
        return await self.stream.receive_some(RECEIVE_SIZE)

    async def receive_into(self, view: memoryview) -> int:
        """Receive at most len(view) bytes into view (0: the peer closed)."""
        data = await self.stream.receive_some(len(view))
        view[:len(data)] = data
        return len(data)

    async def send(self, outgoing: list[bytes]) -> None:
        """Send and clear the pending answers."""
        if outgoing:
            data = _joined(outgoing)
            outgoing.clear()
            await self.stream.send_all(data)


def _joined(outgoing: list[Any]) -> bytes:
    """The answers as one bytes object, the regions of files any of them holds read (a file
    cut short meanwhile ends the connection, as a failed send does)."""
    try:
        return b"".join(outgoing)
    except TypeError:
        try:
            return b"".join(a if type(a) is bytes else a.read() for a in outgoing)
        except OSError as exc:
            raise trio.BrokenResourceError(f"an answer's file could not be read: {exc}") \
                from exc


class _SocketIO(_StreamIO):
    """A plain TCP connection, one scheduling point per receive and none per send.

    trio's stream calls checkpoint on both sides of every call (a failed non-blocking
    attempt, then a wait, then a shielded checkpoint after a send that went through at
    once). Here a receive yields once and then reads: by the time the task runs again the
    client's next request has usually arrived (it was answered before the yield), so most
    receives need no wait for readability, which costs trio an epoll registration each time.
    Only an empty socket is waited on. Every receive is still a scheduling point, so a busy
    connection cannot starve the others. A send is one non-blocking write; only a send the
    socket buffer cannot take waits for writability. The descriptor stays owned by the trio
    socket: closing it wakes a wait with ClosedResourceError, and a receive checks that the
    socket is still open before it reads (its number may already belong to another file).
    """

    def __init__(self, stream: trio.SocketStream) -> None:
        super().__init__(stream)
        self.socket = stream.socket
        self.fd = stream.socket.fileno()

    async def receive(self) -> bytes:
        await trio.lowlevel.checkpoint()
        while True:
            if self.socket.fileno() < 0:  # closed meanwhile (idle reaper, drain)
                raise trio.ClosedResourceError("the connection was closed")
            try:
                return os.read(self.fd, RECEIVE_SIZE)
            except BlockingIOError:
                pass
            except OSError as exc:
                raise trio.BrokenResourceError(str(exc)) from exc
            await trio.lowlevel.wait_readable(self.fd)

    async def receive_into(self, view: memoryview) -> int:
        await trio.lowlevel.checkpoint()
        while True:
            if self.socket.fileno() < 0:
                raise trio.ClosedResourceError("the connection was closed")
            try:
                return os.readv(self.fd, (view,))
            except BlockingIOError:
                pass
            except OSError as exc:
                raise trio.BrokenResourceError(str(exc)) from exc
            await trio.lowlevel.wait_readable(self.fd)

    async def send(self, outgoing: list[bytes]) -> None:
        if not outgoing:
            return
        try:
            data = outgoing[0] if len(outgoing) == 1 else b"".join(outgoing)
        except TypeError:
            data = None
        if type(data) is not bytes:  # an answer holds a region of a file
            answers = outgoing[:]
            outgoing.clear()
            await self._send_spliced(answers)
            return
        outgoing.clear()
        await self._send_bytes(data)

    async def _send_bytes(self, data: bytes) -> None:
        try:
            sent = os.write(self.fd, data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            raise trio.BrokenResourceError(str(exc)) from exc
        if sent < len(data):
            await self._send_rest(memoryview(data)[sent:])

    async def _send_rest(self, rest: memoryview) -> None:
        while rest:
            await trio.lowlevel.wait_writable(self.fd)
            try:
                rest = rest[os.write(self.fd, rest):]
            except BlockingIOError:
                continue
            except OSError as exc:
                raise trio.BrokenResourceError(str(exc)) from exc

    async def _send_spliced(self, answers: list[Any]) -> None:
        """Answers some of which hold regions of files (`SplicedFrame`): their bytes as
        usual, each region straight from its file with sendfile, all in order."""
        pending: list[bytes] = []
        try:
            for answer in answers:
                if type(answer) is bytes:
                    pending.append(answer)
                    continue
                for part in answer.parts:
                    if type(part) is bytes:
                        pending.append(part)
                        continue
                    if pending:
                        await self._send_bytes(b"".join(pending))
                        pending = []
                    await self._send_region(part)
            if pending:
                await self._send_bytes(b"".join(pending))
        finally:
            for answer in answers:
                if type(answer) is not bytes:
                    answer.close()

    async def _send_region(self, region: Any) -> None:
        at, left = region.offset, region.length
        while left > 0:
            try:
                sent = os.sendfile(self.fd, region.fd, at, left)
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.fd)
                continue
            except OSError as exc:
                raise trio.BrokenResourceError(str(exc)) from exc
            if sent == 0:  # the file is shorter than when the answer was encoded
                raise trio.BrokenResourceError(
                    f"a file ended {left} bytes before the region being sent")
            at += sent
            left -= sent
        region.close()


class RequestMemory:
    """`queued.max.request.bytes`, as Kafka's SocketServer applies it with its memory pool.

    A frame larger than one receive is read into a buffer of its own size, taken from this
    pool before its body is read and given back once its request is answered (or its
    connection closes). While nothing is left, such frames wait unread (the client's bytes
    stay in the socket buffers); as in Kafka's non-strict pool, a frame is let in whenever
    anything at all is left, so the bound can be overdrawn by one frame (at most
    `socket.request.max.bytes`). A limit of 0 or less is no bound (Kafka's default, -1).
    Frames that arrive whole within one receive (up to RECEIVE_SIZE) are not counted: each
    connection holds at most one receive of them at a time.
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.available = limit
        self._freed = trio.Event()

    async def acquire(self, size: int) -> None:
        if self.limit <= 0:
            return
        while self.available < 1:
            await self._freed.wait()
        self.available -= size

    def release(self, size: int) -> None:
        if self.limit <= 0 or not size:
            return
        self.available += size
        self._freed.set()
        self._freed = trio.Event()


# A hook run on every new connection after the default setup (TLS, SASL): returns the
# connection to serve, or None to drop it.
ConnectionHook = Callable[[Connection, Endpoint], Awaitable[Connection | None]]


class Server:
    def __init__(self, config: ServerConfig, node: api.Node | None = None) -> None:
        self.config = config
        self.node = node
        self.connection_hooks: list[ConnectionHook] = []
        # Run once a served connection has ended (the security layer frees its slot).
        self.close_hooks: list[Callable[[Connection], None]] = []
        self.bound: dict[str, int] = {}
        self._listeners: list[tuple[Endpoint, list[trio.SocketListener]]] = []
        self._listen_scope = trio.CancelScope()
        self._connections_scope: trio.CancelScope | None = None
        self._draining = False
        # Connections waiting for their next request: the idle reaper and drain close these.
        self._idle: dict[trio.SocketStream, tuple[Connection, float]] = {}
        self._open = 0
        self.request_memory = RequestMemory(config.queued_max_request_bytes)
        self._holding: dict[trio.SocketStream, int] = {}  # request_memory held, by connection
        self._all_closed = trio.Event()
        self._all_closed.set()

    # --- listeners ------------------------------------------------------------------------------
    async def bind(self) -> dict[str, int]:
        """Open every listener's socket (port 0 asks the OS); returns the bound ports."""
        for ep in self.config.listeners:
            try:
                listeners = await trio.open_tcp_listeners(ep.port, host=ep.host or None)
            except OSError as exc:
                await self._close_listeners()
                raise OSError(exc.errno, f"cannot listen on {ep}: {exc.strerror}") from None
            self.bound[ep.name] = listeners[0].socket.getsockname()[1]
            self._listeners.append((ep, listeners))
        return dict(self.bound)

    async def _close_listeners(self) -> None:
        for _, listeners in self._listeners:
            for listener in listeners:
                with trio.CancelScope(shield=True):
                    await listener.aclose()
        self._listeners.clear()

    async def serve(self, *, task_status: trio.TaskStatus[dict[str, int]] = trio.TASK_STATUS_IGNORED
                    ) -> None:
        """Accept on the bound listeners until `drain()`, then wait for connections to end."""
        if not self._listeners:
            await self.bind()
        bound = list(self._listeners)
        async with trio.open_nursery() as connections:
            self._connections_scope = connections.cancel_scope
            with self._listen_scope:
                async with trio.open_nursery() as accepting:
                    for ep, listeners in bound:
                        real = Endpoint(ep.name, ep.host, self.bound[ep.name])
                        log.info("listening on %s (%s)", real,
                                 self.config.security_protocol(ep.name))
                        accepting.start_soon(self._accept, listeners, real, connections)
                    accepting.start_soon(self._reap_idle)
                    task_status.started(dict(self.bound))
            await self._close_listeners()

    async def _accept(self, listeners: list[trio.SocketListener], ep: Endpoint,
                      connections: trio.Nursery) -> None:
        async def handler(stream: trio.SocketStream) -> None:
            await self.handle_stream(stream, ep)

        # Connections live in their own nursery so that stopping the accept loop leaves
        # the requests in flight alone.
        await trio.serve_listeners(handler, listeners, handler_nursery=connections)

    # --- connections ----------------------------------------------------------------------------
    async def open_connection(self, stream: trio.SocketStream, ep: Endpoint) -> Connection | None:
        """Everything that happens before the first request: the security layer hooks in here."""
        try:
            host, port = stream.socket.getpeername()[:2]
        except OSError:
            return None
        listener_type = api.CONTROLLER if self.config.is_controller_listener(ep.name) \
            else api.BROKER
        conn = Connection(stream, api.RequestContext(
            listener=ep.name,
            listener_type=listener_type,
            security_protocol=self.config.security_protocol(ep.name),
            client_host=host,
            client_port=port,
        ))
        for hook in self.connection_hooks:
            hooked = await hook(conn, ep)
            if hooked is None:
                return None
            conn = hooked
        return conn

    async def handle_stream(self, stream: trio.SocketStream, ep: Endpoint) -> None:
        if self._draining:
            await trio.aclose_forcefully(stream)
            return
        self._open += 1
        self._all_closed = trio.Event() if self._open == 1 else self._all_closed
        conn = None
        try:
            conn = await self.open_connection(stream, ep)
            if conn is not None:
                await self._serve_connection(conn, stream)
        except (trio.BrokenResourceError, trio.ClosedResourceError, ConnectionError):
            pass
        finally:
            # Shielded: when drain's timeout cancels a busy connection, the bookkeeping below
            # (close hooks free security slots, drain counts open connections) must still run.
            with trio.CancelScope(shield=True):
                await trio.aclose_forcefully(stream)
            if conn is not None:
                for close_hook in self.close_hooks:
                    close_hook(conn)
            self._open -= 1
            if self._open == 0:
                self._all_closed.set()

    async def _serve_connection(self, conn: Connection, raw: trio.SocketStream) -> None:
        reader = FrameReader(self.config.socket_request_max_bytes)
        if conn.stream is raw and type(raw) is trio.SocketStream:
            io: _StreamIO = _SocketIO(raw)
        else:
            io = _StreamIO(conn.stream)  # TLS, or bytes the SASL exchange read ahead
        # Answers to requests that were already buffered go out in one write (pipelining
        # clients); they are still produced one at a time, in order. Only this task sends
        # on the connection, so frames are never interleaved and no lock is needed.
        outgoing: list[bytes] = []
        # Answers the frames it knows (idempotent InitProducerId) in one loop, in order, and
        # hands over the first other one.
        assert self.node is not None
        quick = QuickAnswers.for_connection(self.node, conn.context,
                                            self.config.socket_request_max_bytes)
        try:
            await self._serve_frames(conn, raw, io, reader, quick, outgoing)
        finally:  # a large frame not answered gives its bytes back
            self.request_memory.release(self._holding.pop(raw, 0))

    async def _serve_frames(self, conn: Connection, raw: trio.SocketStream, io: _StreamIO,
                            reader: FrameReader, quick: QuickAnswers | None,
                            outgoing: list[bytes]) -> None:
        node = self.node
        assert node is not None
        context = conn.context
        idle = self._idle
        now = trio.lowlevel.current_clock().current_time  # trio.current_time, resolved once
        next_frame = reader.next_frame
        memory = self.request_memory
        holding = self._holding
        while True:
            try:
                frame = next_frame() if quick is None else quick.frames(next_frame, outgoing)
            except DecodeError as exc:
                await io.send(outgoing)
                log.warning("closing connection from %s on %s: %s",
                            conn.peer, context.listener, exc)
                return
            if frame is None:
                if outgoing:
                    await io.send(outgoing)
                if self._draining:
                    return
                large = reader.take_incomplete(LARGE_FRAME) if reader.buffered >= 4 else None
                if large is not None:
                    await memory.acquire(large[0])
                    holding[raw] = large[0]
                    frame = await self._receive_large(conn, raw, io, *large)
                    if frame is None:
                        return
            if frame is None:
                # Waiting costs no cancel scope per request: `_reap_idle` (and `drain`)
                # close the socket of a connection that waits too long.
                idle[raw] = (conn, now())
                try:
                    data = await io.receive()
                except (trio.ClosedResourceError, trio.BrokenResourceError):
                    return
                finally:
                    del idle[raw]
                if not data:
                    return
                if quick is not None and not reader.buffered:  # data starts with a frame
                    taken = quick.received(data, outgoing)
                    if taken:
                        data = data[taken:]
                reader.feed(data)
                continue
            try:
                outgoing.append(await dispatch(node, frame, context))
                del frame
                if holding:  # a large frame's bytes go back once it is answered
                    memory.release(holding.pop(raw, 0))
            except CloseConnection as exc:
                await io.send(outgoing)
                log.warning("closing connection from %s on %s: %s",
                            conn.peer, context.listener, exc)
                return
            except Exception as exc:  # dispatch answers handler failures; this is a bug
                await io.send(outgoing)
                log.error("closing connection from %s on %s: request failed: %s: %s",
                          conn.peer, context.listener, type(exc).__name__, exc)
                log.debug("traceback of the failure above", exc_info=exc)
                return
            if len(outgoing) >= MAX_COALESCED:
                await io.send(outgoing)

    async def _receive_large(self, conn: Connection, raw: trio.SocketStream, io: _StreamIO,
                             size: int, head: bytes) -> bytes | None:
        """The rest of a frame of `size` bytes whose first bytes are `head`, received straight
        into one buffer of that size (None: the connection closed first). A frame in many
        pieces joined, then sliced, cost three to four times its size; this costs twice, for
        the moment the buffer becomes the bytes the decoders read. The wait for each piece
        counts as idle, as any receive does."""
        buf = bytearray(size)
        got = len(head)
        buf[:got] = head
        del head
        view = memoryview(buf)
        idle = self._idle
        try:
            while got < size:
                idle[raw] = (conn, trio.current_time())
                try:
                    n = await io.receive_into(view[got:])
                except (trio.ClosedResourceError, trio.BrokenResourceError):
                    return None
                finally:
                    del idle[raw]
                if not n:
                    return None
                got += n
        finally:
            view.release()
        return bytes(buf)

    async def _reap_idle(self) -> None:
        """Close connections idle for connections.max.idle.ms (checked every quarter of it)."""
        idle_s = self.config.connections_max_idle_ms / 1000
        while True:
            await trio.sleep(min(idle_s / 4, 1.0))
            now = trio.current_time()
            for raw, idle in list(self._idle.items()):
                conn, since = idle
                if now - since >= idle_s and self._idle.get(raw) is idle:
                    log.info("closing connection from %s on %s: idle for more than "
                             "connections.max.idle.ms (%d ms)", conn.peer,
                             conn.context.listener, self.config.connections_max_idle_ms)
                    await trio.aclose_forcefully(raw)

    # --- shutdown -------------------------------------------------------------------------------
    async def drain(self, timeout_s: float = 30.0) -> None:
        """Stop accepting, let in-flight requests finish and be answered, close everything."""
        self._draining = True
        self._listen_scope.cancel()
        for raw in list(self._idle):
            await trio.aclose_forcefully(raw)
        with trio.move_on_after(timeout_s) as scope:
            await self._all_closed.wait()
        if scope.cancelled_caught:
            log.warning("%d connection(s) still busy after %.0f s; closing them", self._open,
                        timeout_s)
            if self._connections_scope is not None:
                self._connections_scope.cancel()

    @property
    def open_connections(self) -> int:
        return self._open
