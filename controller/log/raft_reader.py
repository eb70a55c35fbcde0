"""The metadata log as the raft leader reads it to answer observers' Fetch and FetchSnapshot."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from kraftpy.controller.log.snapshots import SnapshotId, list_snapshots

if TYPE_CHECKING:
    from kraftpy.controller.log.storage import MetadataStorage

METADATA_PARTITION = "__cluster_metadata-0"


class RaftLogReader:
    """What the raft leader reads of the metadata log for observers' Fetch and FetchSnapshot.

    Reads files only (segments below the high watermark, whole snapshots), never what is
    pending, so it may run on the event loop between commit rounds; the snapshot list is read
    from the directory, where a snapshot appears only once it is whole (renamed into place).
    """

    def __init__(self, storage: MetadataStorage) -> None:
        self.storage = storage
        self.directory = storage.log_dir / METADATA_PARTITION

    @property
    def log_start_offset(self) -> int:
        return self.storage.metadata.log_start_offset

    def leader_epochs(self) -> list[tuple[int, int]]:
        """(epoch, start offset) of every leader epoch in the log, oldest first."""
        return list(self.storage.metadata.leader_epochs)

    def snapshot_ids(self) -> list[SnapshotId]:
        """Every whole snapshot in the partition directory, oldest first."""
        try:
            return [sid for sid, _ in list_snapshots(self.directory)]
        except FileNotFoundError:
            return []

    def read(self, start_offset: int, high_watermark: int, max_bytes: int) -> bytes | None:
        return self.storage.metadata.read_raw(start_offset, high_watermark, max_bytes)

    def read_snapshot(self, snapshot_id: SnapshotId, position: int, max_bytes: int
                      ) -> tuple[int, bytes] | None:
        """(the snapshot file's size, its bytes from `position`), or None when it is gone."""
        try:
            with open(self.directory / snapshot_id.file_name, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if 0 <= position < size:
                    f.seek(position)
                    return size, f.read(max(0, min(max_bytes, size - position)))
                return size, b""
        except FileNotFoundError:
            return None
