"""`kraftpy pid-audit`: every producer-ID block ever granted, in log order, with gaps and
overlaps flagged and the registration each broker epoch belonged to (KIP-730)."""

from __future__ import annotations

import csv
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import IO

from kraftpy.tools.dump_log import EXIT_USAGE, NotALogError, resolve
from kraftpy.tools.logdecode.audit import AUDIT_TYPES, OWN_BLOCK_EPOCH, Audit, Block, audit
from kraftpy.tools.logdecode.dumptext import compact_json, problem_line
from kraftpy.tools.logdecode.model import Problem
from kraftpy.tools.logdecode.rows import audit_record, file_rows

EXIT_OK, EXIT_OVERLAP = 0, 1

BLOCK_COLUMNS = ("cluster", "offset", "timestamp_ms", "broker_id", "broker_epoch", "first_id",
                 "last_id", "registration_offset", "registration_timestamp_ms", "incarnation_id",
                 "finding")


def collect(paths: Sequence[str], *, cluster: str = "",
            block_size: int = 1000) -> tuple[Audit, list[Problem]]:
    problems: list[Problem] = []
    records = []
    for file in resolve(paths, all_files=False):
        if not file.kind.has_batches or file.is_transaction_log:
            continue
        for row in file_rows(file, cluster, types=AUDIT_TYPES):
            if row[12] is not None:
                problems.append(Problem(row[1], row[3], "damage", row[12], row[5]))
            if row[9] in AUDIT_TYPES and row[11] is not None:
                records.append(audit_record(row))
    return audit(records, block_size), problems


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
            lines.append(f"(log starts after snapshot {result.seeded_from[cluster]}; "
                         "ids before it are taken from that snapshot)")
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
         out: IO[str] = sys.stdout, err: IO[str] = sys.stderr) -> int:
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
