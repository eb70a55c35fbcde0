"""The controller's data directory: format it, open and recover it, append, flush, snapshot.

Layout, as Kafka's (`kafka-storage.sh format` plus a running KRaft node):

    <metadata.log.dir>/.lock                    held (flock) while a process uses the dir
    <metadata.log.dir>/meta.properties          version=1, cluster.id, node.id, directory.id
    <metadata.log.dir>/bootstrap.checkpoint     FeatureLevelRecords for the first start
    <metadata.log.dir>/.kafka_cleanshutdown     present only between a clean stop and a start
    <metadata.log.dir>/__cluster_metadata-0/    segments, snapshots, quorum-state, ...
    <metadata.log.dir>/__transaction_state-<n>/ the transaction log, Kafka's partitions (txn_state.py)

`MetadataStorage` is what the quorum loop writes through (`append`, `flush` in a worker
thread, `after_commit` for the snapshot policy). Startup loads the newest valid snapshot,
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
from kraftpy.controller.log.partition_log import (
    FlushTicket,
    PartitionLog,
)
from kraftpy.controller.log.retention import RetentionPolicy, SnapshotInfo, snapshots_to_drop
from kraftpy.controller.log.segment import parse_segment_name
from kraftpy.controller.log.snapshots import (
    Snapshot,
    SnapshotId,
    clean_partial_snapshots,
    delete_snapshots_before,
    encode_snapshot,
    list_snapshots,
    newest_whole_snapshot,
    read_snapshot,
    read_snapshot_timestamp,
    write_checkpoint_file,
    write_snapshot,
)
from kraftpy.controller.log.txn_state import TransactionStateLog, TxnFlush
from kraftpy.protocol.control_records import leader_change, parse_control_key
from kraftpy.protocol.metadata_frame import encode_metadata_record

log = logging.getLogger("kraftpy.log")

METADATA_PARTITION = "__cluster_metadata-0"
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
DEFAULT_SNAPSHOT_BYTES = 20 * 1024 * 1024
DEFAULT_SNAPSHOT_INTERVAL_MS = 60 * 60 * 1000


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
class SnapshotJob:
    """A snapshot whose records were taken on the event loop: `end_offset` must be committed
    before `write` (a worker thread: encode, file, fsync, rename, then the segments and older
    snapshots it covers are deleted); `finish` runs back on the event loop. The records are
    the controller's own objects: it replaces what it keeps, never edits it, so they hold."""

    storage: MetadataStorage
    snapshot_id: SnapshotId
    records: list[tuple[Any, int]]
    last_contained_log_timestamp: int
    now_ms: int

    @property
    def end_offset(self) -> int:
        return self.snapshot_id.end_offset

    def write(self) -> None:
        storage, sid = self.storage, self.snapshot_id
        if storage.metadata.high_watermark < sid.end_offset:
            raise RuntimeError(f"snapshot {sid.file_name} written before its offsets are durable")
        mdir = storage.log_dir / METADATA_PARTITION
        values = [encode_metadata_record(r, v) for r, v in self.records]
        write_snapshot(
            mdir,
            sid,
            values,
            last_contained_log_timestamp=self.last_contained_log_timestamp,
            timestamp=self.now_ms,
            control=storage.raft_control_records(),
        )
        log.info("snapshot %s written (%d records)", sid.file_name, len(values))
        storage._trim_after_snapshot(sid, self.last_contained_log_timestamp, self.now_ms)

    def finish(self) -> None:
        self.storage._snapshot_written(self)

    def abandon(self) -> None:
        """The write failed or never ran: a later commit may try again."""
        self.storage._job = None


@dataclass
class FlushRound:
    """What one commit round's fsync covers: each log's written bytes up to an end offset."""

    metadata: FlushTicket
    txn: TxnFlush | None

    def fsync(self) -> None:
        self.metadata.fsync()
        if self.txn is not None:
            self.txn.fsync()

    def release(self) -> None:
        """Close the round's file handles (after its fsync, or when it is abandoned)."""
        self.metadata.release()
        if self.txn is not None:
            self.txn.release()


@dataclass
class RetentionJob:
    """Deleting what metadata.max.retention.* let go, in a worker thread (nothing to wait for:
    every snapshot on disk is committed)."""

    storage: MetadataStorage
    now_ms: int
    end_offset: int = 0

    def write(self) -> None:
        self.storage._apply_retention(self.now_ms)

    def finish(self) -> None:
        self.storage._job = None
        self.storage._last_snapshot_bytes = self.storage._bytes_at(
            self.storage._last_snapshot_offset
        )

    def abandon(self) -> None:
        self.storage._job = None


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
        background_snapshots: bool = False,
        segment_ms: int | None = None,
        retention: RetentionPolicy | None = None,
        downloads: bool = False,
    ) -> None:
        self.log_dir = Path(log_dir)
        # A voter of a quorum of several: snapshots also come from the leader (see `installed`)
        # and a newest snapshot past the log end is one installed before a stop.
        self.downloads = downloads
        # The snapshot the last trim (a new snapshot, or retention) cut the log to: the raft
        # layer's log start. Set in the worker thread, read on the loop after `finish`.
        self.trimmed_to: SnapshotId | None = None
        # metadata.log.segment.ms: a segment older than this (by record timestamps) is rolled.
        self.segment_ms = segment_ms
        # metadata.max.retention.*: None keeps only the newest snapshot's suffix and one older
        # snapshot; a policy keeps older snapshots and segments until it lets them go (Kafka).
        self.retention = retention
        self._snapshots: list[tuple[SnapshotId, SnapshotInfo]] = []
        # True (the node): `after_commit` hands back a SnapshotJob for a worker thread.
        self.background_snapshots = background_snapshots
        self._job: SnapshotJob | None = None
        self.segment_bytes = segment_bytes
        self.policy = policy or SnapshotPolicy()
        self.read_only = read_only
        self.with_txn_log = with_txn_log
        self.txn_segment_bytes = txn_segment_bytes  # transaction.state.log.segment.bytes
        self.lock: files.DirLock | None = None
        self.meta: dict[str, str] = {}
        self.metadata: PartitionLog
        self.txn: TransactionStateLog | None = None
        self.snapshot: Snapshot | None = None
        self.leader_epoch = 0
        # KIP-853: kraft.version and the recorded voter set (None with static voters), and
        # whether the log or a snapshot holds that set (else only the raft bootstrap does).
        self.kraft_version = 0
        self.voters: Any = None
        self.voters_in_log = False
        self._last_snapshot_offset = 0
        self._last_snapshot_bytes = 0
        self._last_snapshot_ms: int | None = None

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
        if self.retention is not None and mdir.is_dir():
            self._snapshots = [
                (sid, SnapshotInfo(sid.end_offset, path.stat().st_size,
                                   read_snapshot_timestamp(path)))
                for sid, path in list_snapshots(mdir)
            ]
        self.snapshot = newest
        if newest is not None:
            self._last_snapshot_offset = newest.snapshot_id.end_offset
        self._last_snapshot_bytes = self._bytes_at(self._last_snapshot_offset)
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

    # --- recovery ---
    def replay_into(self, controller: Any) -> RecoveryStats:
        """Snapshot records, then the log after the snapshot, then the txn log."""
        from kraftpy.protocol.metadata_frame import decode_metadata_record

        stats = RecoveryStats()
        start = 0
        if self.snapshot is not None:
            stats.snapshot = self.snapshot.snapshot_id
            # As Kafka: snapshot records carry the snapshot's last contained offset.
            last_contained = self.snapshot.snapshot_id.end_offset - 1  # type: ignore[union-attr]
            for value in self.snapshot.values:
                record, version = decode_metadata_record(value)
                controller.replay(record, version, last_contained)
            stats.snapshot_records = len(self.snapshot.values)
            start = self.snapshot.snapshot_id.end_offset  # type: ignore[union-attr]
        for batch in self.metadata.read(start):
            if batch.is_control:
                continue
            offset = batch.base_offset
            for value in batch.values():
                if offset >= start:
                    record, version = decode_metadata_record(value)  # type: ignore[arg-type]
                    controller.replay(record, version, offset)
                    stats.log_records += 1
                offset += 1
        if self.txn is not None:
            stats.txn_records = self.replay_txn_into(controller)
        return stats

    def replay_txn_into(self, controller: Any, *, recovered: bool = True) -> int:
        """The transaction log's partitions, once the metadata log is replayed: each
        directory must be the metadata log's `__transaction_state` (by the topic id in its
        partition.metadata); with no such topic yet (kraftpy's former one-partition layout)
        the controller adopts the directories' topic id. Records count from 0 over all
        partitions (`TxnRecord`'s count); every one is durable when `recovered` (at open)."""
        from kraftpy.protocol.txn_log import decode_key, decode_value
        from kraftpy.protocol.uuid import kafka_uuid_str, parse_kafka_uuid

        assert self.txn is not None
        txns = getattr(controller, "transactions", None)
        if txns is not None and txns.topic_id is not None:
            self.txn.check_topic(kafka_uuid_str(txns.topic_id))
        elif txns is not None and (disk := self.txn.disk_topic_id()) is not None:
            txns.adopt(parse_kafka_uuid(disk), self.txn.last_epochs())
        count = 0
        for record in self.txn.read():
            key, _kv = decode_key(record.key)  # type: ignore[arg-type]
            value, _vv = decode_value(record.value)
            controller.replay_txn(key, value, count, record.partition)
            count += 1
        if recovered:  # at open: every record read is durable
            self.txn.set_end(count)
        return count

    def _bytes_at(self, offset: int) -> int:
        """Bytes of the metadata log below `offset`, for the snapshot byte trigger."""
        total = 0
        for seg in self.metadata.segments:
            if seg.next_offset <= offset:
                total += seg.size
            elif seg.base_offset < offset:
                total += seg.indexes.position_before(offset)
        return total

    # --- leadership ---
    def begin_epoch(self, *, voters: list[int] | None = None, now_ms: int) -> int:
        """Become leader in a new epoch: quorum-state first, then a LeaderChange batch. With
        kraft.version 1 and a voter set only the raft bootstrap snapshot holds, the batch also
        carries KRaftVersion and Voters, as Kafka's first leader writes them."""
        epoch = self.leader_epoch + 1
        me = self.node_id
        files.write_quorum_state(
            self.log_dir / METADATA_PARTITION,
            leader_id=me,
            leader_epoch=epoch,
            voters=voters or [me],
            data_version=1 if self.kraft_version >= 1 else 0,
        )
        key, value = leader_change(me, voters or [me])
        keys, values = [key], [value]
        if self.kraft_version >= 1 and not self.voters_in_log:
            for k, v in self.raft_control_records():
                keys.append(k)
                values.append(v)
            self.voters_in_log = True
        self.metadata.append(
            values, keys=keys, control=True, leader_epoch=epoch, timestamp=now_ms
        )
        self.metadata.flush()
        self.leader_epoch = epoch
        return epoch

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

    # --- the quorum loop's Storage protocol ---
    def metadata_end_offset(self) -> int:
        return self.metadata.log_end_offset

    def txn_end_offset(self) -> int:
        return self.txn.log_end_offset if self.txn is not None else 0

    def append(self, result: Any, now_ms: int) -> tuple[int, int]:
        """A ControllerResult's records, each log's together in one batch (which later results
        may share until the next flush); returns the offsets of its first records."""
        records = result.records
        if len(records) == 1:  # most operations: one record, no list comprehension
            record, version = records[0]
            offset = self.metadata.accumulate_one(
                encode_metadata_record(record, version), self.leader_epoch, now_ms)
        elif records:
            values = [encode_metadata_record(r, v) for r, v in records]
            offset = self.metadata.accumulate(
                values, leader_epoch=self.leader_epoch, timestamp=now_ms
            )
        else:
            offset = self.metadata.log_end_offset
        if not result.txn_records:
            return offset, self.txn.log_end_offset if self.txn is not None else 0
        return offset, self.append_txn(result.txn_records, now_ms)

    def append_txn(self, txn_records: list[Any], now_ms: int) -> int:
        """A result's TxnRecords, each partition's in one batch; the count of the first."""
        if self.txn is None:
            raise RuntimeError("transaction records but no transaction log is open")
        return self.txn.accumulate(txn_records, now_ms)

    def flush(self) -> tuple[int, int]:
        """fsync both logs (one write + one fsync each); returns the high watermarks."""
        hwm = self.metadata.flush()
        txn_hwm = self.txn.flush() if self.txn is not None else 0
        return hwm, txn_hwm

    def begin_flush(self) -> FlushRound:
        """`flush` in three steps for a pipelined commit: this writes what both logs have
        pending (on the caller's thread); `FlushRound.fsync` may then run in a worker thread
        while later operations are appended; `complete_flush` moves the high watermarks to
        what the round covered, and no further."""
        return FlushRound(self.metadata.begin_flush(),
                          self.txn.begin_flush() if self.txn is not None else None)

    def complete_flush(self, flush: FlushRound) -> tuple[int, int]:
        """After `flush.fsync()` returned: the new (metadata, txn) high watermarks."""
        flush.release()
        hwm = self.metadata.complete_flush(flush.metadata)
        txn_hwm = self.txn.complete_flush(flush.txn) if self.txn is not None and flush.txn else 0
        return hwm, txn_hwm

    def after_commit(self, controller: Any, now_ms: int, *, at: int | None = None
                     ) -> SnapshotId | SnapshotJob | RetentionJob | None:
        """Snapshot when the policy says so. On the event loop, right after a commit.

        In place (the default) only when nothing is appended past the high watermark, so the
        controller's state is the committed one; with `background_snapshots` a `SnapshotJob`
        is returned instead (its records taken now, its file written in a worker thread).
        `at` (a Raft voter): the offset the controller's state stands at, a batch boundary
        the caller waits to see committed; by default the log end offset.
        """
        if self._job is not None:  # one snapshot at a time
            return None
        if self._last_snapshot_ms is None:
            self._last_snapshot_ms = now_ms
        hwm = self.metadata.high_watermark if at is None else at
        bytes_since = self.metadata.size_bytes - self._last_snapshot_bytes
        if not self.policy.due(
            bytes_since=bytes_since,
            ms_since=now_ms - self._last_snapshot_ms,
            new_records=hwm > self._last_snapshot_offset,
        ):
            if self._retention_due(now_ms) == 0:
                return None
            if self.background_snapshots:
                self._job = RetentionJob(self, now_ms)
                return self._job
            self._apply_retention(now_ms)
            self._last_snapshot_bytes = self._bytes_at(self._last_snapshot_offset)
            return None
        if self.background_snapshots:
            return self.begin_snapshot(controller, now_ms, end=at)
        if self.metadata.log_end_offset > hwm:
            return None
        return self.take_snapshot(controller, now_ms)

    def begin_snapshot(self, controller: Any, now_ms: int, *, end: int | None = None
                       ) -> SnapshotJob:
        """Take the controller's records now, at the log end offset: the state there is exactly
        the replay of every record appended so far (durable or not yet). Encoding and writing
        them wait for the commit of that offset, in a worker thread. `end`: the offset the
        controller's state stands at, when that is not the log end (a Raft follower)."""
        last_ts = self.metadata.last_append_timestamp if end is None else None
        if end is None:
            end = self.metadata.log_end_offset
        else:
            last_ts = self._timestamp_below(end)
        records = controller.snapshot_records()
        if last_ts is None:
            last_ts = self.snapshot.last_contained_log_timestamp if self.snapshot else 0
        self._job = SnapshotJob(
            self, SnapshotId(end, self._epoch_of(end - 1)), records, last_ts, now_ms
        )
        return self._job

    def _snapshot_written(self, job: SnapshotJob) -> None:
        self._job = None
        end = max(job.snapshot_id.end_offset, self._last_snapshot_offset)  # (an install)
        self._last_snapshot_offset = end
        self._last_snapshot_ms = job.now_ms
        self._last_snapshot_bytes = self._bytes_at(end)

    def installed(self, snapshot: Snapshot, size: int, now_ms: int) -> None:
        """A snapshot downloaded from the leader is in place and the log starts at its end:
        it is now the one replay starts from and the one the policy counts from."""
        sid = snapshot.snapshot_id
        assert sid is not None
        self.snapshot = snapshot
        self._last_snapshot_offset = sid.end_offset
        self._last_snapshot_ms = now_ms
        self._last_snapshot_bytes = 0
        self.trimmed_to = sid
        if self.retention is not None:
            self._snapshots = [(sid, SnapshotInfo(sid.end_offset, size,
                                                  snapshot.last_contained_log_timestamp))]

    def _timestamp_below(self, end: int) -> int | None:
        """The timestamp of the batch holding offset `end - 1` (Kafka's last contained log
        timestamp), found through the offset index; None if the log no longer holds it."""
        if end <= self.metadata.log_start_offset:
            return None
        for batch in self.metadata.read(end - 1):
            return batch.max_timestamp if batch.base_offset < end else None
        return None

    def take_snapshot(self, controller: Any, now_ms: int) -> SnapshotId:
        """Write a snapshot of the committed state at the high watermark, then trim the log."""
        hwm = self.metadata.high_watermark
        epoch = self._epoch_of(hwm - 1)
        sid = SnapshotId(hwm, epoch)
        values = [encode_metadata_record(r, v) for r, v in controller.snapshot_records()]
        last_ts = self._last_timestamp()
        write_snapshot(
            self.log_dir / METADATA_PARTITION,
            sid,
            values,
            last_contained_log_timestamp=last_ts,
            timestamp=now_ms,
            control=self.raft_control_records(),
        )
        log.info("snapshot %s written (%d records)", sid.file_name, len(values))
        self._last_snapshot_offset = hwm
        self._last_snapshot_ms = now_ms
        self._trim_after_snapshot(sid, last_ts, now_ms)
        self._last_snapshot_bytes = self._bytes_at(hwm)
        return sid

    def _trim_after_snapshot(self, sid: SnapshotId, last_ts: int, now_ms: int) -> None:
        """Once a snapshot is renamed into place: what it (or retention) lets go."""
        mdir = self.log_dir / METADATA_PARTITION
        if self.retention is None:
            self.metadata.delete_segments_below(sid.end_offset)
            delete_snapshots_before(mdir, sid, keep=1)
            self.trimmed_to = sid
            return
        size = (mdir / sid.file_name).stat().st_size
        self._snapshots = [*self._snapshots, (sid, SnapshotInfo(sid.end_offset, size, last_ts))]
        self._apply_retention(now_ms)

    def _retention_due(self, now_ms: int) -> int:
        """How many snapshots retention lets go now (0 without a policy)."""
        if self.retention is None or len(self._snapshots) < 2:
            return 0
        return snapshots_to_drop(
            [info for _, info in self._snapshots],
            log_bytes=self.metadata.size_bytes,
            log_bytes_from=self.metadata.size_from,
            now_ms=now_ms,
            policy=self.retention,
        )

    def _apply_retention(self, now_ms: int) -> None:
        """Kafka's deleteBeforeSnapshot: segments wholly below the oldest kept snapshot, then
        the older snapshots."""
        dropped = self._retention_due(now_ms)
        if not dropped:
            return
        keep_from, _ = self._snapshots[dropped]
        self.metadata.delete_segments_below(keep_from.end_offset)
        delete_snapshots_before(self.log_dir / METADATA_PARTITION, keep_from, keep=0)
        self._snapshots = self._snapshots[dropped:]
        self.trimmed_to = keep_from
        log.info("retention: %d older snapshot(s) deleted; the log now starts at or before %d",
                 dropped, keep_from.end_offset)

    def _epoch_of(self, offset: int) -> int:
        epoch = 0
        for e, start in self.metadata.leader_epochs:
            if start <= offset:
                epoch = e
        return epoch

    def _last_timestamp(self) -> int:
        seg = self.metadata.active
        if seg.indexes.max_timestamp >= 0:
            return seg.indexes.max_timestamp
        return self.snapshot.last_contained_log_timestamp if self.snapshot else 0

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
