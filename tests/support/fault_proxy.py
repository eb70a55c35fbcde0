"""A TCP fault proxy for network-partition tests: one listening port per directed link.

    proxy = FaultProxy()                           # its asyncio loop runs in a thread
    port = proxy.link("1->2", ("127.0.0.1", 9093)) # node 1 reaches node 2 through `port`
    proxy.cut("1->2")                              # the link drops: connections close,
    proxy.heal("1->2")                             # new ones are refused until healed
    proxy.close()

A cut closes every connection on the link at once and accepts new ones only to close them,
so a request in flight gets no answer (the sender sees the connection drop), as across a
partition, and nothing crosses until the link heals. Each node's `controller.quorum.voters`
names, for each peer, the port of its own link to that peer (`quorum_through_proxy`).

A link made with `kafka=True` reads the Kafka frames that cross it, so that a broker behind it
can be made to behave wrongly, one fault at a time (`support/wire_faults.py`):

    port = proxy.link("broker", ("127.0.0.1", 9092), kafka=True)
    proxy.set_fault("broker", RewriteError(PRODUCE, "OUT_OF_ORDER_SEQUENCE_NUMBER", "NONE"))
    proxy.set_fault("broker", None)                # back to forwarding every byte as it came

Requests and answers the fault has no interest in cross as they came; the others are decoded
with the project's codecs, changed, and encoded again. Answers reach the client in the order
of its requests, also when the fault answers one itself.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.server import HOST, KraftpyServer, free_port


@dataclass
class _Link:
    target: tuple[str, int]
    port: int
    cut: bool = False
    writers: set[asyncio.StreamWriter] = field(default_factory=set)
    server: Any = None
    kafka: bool = False
    fault: Any = None  # a support.wire_faults.WireFault, on a kafka link


class FaultProxy:
    """Directed links between nodes, each one that can be cut and healed."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._links: dict[str, _Link] = {}
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="fault-proxy")
        self._thread.start()

    def _call(self, coro: Any, timeout: float = 10.0) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    def link(self, name: str, target: tuple[str, int], port: int | None = None, *,
             kafka: bool = False) -> int:
        """Listen for the link `name` forwarding to `target`; its port. A `kafka` link reads
        the Kafka frames crossing it and applies the fault set with `set_fault`."""
        link = _Link(target, port or free_port(), kafka=kafka)
        self._links[name] = link
        self._call(self._listen(link))
        return link.port

    def set_fault(self, name: str, fault: Any) -> None:
        """The fault of a kafka link from its next frame on (None: forward as is)."""
        link = self._links[name]
        assert link.kafka, f"{name} is not a kafka link"
        link.fault = fault

    async def _listen(self, link: _Link) -> None:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            if link.cut:
                writer.close()
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(*link.target)
            except OSError:
                writer.close()
                return
            link.writers.update((writer, up_writer))
            if link.kafka:
                from support.wire_faults import KafkaPipe

                await KafkaPipe(link, reader, writer, up_reader, up_writer).run()
                return
            await asyncio.gather(self._pipe(link, reader, up_writer),
                                 self._pipe(link, up_reader, writer))

        link.server = await asyncio.start_server(accept, HOST, link.port)

    async def _pipe(self, link: _Link, reader: asyncio.StreamReader,
                    writer: asyncio.StreamWriter) -> None:
        try:
            while not link.cut:
                data = await reader.read(65536)
                if not data or link.cut:
                    break
                writer.write(data)
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError):
            pass
        finally:
            link.writers.discard(writer)
            writer.close()

    def cut(self, *names: str) -> None:
        """Drop these links now: open connections close, new ones are refused."""
        async def run() -> None:
            for name in names:
                link = self._links[name]
                link.cut = True
                for writer in list(link.writers):
                    with suppress(Exception):
                        writer.transport.abort()
                link.writers.clear()

        self._call(run())

    def heal(self, *names: str) -> None:
        for name in names:
            self._links[name].cut = False

    def links_of(self, node: int) -> list[str]:
        """Every link into and out of `node` (isolating it cuts them all)."""
        return [n for n in self._links if str(node) in n.split("->")]

    def close(self) -> None:
        async def run() -> None:
            for link in self._links.values():
                link.cut = True
                for writer in list(link.writers):
                    with suppress(Exception):
                        writer.transport.abort()
                if link.server is not None:
                    link.server.close()

        with suppress(Exception):
            self._call(run())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)


def quorum_through_proxy(root: Path, proxy: FaultProxy, count: int = 3,
                         overrides: Mapping[str, str] | None = None
                         ) -> list[KraftpyServer]:
    """`count` servers (not started) forming one static quorum in which node i reaches node j
    only through the proxy's link "i->j": each node's `controller.quorum.voters` names itself
    at its own CONTROLLER port and every peer at the port of its link to that peer."""
    import uuid

    from kraftpy.protocol.uuid import kafka_uuid_str

    ports = [(free_port(), free_port()) for _ in range(count)]
    cluster_id = kafka_uuid_str(uuid.uuid4())
    links = {(i, j): proxy.link(f"{i}->{j}", (HOST, ports[j - 1][1]))
             for i in range(1, count + 1) for j in range(1, count + 1) if i != j}
    servers = []
    for i, (client, controller) in enumerate(ports, start=1):
        voters: Sequence[str] = [
            f"{j}@{HOST}:{controller if j == i else links[(i, j)]}"
            for j in range(1, count + 1)]
        props = {"node.id": str(i), "controller.quorum.voters": ",".join(voters),
                 "cluster.id": cluster_id, **(overrides or {})}
        servers.append(KraftpyServer(Path(root) / f"node{i}", props, client_port=client,
                                     controller_port=controller))
    return servers
