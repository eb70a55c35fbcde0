"""A snapshot downloaded from the leader, chunk by chunk, and installed atomically.

The follower's side of FetchSnapshot (the core's `WriteSnapshotChunk` and `InstallSnapshot`
actions). Bytes go to a partial file named as Kafka's `Snapshots.createTempFile` names it,
`<end offset>-<epoch>-<random>.checkpoint.part`; a chunk at position 0 starts a new one (the
old one is deleted); a chunk anywhere but the partial file's end is refused. `install` fsyncs
it, checks that it reads back whole (header, footer, every CRC), renames it to
`<end offset>-<epoch>.checkpoint` and fsyncs the directory, so a crash at any moment leaves a
partial file (deleted at the next start) or a whole snapshot, never a broken one.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

from kraftpy.controller.log.files import fsync_dir
from kraftpy.controller.log.snapshots import (
    PART_SUFFIX,
    Snapshot,
    SnapshotError,
    SnapshotId,
    check_snapshot,
)


class SnapshotDownloadError(RuntimeError):
    """A chunk or a finished download that cannot be used; the message says why."""


class SnapshotDownload:
    """At most one partial snapshot file in `directory` at a time."""

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.snapshot_id: tuple[int, int] | None = None
        self.path: Path | None = None
        self.size = 0
        self._fd: int | None = None

    def write(self, snapshot_id: tuple[int, int], position: int, data: bytes) -> None:
        """Add a chunk at `position` of the snapshot's file."""
        if position == 0:
            self.abandon()
            stem = SnapshotId(*snapshot_id).file_name.removesuffix(".checkpoint")
            while True:  # as Java's createTempFile: prefix, an unsigned random long, suffix
                path = self.directory / f"{stem}-{secrets.randbits(64)}{PART_SUFFIX}"
                try:
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                    break
                except FileExistsError:
                    continue
            self._fd, self.path, self.snapshot_id, self.size = fd, path, snapshot_id, 0
        elif self._fd is None or self.snapshot_id != snapshot_id or self.size != position:
            raise SnapshotDownloadError(
                f"snapshot chunk of {SnapshotId(*snapshot_id).file_name} at position "
                f"{position}, but the partial file holds "
                + (f"{self.size} bytes of {SnapshotId(*self.snapshot_id).file_name}"
                   if self.snapshot_id is not None else "nothing"))
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)  # type: ignore[arg-type]
            view = view[written:]
        self.size += len(data)

    def install(self, snapshot_id: tuple[int, int]) -> tuple[Snapshot, int]:
        """Freeze the finished download as `<id>.checkpoint`: (the snapshot read back, its
        size in bytes). Raises `SnapshotDownloadError` (the partial file deleted) when it is
        not the snapshot asked for or does not read back whole."""
        if self._fd is None or self.snapshot_id != snapshot_id or self.path is None:
            raise SnapshotDownloadError(
                f"install of {SnapshotId(*snapshot_id).file_name}, which was not downloaded")
        path, size = self.path, self.size
        try:
            os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
            sid = SnapshotId(*snapshot_id)
            snapshot = check_snapshot(path, sid)
        except (OSError, SnapshotError) as exc:
            self.abandon()
            raise SnapshotDownloadError(f"the downloaded snapshot is not whole: {exc}") from None
        final = self.directory / sid.file_name
        os.replace(path, final)
        fsync_dir(self.directory)
        snapshot.path = final
        self.snapshot_id, self.path, self.size = None, None, 0
        return snapshot, size

    def abandon(self) -> None:
        """Drop the partial file, if any (a download begun anew, or the node stopping)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if self.path is not None:
            self.path.unlink(missing_ok=True)
        self.snapshot_id, self.path, self.size = None, None, 0
