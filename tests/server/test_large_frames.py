"""Large frames: read once into one buffer of their size (memory twice the frame, not four
times), and bounded all together by `queued.max.request.bytes`, as Kafka bounds them."""

from __future__ import annotations

import gc
import struct
import tracemalloc

import pytest
import trio
from kraftpy.controller.config import ConfigError
from kraftpy.protocol.framing import encode_request
from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
from kraftpy.protocol.messages.sasl_authenticate_request import SaslAuthenticateRequest
from support.server_shell import Client, running_shell, shell_config

MIB = 1 << 20
ILLEGAL_SASL_STATE = 34


def _frame(body_bytes: int, correlation: int = 1) -> bytes:
    """A valid SaslAuthenticate v1 of about `body_bytes` (answered ILLEGAL_SASL_STATE)."""
    return encode_request(SaslAuthenticateRequest(auth_bytes=b"x" * body_bytes), 1,
                          correlation, "big")


async def _send_in_pieces(client: Client, data: bytes, piece: int = MIB) -> None:
    view = memoryview(data)
    for at in range(0, len(view), piece):
        await client.send(view[at:at + piece])


def _answer_code(frame: bytes | None) -> int:
    assert frame is not None, "closed instead of answered"
    return struct.unpack_from(">h", frame, 4)[0]  # after the correlation id (header v0)


@pytest.mark.parametrize("garbage", [False, True])
async def test_a_large_frame_costs_twice_its_size_not_four_times(garbage: bool) -> None:
    size = 24 * MIB
    frame = _frame(size)
    if garbage:  # a body that does not decode: the connection is closed after reading it
        frame = frame[:-size] + b"\xff" * size + b"\x00"
        frame = struct.pack(">i", len(frame) - 4) + frame[4:]
    async with running_shell() as (server, _):
        c = await Client.connect(server, "PLAINTEXT")
        gc.collect()
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_send_in_pieces, c, frame)
                answer = await c.frame()
            peak = tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
        assert (answer is None) == garbage
        if not garbage:
            assert _answer_code(answer) == ILLEGAL_SASL_STATE
        # the buffer, then the bytes the decoders read (and the field they decode); the
        # pieces joined and sliced cost 3x here before.
        assert peak < 2.2 * len(frame), peak / len(frame)


async def test_a_large_frame_in_a_pipeline_is_answered_in_order() -> None:
    small = encode_request(ApiVersionsRequest(), 0, 1, "x")
    big = _frame(3 * MIB, correlation=2)
    async with running_shell() as (server, _):
        c = await Client.connect(server, "PLAINTEXT")
        await c.send(small + big[:1000])
        await c.send(big[1000:] + small.replace(b"\x00\x00\x00\x01", b"\x00\x00\x00\x03", 1))
        got = [await c.frame() for _ in range(3)]
        assert [struct.unpack_from(">i", f)[0] for f in got if f] == [1, 2, 3]
        assert _answer_code(got[1]) == ILLEGAL_SASL_STATE


async def test_queued_max_request_bytes_holds_back_large_frames_until_memory_is_freed() -> None:
    """One connection holds the whole bound with a frame it stops sending; a second large frame
    waits unread until the first connection goes; small requests are not held back."""
    limits = {"socket.request.max.bytes": str(2 * MIB), "queued.max.request.bytes": str(2 * MIB)}
    async with running_shell(**limits) as (server, _):
        hog = await Client.connect(server, "PLAINTEXT")
        first = _frame(2 * MIB - 17)
        assert len(first) == 4 + 2 * MIB  # the whole bound
        await hog.send(first[:len(first) // 2])  # 1 MiB of a 2 MiB frame, then nothing
        await trio.sleep(0.2)
        assert server.request_memory.available <= 0
        waiting = await Client.connect(server, "PLAINTEXT")
        second = _frame(MIB)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_send_in_pieces, waiting, second, 64 << 10)
            with trio.move_on_after(0.5) as held:
                await waiting.frame()
            assert held.cancelled_caught, "a frame was read beyond queued.max.request.bytes"
            small = await Client.connect(server, "PLAINTEXT")
            assert (await small.request(ApiVersionsRequest(), 0)).error_code == 0
            await hog.aclose()  # its half frame is dropped and its memory given back
            assert _answer_code(await waiting.frame()) == ILLEGAL_SASL_STATE
        assert server.request_memory.available == 2 * MIB


async def test_without_a_bound_large_frames_are_not_held_back() -> None:
    async with running_shell(**{"socket.request.max.bytes": str(2 * MIB)}) as (server, _):
        hog = await Client.connect(server, "PLAINTEXT")
        first = _frame(2 * MIB - 100)
        await hog.send(first[:len(first) // 2])
        other = await Client.connect(server, "PLAINTEXT")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_send_in_pieces, other, _frame(MIB))
            assert _answer_code(await other.frame()) == ILLEGAL_SASL_STATE


def test_queued_max_request_bytes_is_kafkas_setting() -> None:
    assert shell_config().queued_max_request_bytes == -1  # Kafka's default: no bound
    assert shell_config(**{"queued.max.request.bytes": "0"}).queued_max_request_bytes == 0
    assert shell_config(**{"queued.max.request.bytes": str(200 << 20)}
                        ).queued_max_request_bytes == 200 << 20
    with pytest.raises(ConfigError, match="queued.max.request.bytes: 1000 must be larger or "
                                          "equal to socket.request.max.bytes"):
        shell_config(**{"queued.max.request.bytes": "1000"})
    with pytest.raises(ConfigError, match="queued.max.request.bytes"):
        shell_config(**{"queued.max.request.bytes": "lots"})
