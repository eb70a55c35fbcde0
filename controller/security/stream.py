"""Two small stream helpers for the SASL exchange, which reads frames before the server does."""

from __future__ import annotations

import struct

import trio
from kraftpy.protocol.errors import DecodeError

RECEIVE_SIZE = 65536
_SIZE = struct.Struct(">i")


class BufferedReceiver:
    """Whole frames from a stream; whatever was read past the last frame stays available."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self._stream = stream
        self._buf = bytearray()

    async def _fill(self, n: int) -> bool:
        while len(self._buf) < n:
            data = await self._stream.receive_some(RECEIVE_SIZE)
            if not data:
                return False
            self._buf += data
        return True

    async def receive_frame(self, max_size: int) -> bytes | None:
        """The next frame's payload, or None at end of stream. A size that is negative or
        above `max_size` raises DecodeError before anything of that size is read."""
        if not await self._fill(4):
            return None
        (size,) = _SIZE.unpack_from(self._buf, 0)
        if size < 0 or size > max_size:
            raise DecodeError(f"frame size {size} is outside 0..{max_size}", offset=0,
                              field="size")
        if not await self._fill(4 + size):
            return None
        frame = bytes(self._buf[4:4 + size])
        del self._buf[:4 + size]
        return frame

    def leftover(self) -> bytes:
        return bytes(self._buf)


class PrefixedStream(trio.abc.Stream):
    """A stream that first yields bytes already read from it, then reads on."""

    def __init__(self, stream: trio.abc.Stream, prefix: bytes) -> None:
        self.inner = stream
        self._prefix = prefix

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if self._prefix:
            n = len(self._prefix) if max_bytes is None else max_bytes
            data, self._prefix = self._prefix[:n], self._prefix[n:]
            return data
        return await self.inner.receive_some(max_bytes)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def send_eof(self) -> None:
        send_eof = getattr(self.inner, "send_eof", None)
        if send_eof is not None:
            await send_eof()

    async def aclose(self) -> None:
        await self.inner.aclose()
