"""The committed image: the metadata state at the high watermark, and snapshots taken of it.

Kafka's MetadataLoader and SnapshotGenerator. A leader's controller runs ahead of the commit
(it applies its records as it appends them), so its state is rarely one a snapshot may hold.
Every node therefore keeps a second replica of the state, `CommittedImage`, fed only
committed records, in order (from the host: a follower's as it replays the log, a leader's
own as the high watermark passes them). A snapshot is the image's records at the offset it
stands at, so a leader under unbroken load snapshots on the policy's two settings like any
other node.

Writing one never holds the event loop: `SnapshotJob.take` holds the image (committed records
arriving meanwhile queue up), `run` encodes and writes the file in a worker thread, and
`finish` back on the loop lets the image catch up and tells the caller what the log let go.
An image of many partitions is encoded and written by forked children instead, a part each
(`forked`): in a worker thread its seconds of Python work would share the GIL with the loop.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kraftpy.controller.log import forked
from kraftpy.controller.log.snapshot_files import SnapshotFiles
from kraftpy.controller.log.snapshots import SnapshotId

log = logging.getLogger("kraftpy.snapshot")

# From this many partitions in the image a snapshot is written by forked children. A child
# pays a copy-on-write fault for each page of the image it reads (every object read has its
# reference count written), and an image replayed from a log is spread thin over its pages:
# in a server restarted from its log, 100,000 partitions took 0.11 s in a worker thread and
# 0.17 s in two children (15,000 faults each); 1,000,000 took 2.8 s in the thread (the loop
# waiting behind it in turns) and 0.9-1.7 s in two children.
CHILD_AT_PARTITIONS = 200_000
# Such a snapshot is encoded in this many parts at once, a child each (the loop keeps what
# else the machine has: it is light while a snapshot is written).
PARTS = max(1, min(4, os.cpu_count() or 1))


class CommittedImage:
    """A controller replica that replays committed records only (it never handles requests)."""

    def __init__(self, controller: Any, offset: int) -> None:
        self.controller = controller
        self.offset = offset  # the state here is the replay of every record below it
        self._held: list[tuple[Any, int, int]] | None = None
        self._held_offset = offset

    def replay(self, record: Any, version: int, offset: int) -> None:
        if self._held is not None:
            self._held.append((record, version, offset))
            return
        self.controller.replay(record, version, offset)

    def advance(self, offset: int) -> None:
        """Everything below `offset` is replayed (control batches carry no records)."""
        if self._held is not None:
            self._held_offset = max(self._held_offset, offset)
        elif offset > self.offset:
            self.offset = offset

    def hold(self) -> None:
        """A snapshot is being taken of the state as it stands: queue what comes meanwhile."""
        self._held = []
        self._held_offset = self.offset

    def release(self) -> None:
        held, self._held = self._held, None
        for record, version, offset in held or ():
            self.controller.replay(record, version, offset)
        self.offset = max(self.offset, self._held_offset)

    @property
    def held(self) -> bool:
        return self._held is not None


@dataclass
class SnapshotJob:
    """One snapshot of the held image: `run` (any thread), then `finish` (the loop)."""

    image: CommittedImage
    files: SnapshotFiles
    snapshot_id: SnapshotId
    last_contained_log_timestamp: int
    control: list[tuple[bytes, bytes]]
    now_ms: int
    trimmed_to: SnapshotId | None = None
    written: bool = False
    in_child: bool = False  # encoded and written by forked children (`forked`), in parts

    def run(self) -> None:
        """Encode and write the file, then let go of what it covers (the log below it)."""
        controller = self.image.controller
        parts = controller.snapshot_value_parts(PARTS) if self.in_child else None
        self.trimmed_to = self.files.write(
            self.snapshot_id, () if parts else controller.snapshot_values(),
            last_contained_log_timestamp=self.last_contained_log_timestamp,
            now_ms=self.now_ms, control=self.control, parts=parts)
        self.written = True

    def finish(self) -> None:
        """Back on the loop, written or not: the image catches up with what it held."""
        self.image.release()


def _in_child(image: CommittedImage) -> bool:
    replication = getattr(image.controller, "replication", None)
    return (forked.available() and replication is not None
            and replication.partition_count >= CHILD_AT_PARTITIONS)


@dataclass
class RetentionJob:
    """`metadata.max.retention.*` letting older snapshots and their segments go with no new
    snapshot due (every snapshot on disk is committed: nothing to wait for)."""

    files: SnapshotFiles
    now_ms: int
    trimmed_to: SnapshotId | None = None
    written: bool = False
    snapshot_id: SnapshotId | None = None

    def run(self) -> None:
        self.trimmed_to = self.files.apply_retention(self.now_ms)

    def finish(self) -> None:
        pass


class SnapshotGenerator:
    """When to snapshot the committed image (the policy of `SnapshotFiles`), one at a time."""

    def __init__(self, files: SnapshotFiles) -> None:
        self.files = files
        self.job: SnapshotJob | RetentionJob | None = None

    def maybe_take(self, image: CommittedImage, now_ms: int, *, durable: int, committed: int,
                   epoch_of: Callable[[int], int],
                   timestamp_below: Callable[[int], int | None],
                   control_at: Callable[[int], list[tuple[bytes, bytes]]]
                   ) -> SnapshotJob | RetentionJob | None:
        """A job for a snapshot of `image` if the policy asks for one now (the image held
        until it finishes), or for retention alone, else None. The callables give the leader
        epoch of an offset, the timestamp of the batch ending at an offset, and the raft
        control records (kraft.version and voters) in force there. `durable` is how far this
        node's own log is fsynced: a follower's image may stand past it (the leader's high
        watermark counts other voters' disks), and a snapshot there would vouch for records a
        power loss can still tear off here (recovery trusts the log below the newest
        snapshot), so it waits. `committed` is the high watermark the node knows: retention,
        which tells the core of a snapshot the log now starts at, waits until it passes the
        newest snapshot (a restarted voter knows none; below a snapshot it installed just
        before a power loss its log may still hold records the leader is to truncate)."""
        if self.job is not None or image.held:
            return None
        at = image.offset
        if at <= 0 or at > durable or not self.files.due(at, now_ms):
            if self.files.last_offset <= committed and self.files.retention_due(now_ms):
                self.job = RetentionJob(self.files, now_ms)  # type: ignore[assignment]
                return self.job
            return None
        last_ts = timestamp_below(at)
        if last_ts is None:
            newest = self.files.newest
            last_ts = newest.last_contained_log_timestamp if newest is not None else 0
        image.hold()
        self.job = SnapshotJob(image, self.files, SnapshotId(at, epoch_of(at - 1)), last_ts,
                               control_at(at), now_ms, in_child=_in_child(image))
        return self.job

    def done(self, job: SnapshotJob | RetentionJob) -> None:
        job.finish()
        if self.job is job:
            self.job = None
