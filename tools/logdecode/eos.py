"""The exactly-once audit of one partition replica: the log replayed through Kafka's own
producer-state rules, and every departure from them named.

Pure logic over batch headers (`batches.Batch`), so `kraftpy eos-audit` and the Spark job
compute the same rows from the same bytes. The replay is ProducerStateManager's: one entry per
producer id with its epoch, coordinator epoch, last timestamp, open transaction and its last
five batches (ProducerStateEntry.NUM_BATCHES_TO_RETAIN), updated by data batches
(ProducerAppendInfo.appendDataBatch) and transaction markers (appendEndTxnMarker). Where a
leader would have refused an append (an older epoch, a sequence out of order, a coordinator
epoch gone back) and a follower only logs a warning, the audit reports a finding.

Beyond Kafka's own checks, the whole log is in view, so the audit also finds what no broker
can see at append time: the same batch appended twice however far apart (Kafka compares the
last five; the same bytes have the same CRC), a transaction
left open when its producer moved to a newer epoch (a marker lost), a COMMIT marker with no
data before it (the data lost), and, with the cluster's context, producer ids that no block in
the metadata log granted and transactions left hanging.

Sequences are checked only where clients write them: the group and share coordinators write
transactional offset commits with base sequence 0 in every batch (CoordinatorRuntime), and
compacted topics lose batches by design. A producer's first batch in a replica must start at
sequence 0 only when the replica's log still starts at offset 0.
"""

from __future__ import annotations

import bisect
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from operator import attrgetter
from typing import Any

from .batches import ABORT, COMMIT, NO_CONTROL, Batch

NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
# A producer's batches (of its current epoch) the duplicate check remembers: 2,000 times what
# Kafka compares, in bounded memory; an older batch appended again shows as a sequence out of
# order.
SEEN_WINDOW = 10_000
INT_MAX = 0x7FFFFFFF
# Topics whose batches a coordinator writes (no client sequences; origin COORDINATOR).
COORDINATOR_TOPICS = frozenset({"__consumer_offsets", "__share_group_state", "__transaction_state"})

ERROR, NOTE = "error", "note"
# Every finding kind, its severity, and what it means (the report and docs list them so).
FINDING_KINDS: dict[str, tuple[str, str]] = {
    "duplicate": (ERROR, "the same batch (producer id, epoch, sequence range and CRC) appended "
                  "twice"),
    "sequence-gap": (ERROR, "sequences skipped within a producer epoch: batches missing"),
    "sequence-out-of-order": (ERROR, "a sequence at or below one already appended, not a "
                              "duplicate of it"),
    "epoch-rewound": (ERROR, "a producer epoch lower than one the producer already wrote"),
    "coordinator-epoch-rewound": (ERROR, "a transaction marker from an older coordinator "
                                  "epoch than one already seen (a zombie coordinator)"),
    "missing-marker": (ERROR, "a transaction left open when its producer wrote at a newer "
                       "epoch: its COMMIT or ABORT marker is not in the log"),
    "non-transactional-in-transaction": (ERROR, "a non-transactional batch while the producer "
                                         "has a transaction open"),
    "commit-without-data": (ERROR, "a COMMIT marker with no data of its transaction before it"),
    "hanging-transaction": (ERROR, "an open transaction past transaction.max.timeout.ms that "
                            "its coordinator does not know: it holds the last stable offset"),
    "ungranted-producer-id": (ERROR, "a producer id that no block in the metadata log granted"),
    "offset-order": (ERROR, "a batch whose offsets do not follow the batch before it"),
    "damaged-batch": (ERROR, "bytes that do not read as a whole batch with a good CRC"),
    "snapshot-mismatch": (ERROR, "a producer-state snapshot that disagrees with the log"),
    "txn-index-mismatch": (ERROR, "the transaction index disagrees with the ABORT markers"),
    "abort-without-data": (NOTE, "an ABORT marker with no data before it (Kafka writes one to "
                           "every partition a transaction added, written to or not)"),
    "repeated-marker": (NOTE, "a transaction's marker written again (the same type and epoch, "
                        "nothing between): a coordinator retrying, as after its failover"),
}


@dataclass
class Settings:
    transaction_max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    producer_id_expiration_ms: int = 86_400_000  # producer.id.expiration.ms


@dataclass(frozen=True)
class GrantedBlock:
    first_id: int
    last_id: int
    offset: int  # of its ProducerIdsRecord in the metadata log
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True)
class CoordinatorState:
    """A transactional id's latest record in `__transaction_state`."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    status: int  # 0 Empty, 1 Ongoing, 2 PrepareCommit, 3 PrepareAbort, 4/5 Complete*, ...
    partitions: frozenset[tuple[str, int]]


@dataclass
class ClusterContext:
    """What the audit of a replica needs from the rest of its cluster."""

    cluster: str
    as_of_ms: int = -1  # "now" for timeouts and expiry
    as_of_source: str = ""
    has_metadata: bool = False  # a metadata log was among the inputs
    blocks: list[GrantedBlock] = field(default_factory=list)  # sorted by first id
    granted_before: int = 0  # ids below were granted before the metadata log the inputs hold
    cleanup_policies: dict[str, str] = field(default_factory=dict)  # topic -> cleanup.policy
    default_cleanup_policy: str = "delete"  # log.cleanup.policy
    has_transaction_log: bool = False
    coordinator: dict[int, CoordinatorState] = field(default_factory=dict)  # by producer id

    def compacted(self, topic: str) -> bool:
        return "compact" in self.cleanup_policies.get(topic, self.default_cleanup_policy)

    def block_of(self, producer_id: int) -> GrantedBlock | None:
        i = bisect.bisect_right(self._firsts, producer_id) - 1
        if i >= 0 and self.blocks[i].first_id <= producer_id <= self.blocks[i].last_id:
            return self.blocks[i]
        return None

    def __post_init__(self) -> None:
        self.blocks.sort(key=lambda b: b.first_id)
        self._firsts = [b.first_id for b in self.blocks]


@dataclass
class Replica:
    cluster: str
    broker: str
    topic: str
    partition: int


# --- the rows the audit writes (the tables' columns, in order) ---------------------------------

_GETTERS: dict[type, tuple[tuple[str, ...], Any]] = {}


def row_dict(row: Any) -> dict[str, Any]:
    """A row's fields by name, in order (dataclasses.asdict copies deeply, three times slower;
    these rows hold only scalars)."""
    found = _GETTERS.get(type(row))
    if found is None:
        names = tuple(f.name for f in fields(row))
        found = _GETTERS[type(row)] = (names, attrgetter(*names))
    return dict(zip(found[0], found[1](row), strict=True))


@dataclass(slots=True)
class Finding:
    cluster: str
    broker: str
    topic: str
    partition: int
    kind: str
    severity: str
    producer_id: int
    producer_epoch: int
    first_offset: int
    last_offset: int
    related_offset: int  # the earlier batch a duplicate repeats, the open transaction's start...
    message: str

    def as_dict(self) -> dict[str, Any]:
        return row_dict(self)

    def line(self) -> str:
        where = f"broker {self.broker} {self.topic}-{self.partition}"
        offsets = (f"offset {self.first_offset}" if self.first_offset == self.last_offset
                   else f"offsets {self.first_offset}..{self.last_offset}")
        who = f" producer {self.producer_id} epoch {self.producer_epoch}" \
            if self.producer_id >= 0 else ""
        return f"{self.kind.upper()}: {where} {offsets}{who}: {self.message}"


@dataclass(slots=True)
class Transaction:
    cluster: str
    broker: str
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int  # of its first batch
    first_offset: int
    last_data_offset: int
    end_offset: int  # its marker's offset; -1 while open
    outcome: str  # COMMIT | ABORT | OPEN
    coordinator_epoch: int
    batches: int
    records: int
    bytes: int
    first_timestamp: int
    last_timestamp: int  # of its last data batch
    end_timestamp: int  # of its marker; -1 while open

    def as_dict(self) -> dict[str, Any]:
        return row_dict(self)


@dataclass(slots=True)
class Producer:
    cluster: str
    broker: str
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    first_offset: int
    last_offset: int
    last_sequence: int
    last_timestamp: int
    batches: int
    records: int
    bytes: int
    transactional: bool
    committed: int  # transactions
    aborted: int
    open_txn_first_offset: int  # -1 when none is open
    active: bool  # not expired at the audit's "now" (or a transaction open)
    state_entries: int  # batch metadata a broker keeps for it now (at most 5)
    state_entries_kip: int  # what the draft KIP would keep (the latest batch only)
    granted_by: str  # block | before-log | none | unknown (no metadata log in the inputs)
    block_offset: int
    block_broker_id: int
    block_first_id: int
    block_last_id: int

    def as_dict(self) -> dict[str, Any]:
        return row_dict(self)


@dataclass(slots=True)
class PartitionSummary:
    cluster: str
    broker: str
    topic: str
    partition: int
    segments: int
    log_start_offset: int
    log_end_offset: int
    batches: int
    records: int
    bytes: int
    data_records: int
    control_records: int
    idempotent_records: int  # data records with a producer id
    transactional_records: int
    committed_records: int
    aborted_records: int
    open_records: int
    producers: int
    active_producers: int
    state_entries: int
    state_entries_kip: int
    open_transactions: int
    last_stable_offset: int
    first_timestamp: int
    max_timestamp: int
    snapshots: int
    findings: int

    def as_dict(self) -> dict[str, Any]:
        return row_dict(self)


@dataclass(slots=True)
class SnapshotEntry:
    cluster: str
    broker: str
    topic: str
    partition: int
    snapshot_offset: int
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int
    error: str | None

    def as_dict(self) -> dict[str, Any]:
        return row_dict(self)


@dataclass
class ReplicaAudit:
    summary: PartitionSummary
    producers: list[Producer]
    transactions: list[Transaction]
    findings: list[Finding]
    snapshot_entries: list[SnapshotEntry]


# --- the replay --------------------------------------------------------------------------------

class _Entry:
    """ProducerStateEntry, plus what the audit counts."""

    __slots__ = ("epoch", "coordinator_epoch", "last_timestamp", "txn_first_offset", "recent",
                 "seen", "seen_order", "first_offset", "last_offset", "batches", "records",
                 "bytes",
                 "transactional", "committed", "aborted", "txn", "last_marker")

    def __init__(self, first_offset: int) -> None:
        self.epoch = -1
        self.coordinator_epoch = -1
        self.last_timestamp = -1
        self.txn_first_offset = -1
        self.recent: deque[tuple[int, int, int, int]] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
        # (epoch, first seq, last seq) -> (offset, CRC) of the batch that first had them, for
        # the last SEEN_WINDOW batches of the current epoch
        self.seen: dict[tuple[int, int, int], tuple[int, int]] = {}
        self.seen_order: deque[tuple[int, int, int]] = deque()
        self.first_offset = first_offset
        self.last_offset = first_offset
        self.batches = self.records = self.bytes = 0
        self.transactional = False
        self.committed = self.aborted = 0
        self.txn: Transaction | None = None
        self.last_marker: tuple[int, int] | None = None  # (type, epoch), while nothing follows

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:  # maybeUpdateProducerEpoch
            self.recent.clear()
            self.seen.clear()
            self.seen_order.clear()
            self.epoch = epoch

    def remember(self, key: tuple[int, int, int], offset: int, crc: int) -> None:
        if key not in self.seen:
            self.seen[key] = (offset, crc)
            self.seen_order.append(key)
            if len(self.seen_order) > SEEN_WINDOW:
                del self.seen[self.seen_order.popleft()]

    def state(self) -> tuple[int, int, int, int, int, int, int]:
        """(epoch, last sequence, last offset, offset delta, timestamp, coordinator epoch,
        current txn first offset): what ProducerStateManager.writeSnapshot writes."""
        last_seq, last_offset, delta, _ = self.recent[-1] if self.recent else (-1, -1, 0, 0)
        return (self.epoch, last_seq, last_offset, delta, self.last_timestamp,
                self.coordinator_epoch, self.txn_first_offset)


@dataclass
class Snapshot:
    offset: int
    entries: list[dict[str, Any]] | None
    error: str | None = None


def audit_replica(replica: Replica, batches: Iterable[tuple[str, Batch]], *,
                  context: ClusterContext, settings: Settings, log_start: int,
                  segments: int = 0, problems: Sequence[tuple[str, int, int | None, str]] = (),
                  snapshots: Sequence[Snapshot] = (),
                  txn_index: Sequence[tuple[int, int, int]] | None = None) -> ReplicaAudit:
    """Replay one replica's batches (in offset order, each with its file) and audit them; see
    `ReplicaAuditor`. `problems` is read once the batches are exhausted."""
    auditor = ReplicaAuditor(replica, context=context, settings=settings, log_start=log_start,
                             segments=segments, snapshots=snapshots, txn_index=txn_index)
    for file, batch in batches:
        auditor.add(file, batch)
    return auditor.finish(problems)


class ReplicaAuditor:
    """The audit of one replica, fed its batches one at a time (`add`, in offset order) and
    closed by `finish`, so a caller can stream the batches elsewhere at the same time.

    `log_start` is the base offset of the replica's first segment; `snapshots` are the
    producer-state snapshots in the replica's folder; `txn_index` the aborted transactions
    its transaction indexes list as (producer id, first offset, last offset), or None when its
    index files were not copied."""

    def __init__(self, replica: Replica, *, context: ClusterContext, settings: Settings,
                 log_start: int, segments: int = 0, snapshots: Sequence[Snapshot] = (),
                 txn_index: Sequence[tuple[int, int, int]] | None = None) -> None:
        r = self.replica = replica
        self.context, self.settings, self.log_start = context, settings, log_start
        self.txn_index = txn_index
        self.findings: list[Finding] = []
        self.transactions: list[Transaction] = []
        self.entries: dict[int, _Entry] = {}
        self.sequences = r.topic not in COORDINATOR_TOPICS and not context.compacted(r.topic)
        self.first_must_be_zero = self.sequences and log_start == 0
        self.summary = PartitionSummary(r.cluster, r.broker, r.topic, r.partition, segments,
                                        log_start, log_start, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                        0, 0, 0, 0, log_start, -1, -1, len(snapshots), 0)
        self.pending = sorted(snapshots, key=lambda snap: snap.offset)
        self.snapshot_entries: list[SnapshotEntry] = []
        self.next_offset = log_start  # where the next batch should start, at least
        self.high_ts = -1  # the latest timestamp so far

    def find(self, kind: str, pid: int, epoch: int, first: int, last: int, message: str,
             related: int = -1) -> None:
        r = self.replica
        self.findings.append(Finding(r.cluster, r.broker, r.topic, r.partition, kind,
                                     FINDING_KINDS[kind][0], pid, epoch, first, last, related,
                                     message))

    def _check_snapshots(self, upto: int) -> None:
        while self.pending and self.pending[0].offset <= upto:
            snap = self.pending.pop(0)
            _compare_snapshot(self.replica, snap, self.entries, self.log_start, self.find,
                              self.snapshot_entries)

    def add(self, file: str, b: Batch) -> None:
        """The next batch (in offset order). The replay's hot path: one tuple unpack, then
        locals."""
        (position, base, last, count, size, _, _, first_ts, max_ts, pid, epoch, _, crc_valid,
         control_type, _, _) = b
        s = self.summary
        if not crc_valid:
            return  # reported as damage; its fields cannot be trusted
        if base < self.next_offset and s.batches:
            self.find("offset-order", pid, epoch, base, last, f"{file} position {position}: "
                      f"the batch before ended at offset {self.next_offset - 1}")
            return
        if self.pending and self.pending[0].offset <= base:
            self._check_snapshots(base)
        self.next_offset = last + 1
        s.batches += 1
        s.records += count
        s.bytes += size
        if s.first_timestamp < 0:
            s.first_timestamp = first_ts
        if max_ts > self.high_ts:
            self.high_ts = max_ts
        control = control_type != NO_CONTROL
        if control:
            s.control_records += count
        else:
            s.data_records += count
        if pid < 0:
            return
        entry = self.entries.get(pid)
        if entry is None:
            entry = self.entries[pid] = _Entry(base)
        entry.last_offset = last
        entry.batches += 1
        entry.records += count
        entry.bytes += size
        if control:
            if control_type == ABORT or control_type == COMMIT:
                _marker(b, entry, self.find, self.transactions, self.replica)
            return
        s.idempotent_records += count
        _data(b, entry, self.find, self.sequences, self.first_must_be_zero, self.replica)

    def finish(self, problems: Sequence[tuple[str, int, int | None, str]] = ()) -> ReplicaAudit:
        """The audit's rows; `problems` are damage the scan found, as (file, position, offset,
        message)."""
        r, s, entries, find = self.replica, self.summary, self.entries, self.find
        transactions = self.transactions
        self._check_snapshots(1 << 62)
        for file, position, offset, message in problems:
            find("damaged-batch", -1, -1, -1 if offset is None else offset,
                 -1 if offset is None else offset, f"{file} position {position}: {message}")
        # transactions still open at the end of the log
        open_firsts = []
        for entry in entries.values():
            if entry.txn is not None:
                transactions.append(entry.txn)
                open_firsts.append(entry.txn.first_offset)
                s.open_transactions += 1
        for txn in transactions:
            if txn.outcome == "COMMIT":
                s.committed_records += txn.records
            elif txn.outcome == "ABORT":
                s.aborted_records += txn.records
            else:
                s.open_records += txn.records
            s.transactional_records += txn.records
        s.log_end_offset = max(self.next_offset, self.log_start)
        s.last_stable_offset = min(open_firsts) if open_firsts else s.log_end_offset
        s.max_timestamp = self.high_ts
        transactions.sort(key=lambda t: t.first_offset)
        producers = [_producer_row(r, pid, e, self.context, self.settings, find)
                     for pid, e in sorted(entries.items())]
        _hanging(r, entries, self.context, self.settings, find)
        if self.txn_index is not None:
            _compare_txn_index(transactions,
                               [t for t in self.txn_index if t[1] >= self.log_start], find)
        s.producers = len(producers)
        s.active_producers = sum(p.active for p in producers)
        s.state_entries = sum(p.state_entries for p in producers if p.active)
        s.state_entries_kip = sum(p.state_entries_kip for p in producers if p.active)
        self.findings.sort(key=finding_order)
        s.findings = sum(f.severity == ERROR for f in self.findings)
        return ReplicaAudit(s, producers, transactions, self.findings, self.snapshot_entries)


def finding_order(f: Finding) -> tuple[Any, ...]:
    """Within a replica: by offset, then kind, producer, and the rest."""
    return (f.first_offset, f.kind, f.producer_id, f.last_offset, f.related_offset, f.message)


def _data(b: Batch, entry: _Entry, find: Any, sequences: bool, first_must_be_zero: bool,
          r: Replica) -> None:
    """ProducerAppendInfo.appendDataBatch, with the leader's checks as findings."""
    _, base, last, count, size, _, attrs, first_ts, max_ts, pid, epoch, first_seq, _, _, _, \
        crc = b
    last_seq = -1 if first_seq < 0 else (first_seq + last - base) % 0x80000000
    transactional = attrs & 0x10
    key = (epoch, first_seq, last_seq)
    if sequences and first_seq >= 0:  # the same batch again: a duplicate, whatever the epoch now
        earlier = entry.seen.get(key)
        if earlier is not None and earlier[1] == crc:
            find("duplicate", pid, epoch, base, last,
                 f"sequences {first_seq}..{last_seq} were already appended at offset "
                 f"{earlier[0]} (the same batch, CRC {crc})", earlier[0])
            return
    if epoch < entry.epoch:
        find("epoch-rewound", pid, epoch, base, last,
             f"epoch {epoch} after the producer wrote at epoch {entry.epoch}")
        return
    if sequences and first_seq >= 0:
        if epoch != entry.epoch:
            if first_seq != 0 and (entry.epoch >= 0 or (first_must_be_zero and entry.batches == 1)):
                find("sequence-gap", pid, epoch, base, last,
                     f"the epoch's first batch starts at sequence {first_seq}: sequences "
                     f"0..{first_seq - 1} are not in the log")
        else:
            current = entry.recent[-1][0] if entry.recent else -1
            expected = 0 if current == -1 or current == INT_MAX else current + 1
            if first_seq > expected:
                find("sequence-gap", pid, epoch, base, last,
                     f"sequence {first_seq} follows {current}: sequences "
                     f"{expected}..{first_seq - 1} are not in the log")
            elif first_seq < expected and not (current == INT_MAX and first_seq == 0):
                find("sequence-out-of-order", pid, epoch, base, last,
                     f"sequences {first_seq}..{last_seq} after sequence {current} was appended")
    txn = entry.txn
    if txn is not None and transactional and epoch > entry.epoch >= 0:
        find("missing-marker", pid, epoch, txn.first_offset, txn.last_data_offset,
             f"the transaction opened at offset {txn.first_offset} (epoch "
             f"{txn.producer_epoch}) has no marker, and the producer wrote at epoch "
             f"{epoch} from offset {base}", base)
    entry.set_epoch(epoch)
    if sequences and first_seq >= 0:
        entry.remember(key, base, crc)
    entry.last_marker = None
    entry.recent.append((last_seq, last, last - base, max_ts))
    entry.last_timestamp = max_ts
    if txn is not None and not transactional:
        find("non-transactional-in-transaction", pid, epoch, base, last,
             f"the transaction opened at offset {txn.first_offset} is still open",
             txn.first_offset)
    elif transactional:
        entry.transactional = True
        if txn is None:
            entry.txn_first_offset = base
            txn = entry.txn = Transaction(r.cluster, r.broker, r.topic, r.partition, pid, epoch,
                                          base, last, -1, "OPEN", -1, 0, 0, 0, first_ts, max_ts,
                                          -1)
        txn.last_data_offset = last
        txn.batches += 1
        txn.records += count
        txn.bytes += size
        txn.last_timestamp = max_ts


def _marker(b: Batch, entry: _Entry, find: Any, transactions: list[Transaction],
            r: Replica) -> None:
    """ProducerAppendInfo.appendEndTxnMarker, with its checks as findings."""
    pid, epoch = b.producer_id, b.producer_epoch
    name = "COMMIT" if b.control_type == COMMIT else "ABORT"
    if epoch < entry.epoch:
        find("epoch-rewound", pid, epoch, b.base_offset, b.last_offset,
             f"{name} marker at epoch {epoch} after the producer wrote at epoch {entry.epoch}")
        return
    if b.coordinator_epoch < entry.coordinator_epoch:
        find("coordinator-epoch-rewound", pid, epoch, b.base_offset, b.last_offset,
             f"{name} marker from coordinator epoch {b.coordinator_epoch} after one from "
             f"coordinator epoch {entry.coordinator_epoch}")
    txn = entry.txn
    if txn is None and entry.last_marker == (b.control_type, epoch):
        find("repeated-marker", pid, epoch, b.base_offset, b.last_offset,
             f"{name} marker (coordinator epoch {b.coordinator_epoch}) repeats the one before "
             "it, with nothing from the producer between")
    elif txn is None:
        kind = "commit-without-data" if b.control_type == COMMIT else "abort-without-data"
        find(kind, pid, epoch, b.base_offset, b.last_offset,
             f"{name} marker (coordinator epoch {b.coordinator_epoch}) with no data of its "
             "transaction before it")
    else:
        txn.end_offset = b.base_offset
        txn.outcome = name
        txn.coordinator_epoch = b.coordinator_epoch
        txn.end_timestamp = b.max_timestamp
        transactions.append(txn)
        if name == "COMMIT":
            entry.committed += 1
        else:
            entry.aborted += 1
        entry.txn = None
    # ProducerStateEntry.update: the epoch (a newer one clears the batches), coordinator epoch
    # and timestamp; the transaction is over.
    entry.set_epoch(epoch)
    entry.coordinator_epoch = b.coordinator_epoch
    entry.last_timestamp = b.max_timestamp
    entry.txn_first_offset = -1
    entry.last_marker = (b.control_type, epoch)


def _producer_row(r: Replica, pid: int, e: _Entry, context: ClusterContext, settings: Settings,
                  find: Any) -> Producer:
    epoch, last_seq, _, _, last_ts, coordinator_epoch, txn_first = e.state()
    active = txn_first >= 0 or context.as_of_ms < 0 or \
        context.as_of_ms - last_ts < settings.producer_id_expiration_ms
    block = context.block_of(pid) if context.has_metadata else None
    if not context.has_metadata:
        granted = "unknown"
    elif block is not None:
        granted = "block"
    elif pid < context.granted_before:
        granted = "before-log"
    else:
        granted = "none"
        find("ungranted-producer-id", pid, epoch, e.first_offset, e.last_offset,
             f"producer id {pid} is in no block the metadata log granted"
             + (f" (blocks end at {context.blocks[-1].last_id})" if context.blocks else ""))
    return Producer(r.cluster, r.broker, r.topic, r.partition, pid, epoch, coordinator_epoch,
                    e.first_offset, e.last_offset, last_seq, last_ts, e.batches, e.records,
                    e.bytes, e.transactional, e.committed, e.aborted, txn_first, active,
                    len(e.recent), min(1, len(e.recent)), granted,
                    -1 if block is None else block.offset,
                    -1 if block is None else block.broker_id,
                    -1 if block is None else block.first_id,
                    -1 if block is None else block.last_id)


def _hanging(r: Replica, entries: dict[int, _Entry], context: ClusterContext,
             settings: Settings, find: Any) -> None:
    """kafka-transactions find-hanging, offline: an open transaction whose producer's last
    write is older than transaction.max.timeout.ms, and which its coordinator does not list
    as ongoing in this partition (no transactional id holds that producer id, or its state
    does not name the partition)."""
    if context.as_of_ms < 0:
        return
    for pid, e in entries.items():
        if e.txn is None or context.as_of_ms - e.last_timestamp <= settings.transaction_max_timeout_ms:
            continue
        state = context.coordinator.get(pid)
        if state is not None and (r.topic, r.partition) in state.partitions:
            continue
        why = ("no transactional id in __transaction_state holds this producer id"
               if state is None else f"its coordinator's state for {state.transactional_id!r} "
               "does not include this partition")
        if not context.has_transaction_log:
            why = "no __transaction_state log among the inputs to say otherwise"
        age = context.as_of_ms - e.last_timestamp
        find("hanging-transaction", pid, e.epoch, e.txn.first_offset, e.txn.last_data_offset,
             f"open since offset {e.txn.first_offset}, last written {age} ms before "
             f"{context.as_of_source} ({e.txn.records} records); {why}", e.txn.first_offset)


def _compare_snapshot(r: Replica, snap: Snapshot, entries: dict[int, _Entry], log_start: int,
                      find: Any, out: list[SnapshotEntry]) -> None:
    """A snapshot at offset N holds the state after every batch below N: each entry must be
    the replay's. A producer the replay does not know is a mismatch only when the log still
    starts at 0 (otherwise its batches may be in deleted segments); one the snapshot lacks is
    not (Kafka drops expired producers from its snapshots)."""
    if snap.entries is None:
        out.append(SnapshotEntry(r.cluster, r.broker, r.topic, r.partition, snap.offset, -1, -1,
                                 -1, -1, -1, -1, -1, -1, snap.error))
        find("snapshot-mismatch", -1, -1, snap.offset, snap.offset,
             f"producer-state snapshot at offset {snap.offset} does not read: {snap.error}")
        return
    for e in snap.entries:
        out.append(SnapshotEntry(r.cluster, r.broker, r.topic, r.partition, snap.offset,
                                 e["producerId"], e["epoch"], e["lastSequence"], e["lastOffset"],
                                 e["offsetDelta"], e["timestamp"], e["coordinatorEpoch"],
                                 e["currentTxnFirstOffset"], None))
        pid = e["producerId"]
        wrote = (e["epoch"], e["lastSequence"], e["lastOffset"], e["offsetDelta"], e["timestamp"],
                 e["coordinatorEpoch"], e["currentTxnFirstOffset"])
        entry = entries.get(pid)
        if entry is None:
            if log_start == 0:
                find("snapshot-mismatch", pid, e["epoch"], snap.offset, snap.offset,
                     f"producer-state snapshot at offset {snap.offset} has producer {pid}, "
                     "which wrote nothing to the log before it")
            continue
        replayed = entry.state()
        if replayed != wrote:
            names = ("epoch", "lastSequence", "lastOffset", "offsetDelta", "timestamp",
                     "coordinatorEpoch", "currentTxnFirstOffset")
            diff = ", ".join(f"{n} {w} (log: {v})" for n, w, v in zip(names, wrote, replayed,
                                                                       strict=True) if w != v)
            find("snapshot-mismatch", pid, e["epoch"], snap.offset, snap.offset,
                 f"producer-state snapshot at offset {snap.offset} says {diff}")


def _compare_txn_index(transactions: list[Transaction],
                       index: Sequence[tuple[int, int, int]], find: Any) -> None:
    aborted = {(t.producer_id, t.first_offset, t.end_offset) for t in transactions
               if t.outcome == "ABORT"}
    listed = set(index)
    for pid, first, last in sorted(aborted - listed, key=lambda t: t[1]):
        find("txn-index-mismatch", pid, -1, first, last,
             f"the aborted transaction {first}..{last} is in no transaction index")
    for pid, first, last in sorted(listed - aborted, key=lambda t: t[1]):
        find("txn-index-mismatch", pid, -1, first, last,
             f"a transaction index lists an aborted transaction {first}..{last} that the log's "
             "markers do not")
