"""What the Raft core asks of its shell: the only way it touches the world.

Every call into `RaftNode` returns a list of these, to be carried out in order. Two rules make
the core's view of the disk true: a `WriteQuorumState` is durable (written, fsynced, renamed)
before the shell carries out the next action, and `Flush` actions complete in the order
given, each reported back with `RaftNode.on_flushed(offset)`; nothing else is assumed durable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Send:
    """Send `request` to node `destination`; its answer goes to `RaftNode.handle_response`
    with the same correlation id, a failure (no connection, no answer) to `request_failed`."""

    destination: int
    correlation_id: int
    request: Any


@dataclass(frozen=True, slots=True)
class Respond:
    """Answer the request `handle_request` got with `token`. A FetchResponse with `read_from`
    set takes the log's batches from that offset (up to `max_bytes`) as its records; a
    FetchSnapshotResponse with `snapshot` set is completed by `fill_snapshot_chunk`."""

    token: Any
    response: Any
    read_from: int | None = None
    max_bytes: int = 0
    snapshot: tuple[tuple[int, int], int, int] | None = None  # (id, position, max bytes)


@dataclass(frozen=True, slots=True)
class AppendBatch:
    """Write one batch as leader: `records` are (key, value) pairs; control batches carry
    KRaft's control records (LeaderChange, KRaftVersion, Voters) with their keys."""

    base_offset: int
    epoch: int
    records: tuple[tuple[bytes | None, bytes], ...]
    control: bool
    timestamp: int


@dataclass(frozen=True, slots=True)
class AppendFetched:
    """Write the batches a follower fetched, as they came (offsets and epochs checked)."""

    records: bytes
    base_offset: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class Truncate:
    """Drop every record at or above `offset` (a diverging suffix, never committed data)."""

    offset: int


@dataclass(frozen=True, slots=True)
class Flush:
    """fsync the log up to `offset`; report it with `on_flushed(offset)`."""

    offset: int


@dataclass(frozen=True, slots=True)
class WriteQuorumState:
    """Replace quorum-state with `data` (one line of JSON), durably, before the next action."""

    data: bytes


@dataclass(frozen=True, slots=True)
class WriteSnapshotChunk:
    """Bytes of a snapshot being downloaded from the leader, at `position` of its file
    (position 0 starts the file anew: a download begun before is abandoned)."""

    snapshot_id: tuple[int, int]
    position: int
    data: bytes


@dataclass(frozen=True, slots=True)
class InstallSnapshot:
    """The downloaded snapshot is whole: freeze it and drop the whole log below and beyond;
    the log now starts (and ends) at the snapshot's end offset."""

    snapshot_id: tuple[int, int]


@dataclass(frozen=True, slots=True)
class Committed:
    """The high watermark moved: records below `high_watermark` are committed."""

    high_watermark: int


@dataclass(frozen=True, slots=True)
class LeaderChanged:
    """The leader (or its absence, None) and epoch this node now knows."""

    leader_id: int | None
    epoch: int


@dataclass(frozen=True, slots=True)
class Note:
    """Something worth a log line (level: "info", "warning" or "error")."""

    level: str
    text: str


Action = (Send | Respond | AppendBatch | AppendFetched | Truncate | Flush | WriteQuorumState
          | WriteSnapshotChunk | InstallSnapshot | Committed | LeaderChanged | Note)
