"""Kafka's retention of the metadata log: `metadata.max.retention.bytes` and `.ms`.

As KafkaMetadataLog.maybeClean: the newest snapshot always stays. Walking the snapshots
oldest first, the oldest goes (and the log start moves to the next snapshot's end offset,
taking the segments wholly below it) while the log plus the snapshots left exceed the byte
limit, then while the oldest's last contained log timestamp is older than the time limit.
Both limits are soft (nothing is deleted without a newer snapshot); -1 disables one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

DEFAULT_RETENTION_BYTES = 100 * 1024 * 1024  # metadata.max.retention.bytes
DEFAULT_RETENTION_MS = 7 * 24 * 60 * 60 * 1000  # metadata.max.retention.ms


@dataclass(frozen=True)
class RetentionPolicy:
    max_bytes: int = DEFAULT_RETENTION_BYTES
    max_ms: int = DEFAULT_RETENTION_MS


@dataclass(frozen=True)
class SnapshotInfo:
    end_offset: int
    size: int
    last_contained_log_timestamp: int | None  # None: unreadable, never old enough


def snapshots_to_drop(
    snapshots: Sequence[SnapshotInfo],
    *,
    log_bytes: int,
    log_bytes_from: Callable[[int], int],
    now_ms: int,
    policy: RetentionPolicy,
) -> int:
    """How many of `snapshots` (oldest first) go; the log then starts at the next one's end.

    `log_bytes` is the log's size now; `log_bytes_from(offset)` its size once the segments
    wholly below `offset` are gone.
    """
    dropped = 0
    last = len(snapshots) - 1  # the newest is never dropped
    if policy.max_bytes >= 0:
        left = sum(s.size for s in snapshots)
        while dropped < last and log_bytes + left > policy.max_bytes:
            left -= snapshots[dropped].size
            dropped += 1
            log_bytes = log_bytes_from(snapshots[dropped].end_offset)
    if policy.max_ms >= 0:
        while dropped < last:
            ts = snapshots[dropped].last_contained_log_timestamp
            if ts is None or now_ms - ts <= policy.max_ms:
                break
            dropped += 1
    return dropped
