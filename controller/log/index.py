"""A segment's `.index` and `.timeindex`, in Kafka's layout, kept sparse as Kafka keeps them.

`.index`: 8-byte entries (int32 offset relative to the segment base, int32 file position).
`.timeindex`: 12-byte entries (int64 max timestamp so far, int32 relative offset of the batch
holding it). Kafka adds one of each when more than `index.interval.bytes` (4096) were written
since the last entry, naming the batch about to be written; the time index also gets a final
entry when the segment is closed or rolled. Files are written exactly sized (Kafka trims its
preallocated files to this size on roll and close).

The indexes are a cache: recovery rebuilds them for every segment it scans, and a missing or
damaged one is rebuilt, so they are fsynced only when their segment becomes inactive.
"""

from __future__ import annotations

import bisect
import os
import struct
from pathlib import Path

INDEX_INTERVAL_BYTES = 4096
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")


class SegmentIndexes:
    """Both indexes of one segment, in memory for lookups and appended to their files."""

    def __init__(self, log_path: Path, base_offset: int) -> None:
        self.base_offset = base_offset
        self.index_path = log_path.with_suffix(".index")
        self.time_path = log_path.with_suffix(".timeindex")
        self.offsets: list[int] = []  # absolute offsets
        self.positions: list[int] = []
        self.times: list[tuple[int, int]] = []  # (timestamp, absolute offset)
        self.bytes_since_entry = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self._index_file = None
        self._time_file = None
        self.writable = True

    # --- building ---
    def reset(self, *, writable: bool = True) -> None:
        """Forget every entry and (when writable) empty both files, before a rebuild."""
        self.close()
        self.writable = writable
        self.offsets.clear()
        self.positions.clear()
        self.times.clear()
        self.bytes_since_entry = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        if writable:
            for path in (self.index_path, self.time_path):
                with open(path, "wb"):
                    pass

    def load(self) -> bool:
        """Read both files; False if either is missing or inconsistent (then rebuild)."""
        try:
            raw = self.index_path.read_bytes()
            traw = self.time_path.read_bytes()
        except FileNotFoundError:
            return False
        if len(raw) % 8 or len(traw) % 12:
            return False
        offsets, positions = [], []
        for rel, pos in _OFFSET_ENTRY.iter_unpack(raw):
            if (
                offsets and (rel + self.base_offset <= offsets[-1] or pos <= positions[-1])
            ) or rel < 0:
                return False
            offsets.append(rel + self.base_offset)
            positions.append(pos)
        times = [(ts, rel + self.base_offset) for ts, rel in _TIME_ENTRY.iter_unpack(traw)]
        self.offsets, self.positions, self.times = offsets, positions, times
        if times:
            self.max_timestamp, self.offset_of_max_timestamp = times[-1]
        return True

    def rewrite(self) -> None:
        """Write both files from the entries in memory (after a rebuild) and keep appending."""
        self.close()
        self.writable = True
        with open(self.index_path, "wb") as f:
            f.write(
                b"".join(
                    _OFFSET_ENTRY.pack(o - self.base_offset, p)
                    for o, p in zip(self.offsets, self.positions, strict=True)
                )
            )
        with open(self.time_path, "wb") as f:
            f.write(b"".join(_TIME_ENTRY.pack(t, o - self.base_offset) for t, o in self.times))

    def _files(self):
        if self._index_file is None and self.writable:
            self._index_file = open(self.index_path, "ab")  # noqa: SIM115
            self._time_file = open(self.time_path, "ab")  # noqa: SIM115
        return self._index_file, self._time_file

    def on_batch(self, last_offset: int, position: int, size: int, max_timestamp: int) -> None:
        """Account for a batch written at `position` (call in log order)."""
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = last_offset
        if self.bytes_since_entry > INDEX_INTERVAL_BYTES:
            index_file, time_file = self._files()
            if index_file is not None:
                index_file.write(_OFFSET_ENTRY.pack(last_offset - self.base_offset, position))
            self.offsets.append(last_offset)
            self.positions.append(position)
            self._maybe_time_entry(time_file)
            self.bytes_since_entry = 0
        self.bytes_since_entry += size

    def _maybe_time_entry(self, time_file) -> None:
        if self.max_timestamp >= 0 and (not self.times or self.max_timestamp > self.times[-1][0]):
            if time_file is not None:
                time_file.write(
                    _TIME_ENTRY.pack(
                        self.max_timestamp, self.offset_of_max_timestamp - self.base_offset
                    )
                )
            self.times.append((self.max_timestamp, self.offset_of_max_timestamp))

    def on_close(self) -> None:
        """The final time index entry of an inactive segment (in memory / appended)."""
        _index_file, time_file = self._files() if self.writable else (None, None)
        self._maybe_time_entry(time_file)

    def finish(self) -> None:
        """The segment becomes inactive (roll or close): final time entry, then fsync."""
        if not self.writable:
            return
        self.on_close()
        self.flush(sync=True)

    def flush(self, *, sync: bool = False) -> None:
        for f in (self._index_file, self._time_file):
            if f is not None:
                f.flush()
                if sync:
                    os.fsync(f.fileno())

    def close(self) -> None:
        for f in (self._index_file, self._time_file):
            if f is not None:
                f.close()
        self._index_file = self._time_file = None

    def truncate_after(self, position: int, *, writable: bool | None = None) -> None:
        """Drop entries at or past `position` (a truncated log, or a rebuild from there)."""
        if writable is not None:
            self.writable = writable
        keep = bisect.bisect_left(self.positions, position)
        self.offsets[keep:] = []
        self.positions[keep:] = []
        last = self.offsets[-1] if self.offsets else self.base_offset - 1
        self.times = [t for t in self.times if t[1] <= last]
        self.bytes_since_entry = 0
        self.max_timestamp, self.offset_of_max_timestamp = (
            self.times[-1] if self.times else (-1, -1)
        )
        self.close()
        if not self.writable:
            return
        for path, size in ((self.index_path, keep * 8), (self.time_path, len(self.times) * 12)):
            with open(path, "ab") as f:
                f.truncate(size)

    def last_offset_on_disk(self) -> int | None:
        """The offset the `.index` file's last entry names, read from the file (None when it
        is missing, empty, not whole entries or ends in preallocated zeros)."""
        try:
            with open(self.index_path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                if size == 0 or size % _OFFSET_ENTRY.size:
                    return None
                f.seek(size - _OFFSET_ENTRY.size)
                rel, position = _OFFSET_ENTRY.unpack(f.read(_OFFSET_ENTRY.size))
        except OSError:
            return None
        # No entry names position 0 (the first comes after INDEX_INTERVAL_BYTES): zeros are
        # the unused tail of a file Kafka preallocated, not an entry.
        return None if position <= 0 or rel < 0 else self.base_offset + rel

    # --- lookups ---
    def position_before(self, offset: int) -> int:
        """A file position at or before the batch holding `offset` (0 when none is known).

        Entries pair a batch's last offset with its start, so an entry whose offset is at most
        `offset` starts a batch at or before the one holding `offset`.
        """
        i = bisect.bisect_right(self.offsets, offset) - 1
        return self.positions[i] if i >= 0 else 0
