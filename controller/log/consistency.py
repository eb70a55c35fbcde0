"""Refusing a metadata log that has lost records, before anything in its directory changes.

Replay is only exact when the log, read from the snapshot it starts after, holds every record
since. Kafka's KafkaMetadataLog refuses to start when the log does not begin at offset 0 and
no snapshot reaches its start ("Inconsistent snapshot state"), and its controller fails
rather than load anything but the newest snapshot. kraftpy holds to the same rule with the
snapshot it can actually read: an older whole snapshot may stand in for a damaged newer one
only while it still reaches the first offset left in the log; otherwise the offsets between
are gone and replaying around them would hand out producer ids and broker epochs again.

The end of the log is checked against what the directory recorded about it:
- a snapshot file (even a damaged one) is written only of committed offsets, so its end
  offset must not lie past the log end;
- leader-epoch-checkpoint names the offset where each epoch's first batch went; the log must
  reach past it (after a crash that offset may be the log end: the entry is written as the
  batch is appended, before its fsync; after a clean stop it may not);
- after a clean stop (`.kafka_cleanshutdown`) the last index entry names a batch that was
  written, and a single-voter quorum-state names an epoch whose LeaderChange batch is in the
  log (it is fsynced before the node serves).
No segment file at all while snapshots, leader epochs or a quorum-state exist is a lost log.

A voter of a quorum of several (`downloads`) is the exception Kafka makes too: its newest
snapshot may end past its log when it stopped after installing a snapshot downloaded from the
leader but before its log was dropped; recovery then finishes that (truncateToLatestSnapshot),
so nothing of the old log is checked.

`check` raises `InconsistentLogError`, one line naming the files and the gap. kraftpy keeps
no recovery-point or log-start-offset checkpoint for the metadata log (Kafka's
KafkaMetadataLog does not either), and no high watermark on disk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftpy.controller.log import files
from kraftpy.controller.log.segment import segment_name
from kraftpy.controller.log.snapshots import SnapshotId


class InconsistentLogError(files.LogDirError):
    """The metadata log has lost records; the message names the files and the offsets that
    are gone. Raised before anything in the directory was changed."""


@dataclass
class LogFacts:
    """What recovery found, read-only: the log's extent and what the directory recorded."""

    directory: Path
    start: int  # the log start offset (the first segment's base offset)
    end: int  # the log end offset after recovery (a torn tail excluded)
    segments: int  # how many segment files there are
    snapshots: list[SnapshotId] = field(default_factory=list)  # every .checkpoint, oldest first
    whole: SnapshotId | None = None  # the newest snapshot that reads back whole
    damaged: list[tuple[SnapshotId, str]] = field(default_factory=list)  # newer, with why
    checkpointed_epochs: list[tuple[int, int]] = field(default_factory=list)  # as on disk
    log_epoch: int = -1  # the last leader epoch the log holds a batch of
    indexed: tuple[Path, int] | None = None  # (index file, last offset it names), clean only
    quorum_state: dict[str, Any] | None = None
    node_id: int | None = None
    clean: bool = False
    last_segment: str = ""  # the last segment file's name
    downloads: bool = False  # a quorum voter: a newest whole snapshot past the end is installed


def _refuse(facts: LogFacts, message: str) -> InconsistentLogError:
    return InconsistentLogError(
        f"{facts.directory}: {message}; refusing to start (nothing in the directory was changed)"
    )


def _offsets(first: int, last: int) -> str:
    return f"offset {first}" if first == last else f"offsets {first}..{last}"


def check(facts: LogFacts) -> None:
    """Raise `InconsistentLogError` if the log has lost records (see the module docstring)."""
    if installed_past_end(facts):
        return
    tail = facts.last_segment
    if facts.segments == 0:
        recorded = _recorded_without_log(facts)
        if recorded:
            raise _refuse(facts, f"no segment files, but {recorded}: the whole log is gone")
        return
    start_gap = _start_gap(facts)
    if start_gap:
        raise _refuse(facts, start_gap)
    past = [sid for sid in facts.snapshots if sid.end_offset > facts.end]
    if past:
        sid = past[-1]
        raise _refuse(
            facts,
            f"snapshot {sid.file_name} was taken at offset {sid.end_offset}, but the log ends "
            f"at offset {facts.end} ({tail}): {_offsets(facts.end, sid.end_offset - 1)} "
            "and any after are gone",
        )
    for epoch, offset in reversed(facts.checkpointed_epochs):
        if offset > facts.end or (facts.clean and offset == facts.end):
            raise _refuse(
                facts,
                f"{files.LEADER_EPOCH_CHECKPOINT} records epoch {epoch} from offset {offset}, "
                f"but the log ends at offset {facts.end} ({tail})"
                f"{' after a clean stop' if facts.clean else ''}: "
                f"{_offsets(facts.end, offset)} and any after are gone",
            )
    if facts.clean and facts.indexed is not None and facts.indexed[1] >= facts.end:
        index, offset = facts.indexed
        raise _refuse(
            facts,
            f"{index.name} names offset {offset}, but after a clean stop the log ends at "
            f"offset {facts.end}: {_offsets(facts.end, offset)} and any after are gone",
        )
    led = _led_epoch(facts)
    if facts.clean and led is not None and led > facts.log_epoch:
        raise _refuse(
            facts,
            f"{files.QUORUM_STATE} says this node led epoch {led} and stopped cleanly, but the "
            f"log ({tail}, ending at offset {facts.end}) has no batch of epoch {led} "
            f"(its last is epoch {facts.log_epoch}): the records of epoch {led} are gone",
        )


def installed_past_end(facts: LogFacts) -> bool:
    """A quorum voter whose newest snapshot (whole, none newer) ends past its log: one it
    downloaded and installed; the log is to be dropped and started at its end."""
    whole = facts.whole
    return (facts.downloads and whole is not None and not facts.damaged
            and bool(facts.snapshots) and facts.snapshots[-1] == whole
            and (facts.segments == 0 or whole.end_offset > facts.end))


def _start_gap(facts: LogFacts) -> str:
    """Why replay cannot start where the log starts ('' when it can)."""
    if facts.start == 0 or (facts.whole is not None and facts.whole.end_offset >= facts.start):
        return ""
    described = [f"{sid.file_name} is damaged ({why})" for sid, why in facts.damaged]
    if facts.whole is not None:
        described.append(f"{facts.whole.file_name} ends at offset {facts.whole.end_offset}")
    lost_from = facts.whole.end_offset if facts.whole is not None else 0
    return (
        f"inconsistent snapshot state: the log starts at offset {facts.start} "
        f"({segment_name(facts.start)}), but no whole snapshot reaches it "
        f"({'; '.join(described) if described else 'there is no snapshot'}): "
        f"{_offsets(lost_from, facts.start - 1)} are gone"
    )


def _recorded_without_log(facts: LogFacts) -> str:
    # A snapshot ending at 0 records no log: `kafka-storage format --standalone` writes
    # 00000000000000000000-0000000000.checkpoint (the voters) before any segment exists.
    if facts.snapshots and facts.snapshots[-1].end_offset > 0:
        return f"snapshot {facts.snapshots[-1].file_name} exists"
    if facts.checkpointed_epochs:
        epoch, offset = facts.checkpointed_epochs[-1]
        return f"{files.LEADER_EPOCH_CHECKPOINT} records epoch {epoch} from offset {offset}"
    if facts.quorum_state is not None:
        return f"{files.QUORUM_STATE} records leader epoch {facts.quorum_state.get('leaderEpoch')}"
    return ""


def _led_epoch(facts: LogFacts) -> int | None:
    """The epoch a quorum-state says this node led as the only voter, if it says so."""
    state = facts.quorum_state
    if state is None or facts.node_id is None or state.get("leaderId") != facts.node_id:
        return None
    voters = state.get("currentVoters")
    if not isinstance(voters, list) or [v.get("voterId") for v in voters if isinstance(v, dict)] \
            != [facts.node_id]:
        return None
    epoch = state.get("leaderEpoch")
    return epoch if isinstance(epoch, int) else None
