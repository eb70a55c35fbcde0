"""The plain-socket receive: yield, then read; a connection closed meanwhile is never read."""

from __future__ import annotations

import os

import pytest
import trio
from kraftpy.controller import server as server_module


async def _pair() -> tuple[trio.SocketStream, trio.SocketStream]:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    port = listener.socket.getsockname()[1]
    client = await trio.open_tcp_stream("127.0.0.1", port)
    served = await listener.accept()
    await listener.aclose()
    return client, served


async def test_bytes_already_there_and_bytes_that_come_later_are_read() -> None:
    client, served = await _pair()
    io = server_module._SocketIO(served)
    await client.send_all(b"first")
    assert await io.receive() == b"first"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client.send_all, b"later")
        assert await io.receive() == b"later"  # waits for readability
    await client.aclose()
    assert await io.receive() == b""  # the client closed
    await served.aclose()


async def test_a_socket_closed_during_the_yield_is_not_read(tmp_path, monkeypatch) -> None:
    """Another task (the idle reaper, drain) closes the socket while the receive is parked at
    its yield, and the freed descriptor number goes to a file: the receive must not read it.
    The close is done inside the yield itself, as trio may run the tasks in either order."""
    client, served = await _pair()
    io = server_module._SocketIO(served)
    await client.send_all(b"pending")
    secret = tmp_path / "secret"
    secret.write_bytes(b"not network data")
    opened: list[int] = []
    real_checkpoint = trio.lowlevel.checkpoint

    async def yield_while_another_task_closes() -> None:
        if not opened:
            served.socket.close()  # what SocketStream.aclose does first
            opened.append(os.open(secret, os.O_RDONLY))  # likely takes the freed number
        await real_checkpoint()

    monkeypatch.setattr(trio.lowlevel, "checkpoint", yield_while_another_task_closes)
    try:
        with pytest.raises(trio.ClosedResourceError):
            await io.receive()
    finally:
        monkeypatch.undo()
        for fd in opened:
            os.close(fd)
        await client.aclose()
