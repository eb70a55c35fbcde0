"""The exactly-once audit's inputs, read from disk: each cluster's context (its metadata log's
producer-id blocks and topic configs, its transaction coordinators' state, the audit's "now")
and each replica's batches, snapshots and transaction indexes.

`kraftpy eos-audit` calls these in one process; the Spark job calls `build_contexts` on the
driver and `audit_replica_files` in one task per replica, so both audit the same rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftpy.tools.logdecode.audit import AUDIT_TYPES, OWN_BLOCK_EPOCH, AuditRecord

from .batches import Batch, scan_batches
from .eos import (
    ClusterContext,
    CoordinatorState,
    GrantedBlock,
    Replica,
    ReplicaAudit,
    ReplicaAuditor,
    Settings,
    Snapshot,
)
from .logdirs import LogDir
from .logdirs import Replica as ReplicaFiles
from .logdirs import replicas as find_replicas
from .model import Problem, RecordInfo
from .reader import read_log_file
from .small_files import SmallFileError, read_producer_state, read_txn_index

CONFIG_RECORD = "CONFIG_RECORD"
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4  # ConfigResource.Type
TRANSACTION_STATE = "__transaction_state"


@dataclass
class Contexts:
    by_cluster: dict[str, ClusterContext] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)  # damage in metadata/coordinator logs

    def of(self, cluster: str) -> ClusterContext:
        found = self.by_cluster.get(cluster)
        if found is None:
            found = self.by_cluster[cluster] = ClusterContext(cluster)
        return found


def build_contexts(log_dirs: Sequence[LogDir], *, now_ms: int | None = None,
                   block_size: int = 1000) -> Contexts:
    """Each cluster's context, from the metadata logs and `__transaction_state` replicas among
    the log directories. "Now" is `now_ms` when given, else the last record of the metadata log
    (a running cluster writes one every 500 ms), else the newest segment file's mtime."""
    from kraftpy.tools.pid_audit import collect_files

    out = Contexts()
    metadata = find_replicas(log_dirs, metadata=True)
    files = [(f, r.cluster) for r in metadata for f in (*r.checkpoints, *r.segments)]
    configs: list[AuditRecord] = []
    audit, problems = collect_files(files, block_size=block_size,
                                    types=AUDIT_TYPES | {CONFIG_RECORD}, others=configs)
    out.problems.extend(problems)
    for r in metadata:
        context = out.of(r.cluster)
        context.has_metadata = True
        for segment in r.segments:
            for item in scan_batches(segment):
                if type(item) is Batch and item.max_timestamp > context.as_of_ms:
                    context.as_of_ms = item.max_timestamp
                    context.as_of_source = "the metadata log's last record"
    for block in audit.blocks:
        out.of(block.cluster).blocks.append(GrantedBlock(
            block.first_id, block.last_id, block.offset, block.broker_id,
            block.broker_epoch if block.broker_epoch != OWN_BLOCK_EPOCH else -1))
    # Ids below the first block in the inputs were granted before it: in segments a snapshot
    # replaced, or by ZooKeeper before a migration to KRaft.
    for cluster, next_id in audit.seed_next_id.items():
        out.of(cluster).granted_before = next_id
    for context in out.by_cluster.values():
        if context.blocks:
            first = min(b.first_id for b in context.blocks)
            context.granted_before = max(context.granted_before, first)
    for cluster, (policies, default) in _cleanup_policies(configs).items():
        out.of(cluster).cleanup_policies = policies
        out.of(cluster).default_cleanup_policy = default
    for cluster, states in _coordinator_states(log_dirs, out.problems).items():
        context = out.of(cluster)
        context.has_transaction_log = True
        context.coordinator = states
    data = find_replicas(log_dirs)
    for r in data:
        context = out.of(r.cluster)
        if now_ms is None and not context.has_metadata:
            for segment in r.segments:
                mtime = int(segment.path.stat().st_mtime * 1000)
                if mtime > context.as_of_ms:
                    context.as_of_ms = mtime
                    context.as_of_source = "the newest segment file's modification time"
    for context in out.by_cluster.values():
        if now_ms is not None:
            context.as_of_ms, context.as_of_source = now_ms, "the time given (--now)"
        context.__post_init__()  # sort the blocks
    return out


def _cleanup_policies(configs: list[AuditRecord]) -> dict[str, tuple[dict[str, str], str]]:
    """Per cluster, each topic's cleanup.policy and the cluster default (`log.cleanup.policy`)
    as the metadata log's ConfigRecords leave them (a null value removes a setting)."""
    latest: dict[tuple[str, int, str, str], str | None] = {}
    for rec in sorted(configs, key=lambda r: (r.file_kind != "snapshot", r.offset)):
        d = rec.data
        latest[(rec.cluster, d.get("resourceType", -1), d.get("resourceName", ""),
                d.get("name", ""))] = d.get("value")
    out: dict[str, tuple[dict[str, str], str]] = {}
    for (cluster, kind, name, config), value in sorted(latest.items()):
        policies, default = out.get(cluster, ({}, "delete"))
        if kind == TOPIC_RESOURCE and config == "cleanup.policy" and value is not None:
            policies[name] = value
        elif kind == BROKER_RESOURCE and name == "" and config == "log.cleanup.policy" \
                and value is not None:
            default = value
        out[cluster] = (policies, default)
    return out


def _coordinator_states(log_dirs: Sequence[LogDir],
                        problems: list[Problem]) -> dict[str, dict[int, CoordinatorState]]:
    """Per cluster and producer id, the transactional id holding it now: the latest record of
    each transactional id in `__transaction_state` (any replica; a tombstone removes it)."""
    latest: dict[tuple[str, str], tuple[int, Any]] = {}
    for r in find_replicas(log_dirs):
        if r.topic != TRANSACTION_STATE:
            continue
        for segment in r.segments:
            for item in read_log_file(segment, with_data=True):
                if type(item) is Problem:
                    problems.append(item)
                    continue
                if type(item) is not RecordInfo or item.type_name != "TRANSACTION_LOG":
                    continue
                tid = (item.key_data or {}).get("transactionalId")
                if tid is None:
                    continue
                key = (r.cluster, tid)
                if key not in latest or item.offset >= latest[key][0]:
                    latest[key] = (item.offset, item.data)
    out: dict[str, dict[int, CoordinatorState]] = {}
    for r in find_replicas(log_dirs):
        if r.topic == TRANSACTION_STATE:
            out.setdefault(r.cluster, {})
    for (cluster, tid), (_, value) in sorted(latest.items()):
        if value is None:
            continue
        parts = frozenset((p["topic"], i) for p in value.get("transactionPartitions") or ()
                          for i in p.get("partitionIds", ()))
        out.setdefault(cluster, {})[value["producerId"]] = CoordinatorState(
            tid, value["producerId"], value["producerEpoch"], value["transactionStatus"], parts)
    return out


BatchSink = Callable[[str, int, Batch], None]  # (file, segment base offset, batch)


def audit_replica_files(replica: ReplicaFiles, context: ClusterContext, settings: Settings,
                        *, on_batch: BatchSink | None = None) -> ReplicaAudit:
    """Scan a replica's segments in offset order and audit them; `on_batch` sees every batch
    (for the batches table)."""
    auditor, problems = replica_auditor(replica, context, settings)
    for path, segment, item in replica_batches(replica, problems):
        if on_batch is not None:
            on_batch(path, segment, item)
        auditor.add(path, item)
    return auditor.finish(problems)


def replica_auditor(replica: ReplicaFiles, context: ClusterContext, settings: Settings
                    ) -> tuple[ReplicaAuditor, list[tuple[str, int, int | None, str]]]:
    """An auditor for the replica with its snapshots and transaction indexes read, and the
    list its damage goes to (problems reading them first)."""
    problems: list[tuple[str, int, int | None, str]] = []
    snapshots = []
    for snap in replica.producer_snapshots:
        try:
            decoded = read_producer_state(Path(snap.path).read_bytes(), snap.base_offset)
            snapshots.append(Snapshot(snap.base_offset, decoded["entries"]))
        except (SmallFileError, OSError) as e:
            snapshots.append(Snapshot(snap.base_offset, None, str(e)))
    txn_index: list[tuple[int, int, int]] | None = None
    if replica.has_indexes:
        txn_index = []
        for index in replica.txn_indexes:
            try:
                decoded = read_txn_index(Path(index.path).read_bytes(), index.base_offset)
            except (SmallFileError, OSError) as e:
                problems.append((str(index.path), 0, None, f"bad-file: {e}"))
                continue
            txn_index.extend((e["producerId"], e["firstOffset"], e["lastOffset"])
                             for e in decoded["entries"])
    log_start = replica.segments[0].base_offset if replica.segments else 0
    who = Replica(replica.cluster, replica.broker, replica.topic, replica.partition)
    auditor = ReplicaAuditor(who, context=context, settings=settings, log_start=log_start,
                             segments=len(replica.segments), snapshots=snapshots,
                             txn_index=txn_index)
    return auditor, problems


def replica_batches(replica: ReplicaFiles, problems: list[tuple[str, int, int | None, str]]
                    ) -> Iterator[tuple[str, int, Batch]]:
    """(file, segment base offset, batch) of every segment in offset order; damage goes to
    `problems` as (file, position, offset, message)."""
    for segment in replica.segments:
        path = str(segment.path)
        for item in scan_batches(segment):
            if type(item) is Batch:
                yield path, segment.base_offset, item
            else:
                problems.append((path, item.position, item.offset,
                                 f"{item.kind}: {item.message}"))
