"""`kraftpy pid-audit`: every producer-ID block ever granted, in log order, with gaps and
overlaps flagged and the registration each broker epoch belonged to (KIP-730).

Once snapshots have replaced the first segments, the grants and registrations those segments
held are known only through a snapshot's state. The audit starts from the snapshot that
recovery could start from: the first whole one that reaches the log start (its end offset at
or past the first segment's base offset), even when it ends inside the first segment. Its
NextProducerId stands for the ids granted before it and its registrations for the brokers
then registered. A block in the part of the log that snapshot already covers, whose broker
epoch (the offset of the broker's RegisterBrokerRecord, as in Kafka) lies below the log start,
had its registration in a deleted segment: no finding, as nothing in the inputs could show it.
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import IO

from kraftpy.tools.dump_log import EXIT_USAGE, NotALogError, resolve
from kraftpy.tools.logdecode.audit import (
    AUDIT_TYPES,
    OWN_BLOCK_EPOCH,
    Audit,
    AuditRecord,
    Block,
    audit,
)
from kraftpy.tools.logdecode.dumptext import compact_json, problem_line
from kraftpy.tools.logdecode.model import Problem
from kraftpy.tools.logdecode.paths import FileKind, LogFile, cluster_of
from kraftpy.tools.logdecode.rows import audit_record, file_rows

EXIT_OK, EXIT_OVERLAP = 0, 1

BLOCK_COLUMNS = ("cluster", "offset", "timestamp_ms", "broker_id", "broker_epoch", "first_id",
                 "last_id", "registration_offset", "registration_timestamp_ms", "incarnation_id",
                 "finding")


def collect(paths: Sequence[str], *, cluster: str = "",
            block_size: int = 1000) -> tuple[Audit, list[Problem]]:
    files = [(file, cluster_of(file.path, cluster)) for file in resolve(paths, all_files=False)]
    return collect_files(files, block_size=block_size)


def collect_files(files: Iterable[tuple[LogFile, str]], *, block_size: int = 1000,
                  types: frozenset[str] = AUDIT_TYPES,
                  others: list[AuditRecord] | None = None) -> tuple[Audit, list[Problem]]:
    """The audit of these metadata log files, each named with its cluster. Records of the
    other `types` (beyond the audit's) are appended to `others`."""
    problems: list[Problem] = []
    records = []
    log_start: dict[str, int] = {}  # cluster -> the lowest segment base offset
    damaged: set[tuple[str, int]] = set()  # (cluster, end offset) of snapshots not whole
    for file, name in files:
        if not file.kind.has_batches or file.is_transaction_log:
            continue
        if file.kind is FileKind.SEGMENT:
            log_start[name] = min(log_start.get(name, file.base_offset), file.base_offset)
        for row in file_rows(file, name, types=types):
            if row[12] is not None:
                problems.append(Problem(row[1], row[3], "damage", row[12], row[5]))
                if file.kind is FileKind.SNAPSHOT:
                    damaged.add((name, file.base_offset))
            if row[9] is None or row[11] is None:
                continue
            if row[9] in AUDIT_TYPES:
                records.append(audit_record(row))
            elif others is not None:
                others.append(audit_record(row))
    starts = _replay_starts(records, log_start, damaged)
    result = audit(_from_replay_starts(records, starts), block_size)
    _forget_deleted_registrations(result, starts, log_start)
    return result, problems


def _replay_starts(records: list[AuditRecord], log_start: dict[str, int],
                   damaged: set[tuple[str, int]]) -> dict[str, int]:
    """Per cluster whose log starts past 0: the end offset of the first whole snapshot that
    reaches the log start, where replay (and the audit) can begin."""
    ends: dict[str, set[int]] = {}
    for rec in records:
        if rec.file_kind == "snapshot" and (rec.cluster, rec.snapshot_end_offset) not in damaged:
            ends.setdefault(rec.cluster, set()).add(rec.snapshot_end_offset)
    starts = {}
    for name, start in log_start.items():
        reaching = [end for end in ends.get(name, ()) if end >= start]
        if start > 0 and reaching:
            starts[name] = min(reaching)
    return starts


def _from_replay_starts(records: list[AuditRecord], starts: dict[str, int]) -> list[AuditRecord]:
    """The records with each such cluster's starting snapshot the only one, presented as
    ending where the audit looks for one (at or before the first segment record): its state
    then seeds the audit. Its NextProducerId is at least every id granted in the log below
    its end, so those grants are checked for overlaps but not for gaps."""
    first_in_log: dict[str, int] = {}
    for rec in records:
        if rec.file_kind == "segment":
            first_in_log[rec.cluster] = min(first_in_log.get(rec.cluster, rec.offset), rec.offset)
    out = []
    for rec in records:
        start = starts.get(rec.cluster)
        if start is None or rec.file_kind != "snapshot":
            out.append(rec)
        elif rec.snapshot_end_offset == start:
            seen_at = min(start, first_in_log.get(rec.cluster, start))
            out.append(replace(rec, snapshot_end_offset=seen_at))
    return out


def _forget_deleted_registrations(result: Audit, starts: dict[str, int],
                                  log_start: dict[str, int]) -> None:
    """Drop "unregistered-epoch" findings whose registration was in a deleted segment (see the
    module docstring), and say which snapshot each cluster's audit started from."""
    for name, start in starts.items():
        result.seeded_from[name] = start

    def deleted(cluster: str, offset: int, epoch: int) -> bool:
        start = starts.get(cluster)
        return start is not None and offset < start and 0 <= epoch < log_start[cluster]

    blocks = {(b.cluster, b.offset): b for b in result.blocks}
    kept = []
    for finding in result.findings:
        block = blocks.get((finding.cluster, finding.offset))
        if (finding.kind == "unregistered-epoch" and block is not None
                and deleted(block.cluster, block.offset, block.broker_epoch)):
            block.finding = ",".join(k for k in block.finding.split(",")
                                     if k != "unregistered-epoch")
            continue
        kept.append(finding)
    result.findings = kept


def render_text(result: Audit, out: IO[str]) -> None:
    header = ("offset", "time (UTC)", "broker", "epoch", "first id", "last id",
              "registered at", "incarnation", "finding")
    rows = [header]
    clusters = sorted({b.cluster for b in result.blocks})
    for block in result.blocks:
        rows.append((
            str(block.offset), _time(block.timestamp_ms), str(block.broker_id),
            str(block.broker_epoch), str(block.first_id), str(block.last_id),
            _registered(block),
            block.incarnation_id or "-", block.finding or "ok",
        ))
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = []
    for cluster in clusters:
        if cluster:
            lines.append(f"cluster {cluster}")
        if cluster in result.seeded_from:
            lines.append(f"(the log's first segments were replaced by snapshots: the audit "
                         f"starts from the state of the snapshot at offset "
                         f"{result.seeded_from[cluster]})")
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
    for block, row in zip(result.blocks, rows[1:], strict=True):
        prefix = f"{block.cluster}: " if len(clusters) > 1 else ""
        lines.append(prefix + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    lines.append(f"{len(result.blocks)} blocks, {len(result.findings)} findings")
    for f in result.findings:
        where = f"{f.cluster}: " if f.cluster else ""
        lines.append(f"{where}{f.kind.upper()} at offset {f.offset}: {f.message}")
    out.write("\n".join(lines) + "\n")


def render_json(result: Audit, out: IO[str]) -> None:
    out.write(compact_json({
        "blocks": [b.as_dict() for b in result.blocks],
        "findings": [f.as_dict() for f in result.findings],
        "seeded_from_snapshot": result.seeded_from,
    }) + "\n")


def render_csv(result: Audit, out: IO[str]) -> None:
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(BLOCK_COLUMNS)
    for block in result.blocks:
        writer.writerow([_blank(getattr(block, c)) for c in BLOCK_COLUMNS])


def main(paths: Sequence[str], *, fmt: str = "text", cluster: str = "", block_size: int = 1000,
         out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        result, problems = collect(paths, cluster=cluster, block_size=block_size)
    except NotALogError as e:
        err.write(f"kraftpy pid-audit: {e}\n")
        return EXIT_USAGE
    {"text": render_text, "json": render_json, "csv": render_csv}[fmt](result, out)
    for problem in problems:
        err.write(problem_line(problem) + "\n")
    return EXIT_OVERLAP if result.has_overlap else EXIT_OK


def _registered(block: Block) -> str:
    if block.registration_offset is not None:
        return str(block.registration_offset)
    return "own block" if block.broker_epoch == OWN_BLOCK_EPOCH else "-"


def _time(ms: int) -> str:
    try:
        return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"
    except (OverflowError, OSError, ValueError):
        return str(ms)


def _blank(value: object) -> object:
    return "" if value is None else value


__all__ = ["Block", "collect", "main"]
