"""Opening a data dir for serving: format once, recover, and refuse what cannot be run.

`MetadataStorage` (controller/log) recovers both logs, refusing one that has lost records
(`LostRecordsError`, exit 2) before anything in the directory changes. A lone voter's disk
is the majority, so all of it is committed: `recover_lone_voter` replays the newest whole
snapshot, the metadata log and the transaction log into its controller and its committed
image with the one replay (`controller/replay.py`), and refuses a level it cannot run or a
record it cannot read (exit 2) before anything is written. A bare data dir is formatted first
(meta.properties + bootstrap.checkpoint), and says so.
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kraftpy.controller import replay
from kraftpy.controller.committed_image import CommittedImage
from kraftpy.controller.config import ServerConfig
from kraftpy.controller.feature_control import (
    KRAFT_VERSION,
    METADATA_VERSION,
    UnsupportedFeatureLevel,
    format_levels,
    unsupported,
)
from kraftpy.controller.log import files
from kraftpy.controller.log.consistency import InconsistentLogError
from kraftpy.controller.log.partition_log import LogCorruptError
from kraftpy.controller.log.retention import RetentionPolicy
from kraftpy.controller.log.snapshots import SnapshotError, read_snapshot
from kraftpy.controller.log.storage import (
    MetadataStorage,
    RecoveryStats,
    SnapshotPolicy,
    format_storage,
    random_uuid,
    read_bootstrap,
)
from kraftpy.controller.quorum_controller import QuorumController
from kraftpy.controller.raft.voters import (
    RAFT_BOOTSTRAP_SNAPSHOT,
    VoterSetError,
    check_single_voter,
    from_control,
)
from kraftpy.controller.settings import AdvertisedEndpoint, ControllerSettings
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.uuid import parse_kafka_uuid

log = logging.getLogger("kraftpy.recovery")
NO_VOTERS = ("kraft.version level 1 with no voter set (formatted with --no-initial-controllers, "
             "to join a quorum with AddRaftVoter); without controller.quorum.bootstrap.servers "
             "to find that quorum this is not supported by kraftpy")

SECURITY_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


class RecoveryError(RuntimeError):
    """The data dir cannot be used; the message names the file and the reason."""

    exit_code = 1


class LostRecordsError(RecoveryError):
    """The metadata log has lost records (`controller/log/consistency.py`): the node refuses
    to start, as Kafka does, with nothing in the data dir changed. `kraftpy serve` exits 2."""

    exit_code = 2


class UnsupportedFeatures(RecoveryError):
    """The data dir finalizes a feature level this node cannot run: refused before anything
    is written (the command exits 2)."""

    exit_code = 2


def controller_settings(config: ServerConfig, cluster_id: str) -> ControllerSettings:
    """Kafka properties mapped onto what the sans-IO controller is told."""
    endpoints = tuple(
        AdvertisedEndpoint(ep.name, config.advertised(ep.name).host,
                           config.advertised(ep.name).port,
                           SECURITY_PROTOCOL_IDS[config.security_protocol(ep.name)])
        for ep in config.listeners
    )
    extra: dict[str, Any] = {}
    if "metadata.version" in config.extra:
        extra["metadata_version"] = int(config.extra["metadata.version"])
    if "min.insync.replicas" in config.extra:
        extra["min_insync_replicas"] = int(config.extra["min.insync.replicas"])
    return ControllerSettings(
        cluster_id=cluster_id,
        txn_topic=config.txn_topic,
        node_id=config.node_id,
        broker_session_timeout_ms=config.broker_session_timeout_ms,
        broker_heartbeat_interval_ms=config.broker_heartbeat_interval_ms,
        transaction_max_timeout_ms=config.transaction_max_timeout_ms,
        allocate_producer_ids_quota=config.producer_id_quota_per_broker,
        advertised_listeners=endpoints,
        controller_listener_names=config.controller_listener_names,
        rack=config.extra.get("broker.rack"),
        max_idle_interval_ms=config.metadata_max_idle_interval_ms,
        static_configs=dict(config.properties),
        **extra,
    )


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _format_if_new(config: ServerConfig, log_dir: Path) -> None:
    if (log_dir / files.META_PROPERTIES).exists():
        return
    if log_dir.is_dir():
        leftovers = [p.name for p in log_dir.iterdir() if p.name != files.LOCK_FILE]
        if leftovers:
            raise RecoveryError(
                f"{log_dir} has no {files.META_PROPERTIES} but is not empty "
                f"({', '.join(sorted(leftovers)[:5])}); refusing to format over it"
            )
    cluster_id = config.extra.get("cluster.id") or random_uuid()
    metadata_version = controller_settings(config, cluster_id).metadata_version
    # What `kafka-storage format` would finalize at that metadata.version.
    levels = format_levels(None, {METADATA_VERSION: metadata_version})
    levels.pop(METADATA_VERSION)
    format_storage(log_dir, cluster_id=cluster_id, node_id=config.node_id,
                   metadata_version=metadata_version, features=levels, now_ms=_now_ms())
    log.info("formatted %s for a new cluster %s (node %d, metadata.version %d)",
             log_dir.resolve(), cluster_id, config.node_id, metadata_version)


def _check_voters(voters: Any, node_id: int, directory_id: uuid.UUID, where: str) -> None:
    """A KIP-853 voter set kraftpy can lead: this node alone (exit 2 otherwise)."""
    try:
        check_single_voter(voters, node_id, directory_id)
    except VoterSetError as exc:
        raise UnsupportedFeatures(f"{where}: {exc}") from None


def _check_bootstrap(log_dir: Path, node_id: int, *, lone: bool = True) -> None:
    """A directory whose metadata log is still empty starts from bootstrap.checkpoint: refuse
    a level we cannot run before opening (and so writing to) the directory. `lone`: the
    node leads alone, so a raft bootstrap voter set must be this node."""
    partition = log_dir / "__cluster_metadata-0"
    raft_bootstrap = partition / RAFT_BOOTSTRAP_SNAPSHOT
    if raft_bootstrap.is_file():  # a dynamic quorum's voters (kafka-storage format --standalone)
        try:
            level, voters = from_control(read_snapshot(raft_bootstrap).control)
            meta = files.read_meta_properties(log_dir)
        except (SnapshotError, DecodeError, files.LogDirError) as exc:
            raise RecoveryError(f"{raft_bootstrap}: {exc}") from None
        reason = unsupported({KRAFT_VERSION: level or 0})
        if reason:
            raise UnsupportedFeatures(f"{raft_bootstrap}: {reason}")
        if level and voters is None:
            raise UnsupportedFeatures(f"{raft_bootstrap}: {NO_VOTERS}")
        if voters is not None and lone:
            text = meta.get("directory.id")
            _check_voters(voters, node_id,
                          parse_kafka_uuid(text) if text else uuid.UUID(int=0), str(raft_bootstrap))
    if partition.is_dir() and any(p.suffix in (".log", ".checkpoint") and p.stat().st_size
                                  and p != raft_bootstrap for p in partition.iterdir()):
        return  # the log's own records decide; replay checks them
    try:
        mv, features = read_bootstrap(log_dir)
    except (SnapshotError, DecodeError) as exc:
        raise RecoveryError(f"{log_dir / files.BOOTSTRAP_CHECKPOINT}: {exc}") from None
    if mv is None:
        return
    reason = unsupported({**features, METADATA_VERSION: mv})
    if reason:
        raise UnsupportedFeatures(f"{log_dir / files.BOOTSTRAP_CHECKPOINT}: {reason}")


def directory_id(storage: MetadataStorage) -> uuid.UUID:
    """meta.properties' directory.id (Kafka's DirectoryId.UNASSIGNED when it has none)."""
    text = storage.meta.get("directory.id")
    try:
        return parse_kafka_uuid(text) if text else uuid.UUID(int=0)
    except ValueError:
        return uuid.UUID(int=0)


def retention_policy(config: ServerConfig) -> RetentionPolicy | None:
    """Kafka's retention when `metadata.max.retention.*` is configured (an unset one takes
    Kafka's default); otherwise None: each new snapshot trims the log below itself."""
    max_bytes, max_ms = config.metadata_max_retention_bytes, config.metadata_max_retention_ms
    if max_bytes is None and max_ms is None:
        return None
    default = RetentionPolicy()
    return RetentionPolicy(max_bytes=default.max_bytes if max_bytes is None else max_bytes,
                           max_ms=default.max_ms if max_ms is None else max_ms)


def open_storage(config: ServerConfig, *, downloads: bool = False) -> MetadataStorage:
    """Format the data dir if new, refuse a bootstrap this node cannot run, open and recover
    both logs (`downloads`: a voter of several, whose snapshot past its log end is an
    interrupted install rather than lost records)."""
    log_dir = Path(config.metadata_log_dir)
    try:
        _format_if_new(config, log_dir)
        _check_bootstrap(log_dir, config.node_id, lone=not downloads)
        return MetadataStorage.open(
            log_dir, node_id=config.node_id, segment_bytes=config.metadata_log_segment_bytes,
            policy=SnapshotPolicy(max_record_bytes=config.snapshot_max_record_bytes,
                                  interval_ms=config.snapshot_interval_ms),
            segment_ms=config.metadata_log_segment_ms,
            retention=retention_policy(config),
            txn_segment_bytes=config.txn_topic.segment_bytes,
            downloads=downloads,
        )
    except InconsistentLogError as exc:
        raise LostRecordsError(str(exc)) from None
    except (OSError, files.LogDirError, LogCorruptError, SnapshotError) as exc:
        raise RecoveryError(str(exc)) from None


def node_settings(config: ServerConfig, storage: MetadataStorage) -> ControllerSettings:
    """What this node's controller is built with: the properties, meta.properties' directory
    id (new partitions' directory) and bootstrap.checkpoint's levels."""
    settings = replace(controller_settings(config, storage.cluster_id),
                       log_directory_id=directory_id(storage))
    mv, features = read_bootstrap(Path(config.metadata_log_dir))
    if mv is not None:
        settings = replace(settings, metadata_version=mv, bootstrap_features=features)
    return settings


@dataclass
class LoneVoterState:
    """A lone voter's state at open: its whole disk replayed."""

    controller: QuorumController
    image: CommittedImage
    applied: int  # the offset both stand at: the metadata log's end
    stats: RecoveryStats


def recover_lone_voter(config: ServerConfig, storage: MetadataStorage,
                       settings: ControllerSettings | None = None) -> LoneVoterState:
    """Everything on a lone voter's disk is committed (its disk is the majority), so the
    newest whole snapshot, the metadata log and the transaction log are replayed now, into
    its controller and its committed image, and a level this node cannot run or a record it
    cannot read refuses the start here, before anything is written."""
    log_dir = Path(config.metadata_log_dir)
    if settings is None:
        settings = node_settings(config, storage)
    controller = QuorumController(settings)
    image = QuorumController(settings)
    stats = RecoveryStats(snapshot=storage.snapshot.snapshot_id if storage.snapshot else None)
    try:
        reason = unsupported({KRAFT_VERSION: storage.kraft_version})
        if reason:
            raise UnsupportedFeatureLevel(reason)
        if storage.kraft_version and storage.voters is None:
            raise UnsupportedFeatureLevel(NO_VOTERS)
        if storage.voters is not None:
            try:
                check_single_voter(storage.voters, config.node_id, directory_id(storage))
            except VoterSetError as exc:
                raise UnsupportedFeatureLevel(str(exc)) from None
        for target in (controller, image):
            target.features.kraft_version = storage.kraft_version
        applied, stats.snapshot_records, stats.log_records = replay.replay_snapshot_and_log(
            (controller, image), storage.snapshot, storage.metadata, None)
        if storage.txn is not None:
            stats.txn_records = replay.replay_transaction_log(controller, storage.txn)
        if not controller.features.metadata_version:  # empty log: the bootstrap will run
            reason = unsupported({**settings.bootstrap_features,
                                  METADATA_VERSION: settings.metadata_version})
            if reason:
                raise UnsupportedFeatureLevel(reason)
    except UnsupportedFeatureLevel as exc:
        raise UnsupportedFeatures(f"{log_dir}: {exc}") from None
    except (DecodeError, ValueError) as exc:
        raise RecoveryError(f"cannot replay {log_dir}: {exc}") from None
    except files.LogDirError as exc:
        raise RecoveryError(str(exc)) from None
    controller.on_committed(applied, storage.txn.durable if storage.txn else 0)
    return LoneVoterState(controller, CommittedImage(image, applied), applied, stats)


def log_recovered(config: ServerConfig, stats: RecoveryStats, storage: MetadataStorage,
                  started: float) -> None:
    log.info("recovered %s in %.0f ms: %d snapshot records%s, %d log records, %d transaction "
             "records; log end offset %d", config.metadata_log_dir,
             (time.monotonic() - started) * 1000, stats.snapshot_records,
             f" ({stats.snapshot.file_name})" if stats.snapshot else "", stats.log_records,
             stats.txn_records, storage.metadata.log_end_offset)
