"""The producer-ID audit (KIP-730: the metadata log is the audit log of id blocks).

Pure logic over decoded records, so `kraftpy pid-audit` and the Spark `producer_id_blocks`
job compute exactly the same blocks and findings from the same rows.

A ProducerIdsRecord {BrokerId, BrokerEpoch, NextProducerId} grants the block that ends just
below NextProducerId; Kafka's blocks are 1000 ids (`PRODUCER_ID_BLOCK_SIZE`). A block that
starts above the previous NextProducerId leaves a gap (ids never handed out: harmless but
worth knowing); one that reaches into ids already granted is an overlap, i.e. the same
producer id may be given to two producers. Snapshot records (BrokerId -1) are not grants;
they only tell where the log after them should continue.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

BLOCK_SIZE = 1000

PRODUCER_IDS = "PRODUCER_IDS_RECORD"
REGISTER_BROKER = "REGISTER_BROKER_RECORD"
AUDIT_TYPES = frozenset({PRODUCER_IDS, REGISTER_BROKER})
# A block a combined controller takes for its own InitProducerId answers carries its node id
# and no broker epoch; it needs no registration.
OWN_BLOCK_EPOCH = -1


@dataclass(frozen=True, slots=True)
class AuditRecord:
    """The few facts the audit needs from one decoded record."""

    cluster: str
    file_kind: str  # segment | snapshot | bootstrap
    snapshot_end_offset: int  # for snapshot records; -1 otherwise
    offset: int
    timestamp_ms: int
    record_type: str
    data: dict[str, Any]


@dataclass(slots=True)
class Block:
    cluster: str
    offset: int
    timestamp_ms: int
    broker_id: int
    broker_epoch: int
    first_id: int
    last_id: int
    registration_offset: int | None = None
    registration_timestamp_ms: int | None = None
    incarnation_id: str | None = None
    finding: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Finding:
    cluster: str
    kind: str  # gap | overlap | unregistered-epoch
    offset: int
    first_id: int
    last_id: int
    message: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(slots=True)
class Audit:
    blocks: list[Block] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    seeded_from: dict[str, int] = field(default_factory=dict)  # cluster -> snapshot end offset
    seed_next_id: dict[str, int] = field(default_factory=dict)  # cluster -> its NextProducerId

    @property
    def has_overlap(self) -> bool:
        return any(f.kind == "overlap" for f in self.findings)


def audit(records: Iterable[AuditRecord], block_size: int = BLOCK_SIZE) -> Audit:
    by_cluster: dict[str, list[AuditRecord]] = {}
    for rec in records:
        by_cluster.setdefault(rec.cluster, []).append(rec)
    result = Audit()
    for cluster in sorted(by_cluster):
        _audit_cluster(cluster, by_cluster[cluster], block_size, result)
    return result


def _audit_cluster(cluster: str, records: list[AuditRecord], block_size: int, out: Audit) -> None:
    segment: dict[int, AuditRecord] = {}
    snapshots: dict[int, list[AuditRecord]] = {}
    for rec in records:
        if rec.file_kind == "segment":
            segment.setdefault(rec.offset, rec)  # copies of one log from several nodes
        elif rec.file_kind == "snapshot":
            snapshots.setdefault(rec.snapshot_end_offset, []).append(rec)
    log = [segment[o] for o in sorted(segment)]
    log_start = log[0].offset if log else None

    registrations: dict[tuple[int, int], AuditRecord] = {}
    expected: int | None = 0 if log_start == 0 else None
    usable = [end for end in snapshots if log_start is None or end <= log_start]
    if log_start != 0 and usable:
        seed_end = max(usable)
        out.seeded_from[cluster] = seed_end
        for rec in sorted(snapshots[seed_end], key=lambda r: r.offset):
            if rec.record_type == PRODUCER_IDS:
                expected = out.seed_next_id[cluster] = rec.data["nextProducerId"]
            elif rec.record_type == REGISTER_BROKER:
                registrations[_reg_key(rec)] = rec

    granted: list[tuple[int, int, int]] = []  # sorted (first, last, offset)
    for rec in log:
        if rec.record_type == REGISTER_BROKER:
            registrations[_reg_key(rec)] = rec
            continue
        if rec.record_type != PRODUCER_IDS:
            continue
        data = rec.data
        next_id = data["nextProducerId"]
        block = Block(cluster, rec.offset, rec.timestamp_ms, data["brokerId"], data["brokerEpoch"],
                      next_id - block_size, next_id - 1)
        reg = registrations.get((block.broker_id, block.broker_epoch))
        findings: list[Finding] = []
        if reg is not None:
            block.registration_offset = reg.offset if reg.file_kind == "segment" else None
            block.registration_timestamp_ms = reg.timestamp_ms
            block.incarnation_id = reg.data.get("incarnationId")
        elif block.broker_epoch != OWN_BLOCK_EPOCH:
            findings.append(Finding(cluster, "unregistered-epoch", rec.offset, block.first_id,
                                    block.last_id,
                                    f"broker {block.broker_id} epoch {block.broker_epoch} has no "
                                    "registration in the inputs"))
        if expected is not None and block.first_id > expected:
            findings.append(Finding(cluster, "gap", rec.offset, expected, block.first_id - 1,
                                    f"ids {expected}..{block.first_id - 1} were never granted"))
        for first, last, offset in _overlapping(granted, block.first_id, block.last_id, block_size):
            lo, hi = max(first, block.first_id), min(last, block.last_id)
            findings.append(Finding(cluster, "overlap", rec.offset, lo, hi,
                                    f"ids {lo}..{hi} were already granted at offset {offset}"))
        bisect.insort(granted, (block.first_id, block.last_id, rec.offset))
        expected = next_id if expected is None else max(expected, next_id)
        block.finding = ",".join(sorted({f.kind for f in findings}))
        out.blocks.append(block)
        out.findings.extend(findings)


def _overlapping(granted: list[tuple[int, int, int]], first: int, last: int,
                 size: int) -> list[tuple[int, int, int]]:
    # Every block has the same size, so only blocks starting in (first - size, last] can
    # share an id with [first, last].
    lo = bisect.bisect_left(granted, (first - size + 1,))
    hi = bisect.bisect_right(granted, (last, float("inf"), 0))
    return granted[lo:hi]


def _reg_key(rec: AuditRecord) -> tuple[int, int]:
    return rec.data["brokerId"], rec.data["brokerEpoch"]
