"""`kraftpy eos-audit DIR...`: arguments; the work is in `kraftpy.tools.eos_audit`."""

from __future__ import annotations

import argparse

DESCRIPTION = (
    "Audit exactly-once in a Kafka cluster's data logs: every partition replica under the "
    "given log directories (each broker's log.dirs, or a copy of them) is replayed through "
    "Kafka's producer-state rules. Findings: a batch appended twice, sequence gaps and "
    "sequences out of order, epochs going back, transactions left without a marker or "
    "hanging, COMMIT markers with no data, producer ids no block in the metadata log "
    "granted, producer-state snapshots and transaction indexes that disagree with the log. "
    "Each names the broker, partition, offsets and producer. Exit status 1 when there is a "
    "finding.")


def add_audit_arguments(p: argparse.ArgumentParser) -> None:
    """The options both the one-process audit and the Spark job take."""
    p.add_argument("--now", default=None, metavar="TIME",
                   help="the audit's 'now' for transaction timeouts and producer expiry, as "
                        "epoch milliseconds or ISO-8601 (default: the metadata log's last "
                        "record, else the newest segment's modification time)")
    p.add_argument("--transaction-max-timeout-ms", type=_natural, default=900_000,
                   metavar="MS", help="the brokers' transaction.max.timeout.ms: an open "
                   "transaction older than this is hanging unless its coordinator still has it "
                   "(default 900000)")
    p.add_argument("--producer-id-expiration-ms", type=_natural, default=86_400_000,
                   metavar="MS", help="the brokers' producer.id.expiration.ms: producers idle "
                   "longer no longer count as active (default 86400000)")
    p.add_argument("--block-size", type=_positive, default=1000,
                   help="ids per producer-id block (Kafka's PRODUCER_ID_BLOCK_SIZE, 1000)")


def add_pipeline_arguments(p: argparse.ArgumentParser) -> None:
    """`kraftpy pipeline eos-audit` (and the spark-submit entry point)."""
    p.add_argument("paths", nargs="+", metavar="DIR",
                   help="log directories (each broker's log.dirs, or a copy), folders holding "
                        "several, or partition folders")
    p.add_argument("--output", "-o", required=True,
                   help="directory for the Parquet tables and report.txt / report.json")
    p.add_argument("--master", default=None,
                   help="Spark master (default local[*], or the launcher's under spark-submit)")
    p.add_argument("--json", dest="fmt", action="store_const", const="json", default="text",
                   help="print the report as JSON (both forms are written to the output)")
    p.add_argument("--tasks", type=_positive, default=None,
                   help="tasks to spread the replicas over (default: two per core)")
    add_audit_arguments(p)


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "eos-audit", help="audit exactly-once (producer ids, sequences, epochs, transactions) "
        "in brokers' data logs", description=DESCRIPTION + " The Spark job `kraftpy pipeline "
        "eos-audit` does the same at scale and writes Parquet tables.")
    p.add_argument("paths", nargs="+", metavar="DIR", help="log directories, folders holding "
                   "several, or partition folders")
    p.add_argument("--json", dest="fmt", action="store_const", const="json", default="text",
                   help="the report as one JSON document")
    add_audit_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kraftpy.tools import eos_audit  # decoding modules load only when used

    return eos_audit.main(args.paths, fmt=args.fmt, now=args.now,
                          transaction_max_timeout_ms=args.transaction_max_timeout_ms,
                          producer_id_expiration_ms=args.producer_id_expiration_ms,
                          block_size=args.block_size)


def _natural(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is negative")
    return value


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not positive")
    return value
