"""FetchSnapshot chunks as regions of the snapshot file: framed like bytes, sent with sendfile.

What each case gets: a region reads back the file's bytes; a position past the end is an
empty region (the core answers POSITION_OUT_OF_RANGE); a missing file is None (
SNAPSHOT_NOT_FOUND); a file deleted after the answer was encoded is still sent whole; a file
cut short meanwhile closes the connection rather than sending a frame shorter than its size
prefix; a region dropped unsent closes its descriptor; a TLS connection gets the same bytes
read through Python."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
import trio
from kraftpy.controller.log.file_region import FileRegion, open_region
from kraftpy.controller.server import _joined, _SocketIO
from kraftpy.protocol.framing import SplicedFrame, decode_response, frame_response
from kraftpy.protocol.messages.fetch_snapshot_response import (
    FetchSnapshotResponse,
    PartitionSnapshot,
    SnapshotId,
    TopicSnapshot,
)

DATA = bytes(range(256)) * 4000  # ~1 MB: more than one socket buffer


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "00000000000000000100-0000000002.checkpoint"
    path.write_bytes(DATA)
    return path


def _closed(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return True
    return False


def _answer(records: object) -> FetchSnapshotResponse:
    return FetchSnapshotResponse(topics=[TopicSnapshot(name="__cluster_metadata", partitions=[
        PartitionSnapshot(index=0, snapshot_id=SnapshotId(end_offset=100, epoch=2),
                          size=len(DATA), position=1000,
                          unaligned_records=records)])])  # type: ignore[arg-type]


def test_a_region_is_the_files_bytes_clamped_to_the_file(tmp_path: Path) -> None:
    path = _file(tmp_path)
    size, region = open_region(path, 1000, 5000)  # type: ignore[misc]
    assert (size, len(region)) == (len(DATA), 5000)
    fd = region.fd
    assert region.read() == DATA[1000:6000] and _closed(fd)
    size, tail = open_region(path, len(DATA) - 10, 5000)  # type: ignore[misc]
    assert tail.read() == DATA[-10:]
    _, past = open_region(path, len(DATA) + 7, 5000)  # type: ignore[misc]
    assert len(past) == 0 and past.read() == b""
    assert open_region(tmp_path / "missing.checkpoint", 0, 10) is None


def test_a_region_dropped_unsent_closes_its_descriptor(tmp_path: Path) -> None:
    _, region = open_region(_file(tmp_path), 0, 10)  # type: ignore[misc]
    fd = region.fd
    del region
    assert _closed(fd)


def test_a_framed_answer_with_a_region_is_the_same_bytes(tmp_path: Path) -> None:
    path = _file(tmp_path)
    plain = frame_response(7, True, _answer(DATA[1000:9000]), 1)
    _, region = open_region(path, 1000, 8000)  # type: ignore[misc]
    spliced = frame_response(7, True, _answer(region), 1)
    assert type(spliced) is SplicedFrame and len(spliced) == len(plain)
    assert spliced.read() == plain
    _, region = open_region(path, 1000, 8000)  # type: ignore[misc]
    assert _joined([b"ab", frame_response(7, True, _answer(region), 1), b"cd"]) == \
        b"ab" + plain + b"cd"  # what a TLS connection sends
    _, answer = decode_response(plain[4:], 59, 1)
    assert answer.topics[0].partitions[0].unaligned_records == DATA[1000:9000]


async def _received_through_a_socket(answers: list[object]) -> tuple[bytes, bool]:
    """What the peer of a `_SocketIO` receives of `answers`, and whether sending failed."""
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    got = bytearray()
    failed = False

    async def read_all() -> None:
        theirs.setblocking(False)
        while True:
            await trio.lowlevel.wait_readable(theirs)
            data = theirs.recv(1 << 20)
            if not data:
                return
            got.extend(data)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_all)
        io = object.__new__(_SocketIO)
        io.fd = ours.fileno()
        try:
            await io.send(answers)  # type: ignore[arg-type]
        except trio.BrokenResourceError:
            failed = True
        ours.close()
    theirs.close()
    return bytes(got), failed


async def test_the_server_sends_a_region_from_the_file(tmp_path: Path) -> None:
    path = _file(tmp_path)
    plain = frame_response(7, True, _answer(DATA[1000:]), 1)
    _, region = open_region(path, 1000, len(DATA))  # type: ignore[misc]
    spliced = frame_response(7, True, _answer(region), 1)
    fd = region.fd
    path.unlink()  # a newer snapshot replaced it meanwhile: the open file is still sent
    got, failed = await _received_through_a_socket([b"before", spliced, b"after"])
    assert not failed and got == b"before" + plain + b"after"
    assert _closed(fd)


async def test_a_file_cut_short_fails_the_send_not_the_frame_size(tmp_path: Path) -> None:
    path = _file(tmp_path)
    _, region = open_region(path, 0, len(DATA))  # type: ignore[misc]
    spliced = frame_response(7, True, _answer(region), 1)
    with open(path, "r+b") as f:
        f.truncate(1000)
    got, failed = await _received_through_a_socket([spliced])
    assert failed and len(got) < len(spliced)


def test_a_region_of_a_file_cut_short_is_an_error_when_read(tmp_path: Path) -> None:
    path = _file(tmp_path)
    _, region = open_region(path, 0, 5000)  # type: ignore[misc]
    with open(path, "r+b") as f:
        f.truncate(100)
    with pytest.raises(OSError, match="ended"):
        region.read()
    assert isinstance(region, FileRegion) and region.fd == -1
    _, region = open_region(path, 0, 50)  # type: ignore[misc]
    _, cut = open_region(_file(tmp_path), 0, len(DATA))  # type: ignore[misc]
    with open(path, "r+b") as f:
        f.truncate(10)
    answers = [frame_response(7, True, _answer(region), 1),
               frame_response(8, True, _answer(cut), 1)]
    with pytest.raises(trio.BrokenResourceError, match="could not be read"):
        _joined(answers)  # a TLS connection's send: the connection ends, not the server
