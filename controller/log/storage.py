"""The controller's data directory: format it, open it and recover its logs.

Layout, as Kafka's (`kafka-storage.sh format` plus a running KRaft node):

    <metadata.log.dir>/.lock                    held (flock) while a process uses the dir
    <metadata.log.dir>/meta.properties          version=1, cluster.id, node.id, directory.id
    <metadata.log.dir>/bootstrap.checkpoint     FeatureLevelRecords for the first start
    <metadata.log.dir>/.kafka_cleanshutdown     present only between a clean stop and a start
    <metadata.log.dir>/__cluster_metadata-0/    segments, snapshots, quorum-state, ...
    <metadata.log.dir>/__transaction_state-<n>/ the transaction log, Kafka's partitions (txn_state.py)

`MetadataStorage` holds what a node writes through once it runs: the metadata log
(`metadata`, a `PartitionLog` the raft driver appends to), its snapshots (`snapshots`, a
`SnapshotFiles`) and the transaction log (`txn`). Opening loads the newest valid snapshot,
refuses a log that has lost records (`consistency.py`, checked before anything in the
directory changes), then replays the log after it; only batches after the clean point (the
snapshot's end offset, or the last index entry after a clean stop) are validated, which keeps
startup from a snapshot independent of how long the log has grown.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftpy.controller.log import files
from kraftpy.controller.log.consistency import (
    InconsistentLogError,
    LogFacts,
    check,
    installed_past_end,
)
from kraftpy.controller.log.partition_log import PartitionLog
from kraftpy.controller.log.retention import RetentionPolicy
from kraftpy.controller.log.segment import parse_segment_name
from kraftpy.controller.log.snapshot_files import SnapshotFiles, SnapshotPolicy
from kraftpy.controller.log.snapshots import (
    Snapshot,
    SnapshotId,
    clean_partial_snapshots,
    encode_snapshot,
    list_snapshots,
    newest_whole_snapshot,
    read_snapshot,
    write_checkpoint_file,
)
from kraftpy.controller.log.txn_state import TransactionStateLog
from kraftpy.protocol.control_records import parse_control_key
from kraftpy.protocol.metadata_frame import encode_metadata_record

log = logging.getLogger("kraftpy.log")

METADATA_PARTITION = "__cluster_metadata-0"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"


# --- formatting ------------------------------------------------------------------------------


def random_uuid() -> str:
    """A fresh cluster or directory id in Kafka's text form (22 base64url characters)."""
    from kraftpy.protocol.uuid import kafka_uuid_str, random_kafka_uuid

    return kafka_uuid_str(random_kafka_uuid())


def bootstrap_values(
    metadata_version: int, features: Mapping[str, int] | None = None
) -> list[bytes]:
    from kraftpy.protocol.records.feature_level_record import FeatureLevelRecord

    # As Kafka's BootstrapMetadata.fromVersions: metadata.version first, then the other
    # features above level 0 by name; kraft.version is the raft layer's, never a record here.
    records = [FeatureLevelRecord(name="metadata.version", feature_level=metadata_version)]
    records += [
        FeatureLevelRecord(name=n, feature_level=lvl)
        for n, lvl in sorted((features or {}).items())
        if lvl > 0 and n not in ("metadata.version", "kraft.version")
    ]
    return [encode_metadata_record(r, 0) for r in records]


def format_storage(
    log_dir: Path,
    *,
    cluster_id: str,
    node_id: int,
    metadata_version: int,
    features: Mapping[str, int] | None = None,
    directory_id: str | None = None,
    now_ms: int = 0,
    ignore_formatted: bool = False,
    voters: Any = None,
) -> bool:
    """Write meta.properties and bootstrap.checkpoint, as `kafka-storage.sh format` does.

    `voters` (a VotersRecord, with `directory_id` this node's in it): a KIP-853 quorum at
    kraft.version 1, written into the raft bootstrap snapshot of __cluster_metadata-0.

    Returns False (and changes nothing) if the dir is already formatted and
    `ignore_formatted`; raises `LogDirError` if formatted otherwise or if in use.
    """
    from kraftpy.controller.feature_control import unsupported
    from kraftpy.protocol.uuid import parse_kafka_uuid

    reason = unsupported({**(features or {}), "metadata.version": metadata_version})
    if reason:  # refused before anything is written
        raise files.LogDirError(reason)
    try:
        parse_kafka_uuid(cluster_id)
    except Exception:
        raise files.LogDirError(
            f"cluster id {cluster_id!r} is not a Kafka uuid (22 base64url chars)"
        ) from None
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    with files.DirLock(log_dir):
        if (log_dir / files.META_PROPERTIES).exists():
            if ignore_formatted:
                return False
            raise files.LogDirError(
                f"{log_dir} is already formatted ({files.META_PROPERTIES} exists)"
            )
        batches = encode_snapshot(
            bootstrap_values(metadata_version, features),
            epoch=0,
            last_contained_log_timestamp=0,
            timestamp=now_ms,
        )
        write_checkpoint_file(log_dir / files.BOOTSTRAP_CHECKPOINT, batches)
        if voters is not None:
            from kraftpy.controller.raft.voters import RAFT_BOOTSTRAP_SNAPSHOT, control_records

            partition = log_dir / METADATA_PARTITION
            partition.mkdir(exist_ok=True)
            write_checkpoint_file(partition / RAFT_BOOTSTRAP_SNAPSHOT, encode_snapshot(
                [], epoch=0, last_contained_log_timestamp=now_ms, timestamp=now_ms,
                control=control_records(1, voters)))
        files.write_meta_properties(
            log_dir,
            cluster_id=cluster_id,
            node_id=node_id,
            directory_id=directory_id or random_uuid(),
        )
    return True


def read_bootstrap(log_dir: Path) -> tuple[int | None, dict[str, int]]:
    """(metadata.version level, other feature levels) from bootstrap.checkpoint."""
    from kraftpy.protocol.metadata_frame import decode_metadata_record

    path = Path(log_dir) / files.BOOTSTRAP_CHECKPOINT
    if not path.exists():
        return None, {}
    snap = read_snapshot(path)
    mv: int | None = None
    features: dict[str, int] = {}
    for value in snap.values:
        record, _version = decode_metadata_record(value)
        if type(record).__name__ == "FeatureLevelRecord":
            if record.name == "metadata.version":
                mv = record.feature_level
            else:
                features[record.name] = record.feature_level
    return mv, features


# --- the running storage ---------------------------------------------------------------------


@dataclass
class RecoveryStats:
    snapshot: SnapshotId | None = None
    snapshot_records: int = 0
    log_records: int = 0
    txn_records: int = 0
    truncated: list[str] = field(default_factory=list)


class MetadataStorage:
    """The metadata log and the transaction log of one data dir, opened and recovered."""

    def __init__(
        self,
        log_dir: Path,
        *,
        segment_bytes: int = 1024 * 1024 * 1024,
        policy: SnapshotPolicy | None = None,
        read_only: bool = False,
        with_txn_log: bool = True,
        txn_segment_bytes: int = 100 * 1024 * 1024,
        segment_ms: int | None = None,
        retention: RetentionPolicy | None = None,
        downloads: bool = False,
    ) -> None:
        self.log_dir = Path(log_dir)
        # A voter of a quorum of several: snapshots also come from the leader, and a newest
        # snapshot past the log end is one installed before a stop.
        self.downloads = downloads
        # metadata.log.segment.ms: a segment older than this (by record timestamps) is rolled.
        self.segment_ms = segment_ms
        # metadata.max.retention.*: None keeps only the newest snapshot's suffix and one older
        # snapshot; a policy keeps older snapshots and segments until it lets them go (Kafka).
        self.retention = retention
        self.segment_bytes = segment_bytes
        self.policy = policy or SnapshotPolicy()
        self.read_only = read_only
        self.with_txn_log = with_txn_log
        self.txn_segment_bytes = txn_segment_bytes  # transaction.state.log.segment.bytes
        self.lock: files.DirLock | None = None
        self.meta: dict[str, str] = {}
        self.metadata: PartitionLog
        self.txn: TransactionStateLog | None = None
        self.snapshot: Snapshot | None = None  # the newest whole one, as found at open
        self.snapshots: SnapshotFiles
        self.leader_epoch = 0
        # KIP-853: kraft.version and the recorded voter set (None with static voters), and
        # whether the log or a snapshot holds that set (else only the raft bootstrap does).
        self.kraft_version = 0
        self.voters: Any = None
        self.voters_in_log = False

    # --- open ---
    @classmethod
    def open(cls, log_dir: Path, *, node_id: int | None = None, **kwargs: Any) -> MetadataStorage:
        """Lock, check meta.properties, recover both logs and find the newest snapshot."""
        self = cls(log_dir, **kwargs)
        d = self.log_dir
        if not d.is_dir():
            raise files.LogDirError(f"{d} does not exist; format it with `kraftpy storage format`")
        if not self.read_only:
            self.lock = files.DirLock(d).acquire()
        try:
            self._open(node_id)
        except BaseException:
            if self.lock is not None:
                self.lock.release()
            raise
        return self

    def _open(self, node_id: int | None) -> None:
        d = self.log_dir
        self.meta = files.read_meta_properties(d)
        if node_id is not None and int(self.meta["node.id"]) != node_id:
            raise files.LogDirError(
                f"{d / files.META_PROPERTIES}: node.id {self.meta['node.id']}, but this node is {node_id}"
            )
        clean = (d / CLEAN_SHUTDOWN).exists()
        mdir = d / METADATA_PARTITION
        newest: Snapshot | None = None
        damaged: list[tuple[SnapshotId, str]] = []
        state = None
        facts: LogFacts | None = None
        if mdir.is_dir():
            newest, damaged = newest_whole_snapshot(mdir)
            state = files.read_quorum_state(mdir)
            facts = LogFacts(
                mdir, start=0, end=0, segments=0,
                snapshots=[sid for sid, _ in list_snapshots(mdir)],
                checkpointed_epochs=files.read_leader_epochs(mdir),
                quorum_state=state, node_id=int(self.meta["node.id"]), clean=clean,
                whole=newest.snapshot_id if newest is not None else None, damaged=damaged,
                downloads=self.downloads,
            )
            if not any(parse_segment_name(p.name) is not None for p in mdir.iterdir()):
                self._check(facts)
        recovery_point: int | None = (
            None if clean else (newest.snapshot_id.end_offset if newest else 0)
        )

        def verify(partition: PartitionLog) -> None:
            # Before anything changes: does the recovered log still hold every record since
            # the snapshot replay starts from (see consistency.py)?
            facts.start, facts.end = partition.log_start_offset, partition.log_end_offset
            facts.segments = len(partition.segments)
            facts.last_segment = partition.active.path.name
            facts.whole = newest.snapshot_id if newest is not None else None
            facts.damaged = damaged
            facts.log_epoch = partition.leader_epochs[-1][0] if partition.leader_epochs else -1
            facts.indexed = partition.indexed
            self._check(facts)

        self.metadata = PartitionLog.open(
            mdir,
            topic_id=files.METADATA_TOPIC_ID,
            recovery_point=recovery_point,
            start_offset=newest.snapshot_id.end_offset if newest else 0,
            segment_bytes=self.segment_bytes,
            segment_ms=self.segment_ms,
            read_only=self.read_only,
            before_changes=verify if mdir.is_dir() else None,
        )
        if mdir.is_dir() and not self.read_only:
            clean_partial_snapshots(mdir)
            if self.downloads and facts is not None and installed_past_end(facts) \
                    and newest is not None:
                end = newest.snapshot_id.end_offset  # type: ignore[union-attr]
                if self.metadata.log_end_offset != end or self.metadata.log_start_offset != end:
                    log.warning("%s: snapshot %s (installed from the leader) ends past the log "
                                "(%d); dropping the log, which now starts there", mdir,
                                newest.snapshot_id.file_name,  # type: ignore[union-attr]
                                self.metadata.log_end_offset)
                    self.metadata.reset_to(end)
        for sid, why in damaged:  # (refused above unless what replay starts from is whole)
            log.warning("%s: snapshot %s is damaged (%s); replaying %s", mdir, sid.file_name,
                        why, f"from {newest.snapshot_id.file_name}" if newest is not None
                        else "the whole log")
        self.snapshot = newest
        self.snapshots = SnapshotFiles(mdir, self.metadata, policy=self.policy,
                                       retention=self.retention, newest=newest)
        if self.with_txn_log:
            self.txn = TransactionStateLog.open(
                d, clean=clean, segment_bytes=self.txn_segment_bytes, read_only=self.read_only)
        epochs = [self.metadata.leader_epochs[-1][0]] if self.metadata.leader_epochs else []
        self.leader_epoch = max([*epochs, state["leaderEpoch"] if state else 0])
        if not self.read_only:  # only writing (epochs, snapshots) needs them: tools skip it
            self._load_voters()
        if clean and not self.read_only:
            (d / CLEAN_SHUTDOWN).unlink()
            files.fsync_dir(d)

    def _check(self, facts: LogFacts) -> None:
        """Refuse a log that lost records; a read-only reader (the tools) is only warned."""
        try:
            check(facts)
        except InconsistentLogError as exc:
            if not self.read_only:
                raise
            log.warning("%s", str(exc).replace("refusing to start", "reading it as it is"))

    @property
    def cluster_id(self) -> str:
        return self.meta["cluster.id"]

    @property
    def node_id(self) -> int:
        return int(self.meta["node.id"])

    def raft_control_records(self) -> list[tuple[bytes, bytes]]:
        """KRaftVersion and Voters, for snapshots and an epoch's start (none at kraft.version 0)."""
        if self.kraft_version < 1 or self.voters is None:
            return []
        from kraftpy.controller.raft.voters import control_records

        return control_records(self.kraft_version, self.voters)

    def _load_voters(self) -> None:
        """kraft.version and voters: from the log's control batches, else the newest snapshot,
        else the raft bootstrap snapshot `kafka-storage format --standalone` writes."""
        from kraftpy.controller.raft.voters import RAFT_BOOTSTRAP_SNAPSHOT, from_control

        level, voters = (None, None)
        if self.snapshot is not None and self.snapshot.snapshot_id is not None \
                and self.snapshot.snapshot_id.end_offset > 0:
            level, voters = from_control(self.snapshot.control)
        start = self.snapshot.snapshot_id.end_offset if self.snapshot is not None and \
            self.snapshot.snapshot_id is not None else None
        for batch in self.metadata.read(start):
            if not batch.is_control:
                continue
            for record in batch.records():
                kind = parse_control_key(record.key)
                if kind in (5, 6):  # KRAFT_VERSION, KRAFT_VOTERS
                    got_level, got_voters = from_control([(kind, record.value)])
                    level = got_level if got_level is not None else level
                    voters = got_voters if got_voters is not None else voters
        self.voters_in_log = voters is not None
        bootstrap = self.log_dir / METADATA_PARTITION / RAFT_BOOTSTRAP_SNAPSHOT
        if voters is None and bootstrap.is_file():
            level, voters = from_control(read_snapshot(bootstrap).control)
        self.kraft_version = level or 0
        self.voters = voters

    def close(self) -> None:
        """Flush, close both logs, leave the clean-shutdown marker, release the lock."""
        if not self.read_only:
            self.metadata.close()
            if self.txn is not None:
                self.txn.close()
            files.atomic_write(self.log_dir / CLEAN_SHUTDOWN, b'{"version":0,"brokerEpoch":-1}')
        if self.lock is not None:
            self.lock.release()
            self.lock = None
