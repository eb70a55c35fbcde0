"""FrameReader against a plain reference splitter, under every way a stream can be cut up."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.framing import FrameReader

payloads = st.lists(st.binary(max_size=300), max_size=12)


def _stream(frames: list[bytes]) -> bytes:
    return b"".join(struct.pack(">i", len(f)) + f for f in frames)


def _cut(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    return [data[a:b] for a, b in zip(points, points[1:], strict=False)]


@settings(max_examples=300, deadline=None)
@given(payloads, st.lists(st.integers(min_value=0, max_value=10_000), max_size=20),
       st.sampled_from([bytes, bytearray, memoryview]))
def test_frames_come_out_whole_and_in_order_however_the_bytes_arrive(frames, cuts, kind):
    data = _stream(frames)
    reader = FrameReader(max_size=1000)
    got: list[bytes] = []
    for chunk in _cut(data, cuts):
        reader.feed(kind(chunk))
        while (frame := reader.next_frame()) is not None:
            assert type(frame) is bytes
            got.append(frame)
    assert got == frames
    assert reader.buffered == 0


@given(payloads, st.binary(min_size=1, max_size=3))
def test_an_incomplete_tail_stays_buffered(frames, tail):
    reader = FrameReader()
    reader.feed(_stream(frames) + struct.pack(">i", 50) + tail)
    assert [reader.next_frame() for _ in frames] == frames
    assert reader.next_frame() is None
    assert reader.buffered == 4 + len(tail)
    reader.feed(b"x" * (50 - len(tail)))
    assert reader.next_frame() == tail + b"x" * (50 - len(tail))


def test_a_large_frame_in_many_pieces_is_joined_once_whole() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    data = struct.pack(">i", len(body)) + body + struct.pack(">i", 1) + b"!"
    reader = FrameReader()
    for i in range(0, len(data), 65536):
        reader.feed(data[i:i + 65536])
        if i + 65536 < len(body):
            assert reader.next_frame() is None
    assert reader.next_frame() == body
    assert reader.next_frame() == b"!"
    assert reader.next_frame() is None


@pytest.mark.parametrize(("size", "why"), [(-1, "negative frame size"),
                                           (1001, "larger than the maximum")])
def test_a_bad_size_is_refused_before_its_body_arrives(size: int, why: str) -> None:
    reader = FrameReader(max_size=1000)
    reader.feed(struct.pack(">i", 3) + b"abc" + struct.pack(">i", size)[:2])
    assert reader.next_frame() == b"abc"
    assert reader.next_frame() is None
    reader.feed(struct.pack(">i", size)[2:])
    with pytest.raises(DecodeError, match=why):
        reader.next_frame()


@settings(max_examples=200, deadline=None)
@given(payloads, st.integers(min_value=1, max_value=999), st.integers(min_value=0, max_value=2000),
       st.lists(st.integers(min_value=0, max_value=10_000), max_size=6))
def test_a_large_frame_still_arriving_is_handed_over_once(frames, size, cut, cuts):
    """After next_frame() gives None, take_incomplete hands over the frame that is arriving
    (its size and what came of it) if it is large enough; the reader is then empty."""
    big = bytes(range(256)) * 4
    big = big[:size]
    data = _stream(frames) + struct.pack(">i", size) + big
    arrived = data[:len(data) - 1 - cut % (size + 4)]  # the big frame is never complete
    reader = FrameReader(max_size=1000)
    for piece in _cut(arrived, cuts):
        reader.feed(piece)
    assert [reader.next_frame() for _ in frames] == frames
    assert reader.next_frame() is None
    before = reader.buffered
    assert reader.take_incomplete(size + 1) is None and reader.buffered == before
    taken = reader.take_incomplete(size)
    if before < 4:
        assert taken is None
        return
    got, head = taken
    assert got == size and big.startswith(head) and len(head) == before - 4
    assert reader.buffered == 0 and reader.next_frame() is None
    reader.feed(struct.pack(">i", 2) + b"ok")  # goes on with the next frame
    assert reader.next_frame() == b"ok"


def test_a_whole_frame_is_not_taken() -> None:
    reader = FrameReader(max_size=1000)
    reader.feed(struct.pack(">i", 3) + b"abc")
    assert reader.take_incomplete(1) is None
    assert reader.next_frame() == b"abc"
