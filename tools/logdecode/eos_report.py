"""The exactly-once audit's tables and report: every replica's rows, the cluster-wide
summaries built from them, and the report in words (text) and as one JSON document.

The summaries count each partition once, from its most complete replica (the highest log end
offset; the lowest broker id among equals); findings and producer state are per replica, since
every broker keeps its own log and its own producer state.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import IO, Any

from .eos import (
    ERROR,
    FINDING_KINDS,
    NOTE,
    ClusterContext,
    Finding,
    PartitionSummary,
    Producer,
    ReplicaAudit,
    SnapshotEntry,
    Transaction,
    row_dict,
)
from .model import Problem


@dataclass(slots=True)
class TopicSummary:
    cluster: str
    topic: str
    partitions: int
    records: int
    bytes: int
    data_records: int
    control_records: int
    idempotent_records: int
    transactional_records: int
    committed_records: int
    aborted_records: int
    open_records: int
    producers: int
    findings: int  # errors, over every replica of the topic

    def as_dict(self) -> dict[str, Any]:
        return row_dict(self)


@dataclass(slots=True)
class ProducerIdSummary:
    """Every producer id any replica holds; its counts from each partition's most complete
    replica (0 partitions: an id only a lagging or diverging replica holds)."""

    cluster: str
    producer_id: int
    producer_epoch: int  # the highest seen
    partitions: int
    batches: int
    records: int
    bytes: int
    transactional: bool
    committed: int
    aborted: int
    last_timestamp: int
    active: bool
    granted_by: str
    block_offset: int
    block_broker_id: int
    block_first_id: int
    block_last_id: int

    def as_dict(self) -> dict[str, Any]:
        return row_dict(self)


@dataclass(slots=True)
class BrokerSummary:
    cluster: str
    broker: str
    replicas: int
    batches: int
    records: int
    bytes: int
    producers: int  # producer entries over its replicas
    active_producers: int
    state_entries: int  # batch metadata entries it keeps now (up to 5 per producer)
    state_entries_kip: int  # under the draft KIP (the latest batch per producer)
    findings: int

    def as_dict(self) -> dict[str, Any]:
        return row_dict(self)


# (table name, row class), in the order the job writes them.
TABLE_ROWS = {
    "partitions": PartitionSummary,
    "producers": Producer,
    "transactions": Transaction,
    "findings": Finding,
    "producer_state": SnapshotEntry,
    "topics": TopicSummary,
    "producer_ids": ProducerIdSummary,
    "brokers": BrokerSummary,
}
_SQL_TYPES = {"str": "string", "int": "bigint", "bool": "boolean", "str | None": "string"}
# Kafka's int32 and int16 fields (as the batches table has them); every other number is a bigint.
_INT_COLUMNS = frozenset({"partition", "producer_epoch", "coordinator_epoch", "last_sequence",
                          "offset_delta", "block_broker_id"})


def table_ddl(table: str) -> str:
    """A table's Spark schema, from its row class."""
    return ", ".join(f"{f.name} {'int' if f.name in _INT_COLUMNS else _SQL_TYPES[f.type]}"
                     for f in fields(TABLE_ROWS[table]))


def table_columns(table: str) -> list[str]:
    return [f.name for f in fields(TABLE_ROWS[table])]


@dataclass
class EosResult:
    contexts: dict[str, ClusterContext] = field(default_factory=dict)
    partitions: list[PartitionSummary] = field(default_factory=list)
    producers: list[Producer] = field(default_factory=list)
    transactions: list[Transaction] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    producer_state: list[SnapshotEntry] = field(default_factory=list)
    topics: list[TopicSummary] = field(default_factory=list)
    producer_ids: list[ProducerIdSummary] = field(default_factory=list)
    brokers: list[BrokerSummary] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)  # in metadata/coordinator logs

    def add(self, audit: ReplicaAudit) -> None:
        self.partitions.append(audit.summary)
        self.producers.extend(audit.producers)
        self.transactions.extend(audit.transactions)
        self.findings.extend(audit.findings)
        self.producer_state.extend(audit.snapshot_entries)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    def summarize(self) -> None:
        """The cluster-wide tables from the replicas' rows."""
        self.topics, self.producer_ids, self.brokers = summaries(
            self.partitions, self.producers, self.findings)


def _broker_key(broker: str) -> tuple[int, str]:
    return (int(broker), "") if broker.lstrip("-").isdigit() else (1 << 62, broker)


def primary_replicas(partitions: list[PartitionSummary]) -> set[tuple[str, str, str, int]]:
    """(cluster, broker, topic, partition) of each partition's most complete replica."""
    best: dict[tuple[str, str, int], tuple[tuple[int, tuple[int, str]], PartitionSummary]] = {}
    for p in partitions:
        key = (p.cluster, p.topic, p.partition)
        rank = (-p.log_end_offset, _broker_key(p.broker))
        if key not in best or rank < best[key][0]:
            best[key] = (rank, p)
    return {(p.cluster, p.broker, p.topic, p.partition) for _, p in best.values()}


def summaries(partitions: list[PartitionSummary], producers: list[Producer],
              findings: list[Finding]
              ) -> tuple[list[TopicSummary], list[ProducerIdSummary], list[BrokerSummary]]:
    primary = primary_replicas(partitions)
    errors = Counter((f.cluster, f.topic) for f in findings if f.severity == ERROR)
    broker_errors = Counter((f.cluster, f.broker) for f in findings if f.severity == ERROR)
    pids: dict[tuple[str, str], set[int]] = {}
    for p in producers:
        if (p.cluster, p.broker, p.topic, p.partition) in primary:
            pids.setdefault((p.cluster, p.topic), set()).add(p.producer_id)
    topics: dict[tuple[str, str], TopicSummary] = {}
    brokers: dict[tuple[str, str], BrokerSummary] = {}
    for s in partitions:
        b = brokers.get((s.cluster, s.broker))
        if b is None:
            b = brokers[(s.cluster, s.broker)] = BrokerSummary(
                s.cluster, s.broker, 0, 0, 0, 0, 0, 0, 0, 0, broker_errors[(s.cluster, s.broker)])
        b.replicas += 1
        b.batches += s.batches
        b.records += s.records
        b.bytes += s.bytes
        b.producers += s.producers
        b.active_producers += s.active_producers
        b.state_entries += s.state_entries
        b.state_entries_kip += s.state_entries_kip
        if (s.cluster, s.broker, s.topic, s.partition) not in primary:
            continue
        t = topics.get((s.cluster, s.topic))
        if t is None:
            t = topics[(s.cluster, s.topic)] = TopicSummary(
                s.cluster, s.topic, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                len(pids.get((s.cluster, s.topic), ())), errors[(s.cluster, s.topic)])
        t.partitions += 1
        t.records += s.records
        t.bytes += s.bytes
        t.data_records += s.data_records
        t.control_records += s.control_records
        t.idempotent_records += s.idempotent_records
        t.transactional_records += s.transactional_records
        t.committed_records += s.committed_records
        t.aborted_records += s.aborted_records
        t.open_records += s.open_records
    ids: dict[tuple[str, int], ProducerIdSummary] = {}
    for p in producers:  # every id any replica holds; its counts from the primary replicas
        s2 = ids.get((p.cluster, p.producer_id))
        if s2 is None:
            s2 = ids[(p.cluster, p.producer_id)] = ProducerIdSummary(
                p.cluster, p.producer_id, p.producer_epoch, 0, 0, 0, 0, False, 0, 0, -1, False,
                p.granted_by, p.block_offset, p.block_broker_id, p.block_first_id, p.block_last_id)
        s2.producer_epoch = max(s2.producer_epoch, p.producer_epoch)
        s2.last_timestamp = max(s2.last_timestamp, p.last_timestamp)
        s2.active = s2.active or p.active
        s2.transactional = s2.transactional or p.transactional
        if (p.cluster, p.broker, p.topic, p.partition) not in primary:
            continue
        s2.partitions += 1
        s2.batches += p.batches
        s2.records += p.records
        s2.bytes += p.bytes
        s2.committed += p.committed
        s2.aborted += p.aborted
    return ([topics[k] for k in sorted(topics)],
            [ids[k] for k in sorted(ids)],
            [brokers[k] for k in sorted(brokers, key=lambda k: (k[0], _broker_key(k[1])))])


# --- the report ----------------------------------------------------------------------------------

NOTE_LINES = 20  # notes of one kind shown in the text report (the tables have them all)


def report_dict(result: EosResult) -> dict[str, Any]:
    kinds = Counter(f.kind for f in result.findings)
    return {
        "clusters": [{
            "cluster": c.cluster, "as_of_ms": c.as_of_ms, "as_of": c.as_of_source,
            "metadata_log": c.has_metadata, "blocks": len(c.blocks),
            "transaction_log": c.has_transaction_log,
        } for c in sorted(result.contexts.values(), key=lambda c: c.cluster)],
        "totals": {
            "replicas": len(result.partitions),
            "batches": sum(p.batches for p in result.partitions),
            "records": sum(p.records for p in result.partitions),
            "bytes": sum(p.bytes for p in result.partitions),
            "findings": len(result.errors),
            "notes": len(result.findings) - len(result.errors),
        },
        "finding_kinds": {k: kinds[k] for k in FINDING_KINDS if kinds[k]},
        "findings": [f.as_dict() for f in result.findings if f.severity == ERROR],
        "notes": [f.as_dict() for f in result.findings if f.severity == NOTE],
        "topics": [t.as_dict() for t in result.topics],
        "brokers": [b.as_dict() for b in result.brokers],
        "producer_ids": {
            "total": len(result.producer_ids),
            "by_grant": dict(Counter(p.granted_by for p in result.producer_ids)),
        },
        "problems": [asdict(p) for p in result.problems],
    }


def render_json(result: EosResult, out: IO[str]) -> None:
    from .dumptext import compact_json

    out.write(compact_json(report_dict(result)) + "\n")


def render_text(result: EosResult, out: IO[str]) -> None:
    lines = []
    for c in sorted(result.contexts.values(), key=lambda c: c.cluster):
        parts = [p for p in result.partitions if p.cluster == c.cluster]
        if not parts:
            continue
        brokers = sorted({p.broker for p in parts}, key=_broker_key)
        lines.append(
            f"cluster {c.cluster or '(unnamed)'}: {len(brokers)} broker(s) ({', '.join(brokers)}), "
            f"{len(parts)} replicas of {len({(p.topic, p.partition) for p in parts})} partitions, "
            f"{sum(p.batches for p in parts):,} batches, {sum(p.records for p in parts):,} "
            f"records, {_size(sum(p.bytes for p in parts))}")
        lines.append(f"  as of {_time(c.as_of_ms)} ({c.as_of_source or 'unknown: no timeouts'})"
                     + ("" if c.has_metadata else "; no metadata log: producer ids not traced")
                     + ("" if c.has_transaction_log else
                        "; no __transaction_state: coordinator state unknown"))
    errors = result.errors
    kinds = Counter(f.kind for f in errors)
    lines.append(f"findings: {len(errors)}" + (
        " (" + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())) + ")" if kinds else ""))
    lines += [f"  {f.line()}" for f in errors]
    notes = [f for f in result.findings if f.severity == NOTE]
    if notes:
        note_kinds = Counter(f.kind for f in notes)
        lines.append("notes: " + ", ".join(f"{k} {n}" for k, n in sorted(note_kinds.items())))
        shown: Counter[str] = Counter()
        for f in notes:
            shown[f.kind] += 1
            if shown[f.kind] <= NOTE_LINES:
                lines.append(f"  {f.line()}")
        for kind, n in sorted(note_kinds.items()):
            if n > NOTE_LINES:
                lines.append(f"  ... and {n - NOTE_LINES} more {kind} (see the findings table)")
    if result.topics:
        lines.append("topics (each partition counted once, from its most complete replica):")
        lines += _table(["topic", "partitions", "records", "committed", "aborted", "open",
                         "producers", "findings"],
                        [[t.topic, t.partitions, t.records, t.committed_records,
                          t.aborted_records, t.open_records, t.producers, t.findings]
                         for t in result.topics])
    if result.brokers:
        lines.append("producer state per broker (batch metadata entries kept now, up to 5 per "
                     "producer, against the draft KIP's latest batch only):")
        lines += _table(["broker", "replicas", "producers", "active", "entries now",
                         "entries (KIP)", "findings"],
                        [[b.broker, b.replicas, b.producers, b.active_producers, b.state_entries,
                          b.state_entries_kip, b.findings] for b in result.brokers])
    if result.producer_ids:
        by = Counter(p.granted_by for p in result.producer_ids)
        lines.append(f"producer ids: {len(result.producer_ids)} ("
                     + ", ".join(f"{_GRANTS[k]} {n}" for k, n in sorted(by.items())) + ")")
    for p in result.problems:
        lines.append(f"damage in a metadata or coordinator log: {p.path} position "
                     f"{p.position}: {p.kind}: {p.message}")
    out.write("\n".join(lines) + "\n")


_GRANTS = {"block": "granted by a block in the metadata log",
           "before-log": "granted before the metadata log's first segment",
           "none": "granted by no block", "unknown": "not traced (no metadata log)"}


def _table(header: list[str], rows: list[list[Any]]) -> list[str]:
    text = [header] + [[f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else str(v)
                        for v in row] for row in rows]
    widths = [max(len(r[i]) for r in text) for i in range(len(header))]
    return ["  " + "  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                             for i, (c, w) in enumerate(zip(r, widths, strict=True))).rstrip()
            for r in text]


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:,} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def _time(ms: int) -> str:
    if ms < 0:
        return "an unknown time"
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    except (OverflowError, OSError, ValueError):
        return str(ms)
