"""The snapshots of `__cluster_metadata-0`: served, downloaded, written, and what they let go.

`SnapshotFiles` is the log room's side of snapshots, knowing records only as bytes:
- serving: a chunk of a snapshot file for a FetchSnapshot answer, read from the file (or,
  for an answer sent on a socket, its region of the file, sent from there);
- downloading: a follower's chunks into a partial file, installed whole (`SnapshotDownload`);
- writing: records already taken from a committed image, encoded into a new snapshot file
  (`write`, in a worker thread: `.part`, fsync, rename, directory fsync), then what it lets go:
  without a retention policy the log below the newest snapshot and all but one older snapshot
  (kraftpy's default); with `metadata.max.retention.*`, Kafka's retention rules;
- the policy asking for one: Kafka's two settings, bytes of log appended and time since the
  last snapshot (`metadata.log.max.record.bytes.between.snapshots`, `...snapshot.interval.ms`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftpy.controller.log import forked
from kraftpy.controller.log.file_region import FileRegion, open_region
from kraftpy.controller.log.retention import RetentionPolicy, SnapshotInfo, snapshots_to_drop
from kraftpy.controller.log.snapshot_download import SnapshotDownload
from kraftpy.controller.log.snapshots import (
    Snapshot,
    SnapshotId,
    SnapshotValues,
    check_snapshot,
    delete_snapshots_before,
    list_snapshots,
    newest_whole_snapshot,
    read_snapshot_timestamp,
    write_snapshot,
    write_snapshot_in_parts,
)

log = logging.getLogger("kraftpy.log")

DEFAULT_SNAPSHOT_BYTES = 20 * 1024 * 1024
DEFAULT_SNAPSHOT_INTERVAL_MS = 60 * 60 * 1000


@dataclass
class SnapshotPolicy:
    """Kafka's two triggers: bytes appended since the last snapshot, and time since it."""

    max_record_bytes: int = DEFAULT_SNAPSHOT_BYTES
    interval_ms: int = DEFAULT_SNAPSHOT_INTERVAL_MS

    def due(self, *, bytes_since: int, ms_since: int, new_records: bool) -> bool:
        if not new_records:
            return False
        if bytes_since >= self.max_record_bytes:
            return True
        return self.interval_ms > 0 and ms_since >= self.interval_ms


class SnapshotFiles:
    """The snapshot files of one metadata partition directory, beside its log."""

    def __init__(self, directory: Path, log: Any, *, policy: SnapshotPolicy | None = None,
                 retention: RetentionPolicy | None = None,
                 newest: Snapshot | None = None) -> None:
        self.directory = Path(directory)
        self.log = log  # the PartitionLog whose segments a new snapshot lets go
        self.policy = policy or SnapshotPolicy()
        self.retention = retention
        self.newest = newest  # the newest whole snapshot, as read at open or written since
        self.download = SnapshotDownload(self.directory)
        self._lock = threading.Lock()  # retention's list, between a writer thread and the loop
        self._retained: list[tuple[SnapshotId, SnapshotInfo]] = []
        if retention is not None and self.directory.is_dir():
            self._retained = [(sid, SnapshotInfo(sid.end_offset, path.stat().st_size,
                                                 read_snapshot_timestamp(path)))
                              for sid, path in list_snapshots(self.directory)]
        self.last_offset = newest.snapshot_id.end_offset if newest and newest.snapshot_id else 0
        self.last_ms: int | None = None

    # --- serving and downloading -------------------------------------------------------------
    def ids(self) -> list[tuple[int, int]]:
        """(end offset, epoch) of every snapshot file but the raft bootstrap one (0-0)."""
        return [(sid.end_offset, sid.epoch) for sid, _ in list_snapshots(self.directory)
                if sid.end_offset > 0]

    def read_chunk(self, snapshot_id: tuple[int, int], position: int, max_bytes: int
                   ) -> tuple[int, bytes] | None:
        """(file size, up to `max_bytes` from `position`), or None when it is not here."""
        path = self.directory / SnapshotId(*snapshot_id).file_name
        try:
            with open(path, "rb") as f:
                size = f.seek(0, 2)
                f.seek(max(position, 0))
                return size, f.read(max_bytes)
        except OSError:
            return None

    def region_chunk(self, snapshot_id: tuple[int, int], position: int, max_bytes: int
                     ) -> tuple[int, FileRegion] | None:
        """`read_chunk` for an answer that goes to a socket: the bytes stay in the file,
        sent from there (`file_region`)."""
        return open_region(self.directory / SnapshotId(*snapshot_id).file_name, position,
                           max_bytes)

    def write_chunk(self, snapshot_id: tuple[int, int], position: int, data: bytes) -> None:
        self.download.write(snapshot_id, position, data)

    def install(self, snapshot_id: tuple[int, int]) -> tuple[Snapshot, int]:
        """The finished download becomes the newest snapshot; every older one goes (the log
        it covers is dropped by the caller: it now starts at the snapshot's end)."""
        sid = SnapshotId(*snapshot_id)
        local = self.directory / sid.file_name
        if self.download.snapshot_id != snapshot_id and local.exists():
            # The core may install a snapshot this node holds already (its own, or one
            # downloaded before): its log then starts at that snapshot's end.
            snapshot, size = check_snapshot(local, sid), local.stat().st_size
        else:
            snapshot, size = self.download.install(snapshot_id)
        delete_snapshots_before(self.directory, sid, keep=0)
        with self._lock:
            self.newest = snapshot
            self.last_offset = sid.end_offset
            if self.retention is not None:
                self._retained = [(sid, SnapshotInfo(sid.end_offset, size,
                                                     snapshot.last_contained_log_timestamp))]
        return snapshot, size

    def newest_whole(self) -> Snapshot | None:
        """The newest snapshot that reads back whole (the one replay starts from)."""
        ids = [sid for sid, _ in list_snapshots(self.directory) if sid.end_offset > 0]
        known = self.newest
        if known is not None and ids and known.snapshot_id == ids[-1]:
            return known
        if ids:
            found, _damaged = newest_whole_snapshot(self.directory)
            if found is not None:
                self.newest = found
                return found
        return known

    # --- writing -----------------------------------------------------------------------------
    def due(self, committed: int, now_ms: int) -> bool:
        """Whether the policy asks for a snapshot of the state at `committed`."""
        if self.last_ms is None:
            self.last_ms = now_ms
        return self.policy.due(bytes_since=self._bytes_between(self.last_offset, committed),
                               ms_since=now_ms - self.last_ms,
                               new_records=committed > self.last_offset)

    def retention_due(self, now_ms: int) -> bool:
        return self._retention_drops(now_ms) > 0

    def write(self, snapshot_id: SnapshotId, values: SnapshotValues, *,
              last_contained_log_timestamp: int, now_ms: int,
              control: list[tuple[bytes, bytes]],
              parts: Sequence[tuple[int, SnapshotValues]] | None = None) -> SnapshotId | None:
        """Write a snapshot of committed records (a worker thread may call this), then let go
        of what it covers; the snapshot the log now starts at, if it moved. With `parts`
        ((record count, values) in order, instead of `values`), each part is encoded by a
        forked child of its own (`forked`), all at once."""
        began = time.monotonic()
        if parts is not None:
            write_snapshot_in_parts(self.directory, snapshot_id, parts,
                                    last_contained_log_timestamp=last_contained_log_timestamp,
                                    timestamp=now_ms, control=control,
                                    run=forked.call_in_children)
        else:
            write_snapshot(self.directory, snapshot_id, values,
                           last_contained_log_timestamp=last_contained_log_timestamp,
                           timestamp=now_ms, control=control)
        log.info("snapshot %s written in %.2f s%s", snapshot_id.file_name,
                 time.monotonic() - began, f" ({len(parts)} parts)" if parts else "")
        if self.retention is None:
            self.log.delete_segments_below(snapshot_id.end_offset)
            delete_snapshots_before(self.directory, snapshot_id, keep=1)
            trimmed: SnapshotId | None = snapshot_id
        else:
            size = (self.directory / snapshot_id.file_name).stat().st_size
            with self._lock:
                self._retained.append((snapshot_id, SnapshotInfo(
                    snapshot_id.end_offset, size, last_contained_log_timestamp)))
            trimmed = self.apply_retention(now_ms)
        with self._lock:
            if self.last_offset < snapshot_id.end_offset:
                self.last_offset = snapshot_id.end_offset
            self.last_ms = now_ms
        return trimmed

    def apply_retention(self, now_ms: int) -> SnapshotId | None:
        """Kafka's deleteBeforeSnapshot: the segments wholly below the oldest snapshot kept,
        then the older snapshots; the snapshot the log now starts at (None: nothing went)."""
        dropped = self._retention_drops(now_ms)
        if not dropped:
            return None
        with self._lock:
            keep_from, _ = self._retained[dropped]
            self._retained = self._retained[dropped:]
        self.log.delete_segments_below(keep_from.end_offset)
        delete_snapshots_before(self.directory, keep_from, keep=0)
        log.info("retention: %d older snapshot(s) deleted; the log now starts at or before %d",
                 dropped, keep_from.end_offset)
        return keep_from

    def _retention_drops(self, now_ms: int) -> int:
        with self._lock:
            retained = list(self._retained)
        if self.retention is None or len(retained) < 2:
            return 0
        return snapshots_to_drop([info for _, info in retained],
                                 log_bytes=self.log.size_bytes,
                                 log_bytes_from=self.log.size_from, now_ms=now_ms,
                                 policy=self.retention)

    def _bytes_between(self, start: int, end: int) -> int:
        """Bytes of the log's batches from `start` to `end` (the byte trigger's count)."""
        return max(0, self._bytes_at(end) - self._bytes_at(start))

    def _bytes_at(self, offset: int) -> int:
        total = 0
        for seg in self.log.segments:
            if seg.next_offset <= offset:
                total += seg.size
            elif seg.base_offset < offset:
                total += seg.indexes.position_before(offset)
        return total
