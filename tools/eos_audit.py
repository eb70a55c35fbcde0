"""`kraftpy eos-audit DIR...`: the exactly-once audit of a cluster's data logs in one
process (the Spark job `kraftpy pipeline eos-audit` computes the same rows at scale).

Every partition replica of every broker's `log.dirs` is replayed through Kafka's producer-state
rules (`logdecode.eos`); the metadata logs among the inputs trace each producer id to the block
that granted it (pid-audit's blocks), and the `__transaction_state` replicas give the
coordinators' view that decides whether an open transaction is hanging. The report lists every
finding with its broker, partition, offsets and producer; exit status 1 when there is one.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import datetime
from typing import IO

from kraftpy.tools.logdecode.eos import Settings
from kraftpy.tools.logdecode.eos_report import EosResult, render_json, render_text
from kraftpy.tools.logdecode.eos_scan import audit_replica_files, build_contexts
from kraftpy.tools.logdecode.logdirs import NoLogDirs, find_log_dirs, selected_replicas

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


def parse_time(text: str) -> int:
    """Milliseconds since the epoch, or an ISO-8601 time (UTC unless it says otherwise)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is neither milliseconds since the epoch nor an ISO-8601 "
                         "time (2026-01-31T12:00:00Z)") from None
    if when.tzinfo is None:
        from datetime import UTC

        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def audit_dirs(paths: Sequence[str], *, settings: Settings, now_ms: int | None = None,
               block_size: int = 1000) -> EosResult:
    """The whole audit in this process (raises NoLogDirs for inputs with no log directory).
    The context comes from the whole log directories of the inputs; the replicas audited are
    those the inputs name (a partition folder only itself)."""
    log_dirs = find_log_dirs(paths)
    contexts = build_contexts(log_dirs, now_ms=now_ms, block_size=block_size)
    result = EosResult(problems=contexts.problems)
    for replica in selected_replicas(paths):
        result.add(audit_replica_files(replica, contexts.of(replica.cluster), settings))
    result.contexts = contexts.by_cluster
    result.summarize()
    return result


def main(paths: Sequence[str], *, fmt: str = "text", now: str | None = None,
         transaction_max_timeout_ms: int = 900_000, producer_id_expiration_ms: int = 86_400_000,
         block_size: int = 1000, out: IO[str] | None = None, err: IO[str] | None = None
         ) -> int:
    out = sys.stdout if out is None else out
    err = sys.stderr if err is None else err
    try:
        now_ms = None if now is None else parse_time(now)
        result = audit_dirs(paths, settings=Settings(transaction_max_timeout_ms,
                                                     producer_id_expiration_ms),
                            now_ms=now_ms, block_size=block_size)
    except (NoLogDirs, ValueError) as e:
        err.write(f"kraftpy eos-audit: {e}\n")
        return EXIT_USAGE
    (render_json if fmt == "json" else render_text)(result, out)
    return EXIT_FINDINGS if result.errors else EXIT_OK
