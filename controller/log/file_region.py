"""Bytes of a file that a response carries without reading them: sent with sendfile.

A FetchSnapshot answer is up to 8 MiB of a snapshot file. Read into memory, joined into the
frame and written to the socket, each chunk was copied three times on the event loop; a
Kafka controller hands the file region to the socket (FileRecords.writeTo, sendfile). A
`FileRegion` is such a region: an open descriptor (so a snapshot deleted meanwhile is still
sent whole), where it starts and how long it is. The codec sees only its length; the server
sends it from the file (`server._SocketIO`), or reads it (`read`) where the bytes must pass
through Python (TLS). It closes its descriptor once sent, or when dropped unsent.
"""

from __future__ import annotations

import os
from pathlib import Path


class FileRegion:
    """`length` bytes at `offset` of the file open on `fd` (owned: closed by `close`)."""

    __slots__ = ("fd", "offset", "length")

    def __init__(self, fd: int, offset: int, length: int) -> None:
        self.fd = fd
        self.offset = offset
        self.length = length

    def __len__(self) -> int:
        return self.length

    def read(self) -> bytes:
        """The bytes themselves, then closed; a file cut short meanwhile is an OSError."""
        try:
            parts, at, left = [], self.offset, self.length
            while left > 0:
                data = os.pread(self.fd, left, at)
                if not data:
                    raise OSError(f"the file ended {left} bytes before the region's end")
                parts.append(data)
                at += len(data)
                left -= len(data)
            return b"".join(parts)
        finally:
            self.close()

    def close(self) -> None:
        fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        self.close()


def open_region(path: Path, position: int, max_bytes: int) -> tuple[int, FileRegion] | None:
    """(the file's size, its region of at most `max_bytes` from `position`), or None when
    the file is not there."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
    except OSError:
        os.close(fd)
        return None
    start = min(max(position, 0), size)
    return size, FileRegion(fd, start, max(0, min(max_bytes, size - start)))
