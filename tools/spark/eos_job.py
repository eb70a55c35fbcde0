"""`kraftpy pipeline eos-audit DIR... --output OUT`: the exactly-once audit on Spark, and its
entry point for `spark-submit`:

    spark-submit --master spark://host:7077 $(python3 -c 'import kraftpy.tools.spark.eos_job
        as j; print(j.__file__)') /nfs/kafka/*/data --output /nfs/eos

The driver finds the log directories, reads the metadata logs and `__transaction_state` (the
cluster's context: producer-id blocks, topic configs, coordinator state, the audit's "now";
megabytes) and hands the partition replicas out to tasks, balanced by size. Each task scans
its replicas' segments and replays them (`kraftpy.tools.logdecode.eos`, the very code
`kraftpy eos-audit` runs), and yields the `batches` table's rows and the audit's rows in one
Arrow stream; that stream is kept and split into the Parquet tables. The summaries (topics,
producer ids, brokers) are built on the driver from the replicas' rows, as in one process.

Tables under OUT (Parquet, zstd): batches, partitions, producers, transactions, findings,
producer_state, topics, producer_ids, brokers; and the report as report.txt and report.json.
Inputs must be readable by the driver and every executor (a shared file system on a cluster).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from kraftpy.tools.cmd_eos_audit import add_pipeline_arguments
from kraftpy.tools.logdecode.batches import BATCH_TABLE_FIELDS, batch_row
from kraftpy.tools.logdecode.eos import (
    ClusterContext,
    Finding,
    PartitionSummary,
    Producer,
    Settings,
    finding_order,
)
from kraftpy.tools.logdecode.eos_report import (
    TABLE_ROWS,
    EosResult,
    render_json,
    render_text,
    table_ddl,
)
from kraftpy.tools.logdecode.eos_scan import build_contexts, replica_auditor, replica_batches
from kraftpy.tools.logdecode.logdirs import LogDir, NoLogDirs, find_log_dirs, replica_at, replicas

AUDIT_TABLES = ("partitions", "producers", "transactions", "findings", "producer_state")
SUMMARY_TABLES = ("topics", "producer_ids", "brokers")
TABLES = ("batches", *AUDIT_TABLES, *SUMMARY_TABLES)
ARROW_ROWS = 20_000


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_pipeline_arguments(p)


# --- the tasks ---------------------------------------------------------------------------------

_UNION = (("table", "string"), *BATCH_TABLE_FIELDS, ("row", "string"))


def _audit_tasks(contexts: dict[str, ClusterContext], settings: Settings):
    """The mapInArrow function: each input row is one task's replicas (JSON); the output is
    the union stream (table name, a batches row's columns, or another table's row as JSON),
    in Arrow batches of at most ARROW_ROWS rows whatever a replica's size."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from kraftpy.tools.logdecode.dumptext import compact_json
        from kraftpy.tools.spark.datasource import arrow_schema

        schema = arrow_schema(pa, _UNION)
        blank = (None,) * len(BATCH_TABLE_FIELDS)
        rows: list[tuple] = []

        def flush() -> Any:
            columns = list(zip(*rows, strict=True))
            rows.clear()
            return pa.RecordBatch.from_arrays(
                [pa.array(c, type=schema.field(i).type) for i, c in enumerate(columns)],
                schema=schema)

        for arrow in batches:
            for work in arrow.column(0).to_pylist():
                for item in json.loads(work):
                    owner = LogDir(Path(item["log_dir"]), item["cluster"], item["broker"])
                    replica = replica_at(owner, Path(item["path"]))
                    where = (replica.cluster, replica.broker, replica.topic, replica.partition)
                    auditor, problems = replica_auditor(replica, contexts[replica.cluster],
                                                        settings)
                    for path, segment, batch in replica_batches(replica, problems):
                        auditor.add(path, batch)
                        rows.append(("batches", *batch_row(where, path, segment, batch), None))
                        if len(rows) >= ARROW_ROWS:
                            yield flush()
                    audit = auditor.finish(problems)
                    rows.append(("partitions", *blank, compact_json(audit.summary.as_dict())))
                    for table, items in (("producers", audit.producers),
                                         ("transactions", audit.transactions),
                                         ("findings", audit.findings),
                                         ("producer_state", audit.snapshot_entries)):
                        for i in items:
                            rows.append((table, *blank, compact_json(i.as_dict())))
                            if len(rows) >= ARROW_ROWS:
                                yield flush()
        if rows:
            yield flush()

    return run


def _bins(work: list[tuple[int, dict[str, str]]], count: int) -> list[list[dict[str, str]]]:
    """Replicas spread over `count` tasks, largest first into the lightest (by bytes)."""
    bins: list[tuple[int, int, list[dict[str, str]]]] = [(0, i, []) for i in range(count)]
    for size, item in sorted(work, key=lambda w: -w[0]):
        load, i, items = min(bins)
        items.append(item)
        bins[i] = (load + size, i, items)
    return [items for _, _, items in sorted(bins, key=lambda b: b[1]) if items]


# --- the job -----------------------------------------------------------------------------------

def eos_audit(spark: Any, paths: Sequence[str], output: str, *, settings: Settings,
              now_ms: int | None = None, block_size: int = 1000,
              tasks: int = 0) -> EosResult:
    """Run the audit, write every table under `output`, and return the report's rows."""
    from pyspark.sql import functions as F
    from pyspark.storagelevel import StorageLevel

    log_dirs = find_log_dirs(paths)
    contexts = build_contexts(log_dirs, now_ms=now_ms, block_size=block_size)
    work = [(r.size, {"log_dir": str(r.log_dir.path.resolve()), "cluster": r.cluster,
                      "broker": r.broker, "path": str(r.path.resolve())})
            for r in replicas(log_dirs)]
    for r in replicas(log_dirs):
        contexts.of(r.cluster)
    sc = spark.sparkContext
    count = max(1, min(len(work), tasks or 4 * sc.defaultParallelism))
    bins = _bins(work, count)
    ddl = ", ".join(f"{n} {k}" for n, k in _UNION)
    rows = sc.parallelize([(json.dumps(b),) for b in bins], len(bins)) if bins else \
        sc.parallelize([], 1)
    union = (spark.createDataFrame(rows, "work string")
             .mapInArrow(_audit_tasks(contexts.by_cluster, settings), ddl)
             .persist(StorageLevel.MEMORY_AND_DISK))
    target = output.rstrip("/")
    table = F.col("table")
    result = EosResult(problems=contexts.problems, contexts=contexts.by_cluster)
    try:
        names = [n for n, _ in BATCH_TABLE_FIELDS]
        _write(union.where(table == "batches").select(*names), f"{target}/batches")
        for name in AUDIT_TABLES:
            rows = union.where(table == name).select(F.from_json("row", table_ddl(name))
                                                     .alias("r")).select("r.*")
            _write(rows if name == "transactions" else rows.coalesce(1), f"{target}/{name}")
        # the rows the report needs, in one pass over the kept stream
        kept = union.where(table.isin("partitions", "producers", "findings")) \
            .select("table", "row").collect()
    finally:
        union.unpersist()
    for name, row in kept:
        getattr(result, name).append(TABLE_ROWS[name](**json.loads(row)))
    _order(result)
    result.summarize()
    for name in SUMMARY_TABLES:
        data = [tuple(asdict(r).values()) for r in getattr(result, name)]
        _write(spark.createDataFrame(data, table_ddl(name)).coalesce(1), f"{target}/{name}")
    return result


def _write(df: Any, path: str) -> None:
    df.write.mode("overwrite").option("compression", "zstd").parquet(path)


def _order(result: EosResult) -> None:
    """The rows in the order one process makes them (by replica, then as the audit lists)."""
    from kraftpy.tools.logdecode.eos_report import _broker_key

    def replica(r: PartitionSummary | Producer | Finding) -> tuple:
        return (r.cluster, _broker_key(r.broker), r.topic, r.partition)

    result.partitions.sort(key=replica)
    result.producers.sort(key=lambda p: (*replica(p), p.producer_id))
    result.findings.sort(key=lambda f: (*replica(f), *finding_order(f)))


def write_reports(result: EosResult, output: str) -> None:
    """report.txt and report.json beside the tables (when the output is a local path)."""
    if "://" in output:
        return
    folder = Path(output)
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "report.txt").open("w") as f:
        render_text(result, f)
    with (folder / "report.json").open("w") as f:
        render_json(result, f)


def run(args: argparse.Namespace) -> int:
    from kraftpy.tools.eos_audit import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, parse_time

    try:
        now_ms = None if args.now is None else parse_time(args.now)
        find_log_dirs(args.paths)  # a clear error before a Spark session starts
    except (NoLogDirs, ValueError) as e:
        sys.stderr.write(f"kraftpy pipeline eos-audit: {e}\n")
        return EXIT_USAGE
    try:
        from kraftpy.tools.spark.session import local_session, register
    except ImportError as e:
        sys.stderr.write("kraftpy pipeline needs the spark extra (pip install "
                         f"'kraftpy[spark]'): {e}\n")
        return EXIT_USAGE
    if args.master is None and os.environ.get("PYSPARK_GATEWAY_PORT"):
        from pyspark.sql import SparkSession

        spark = register(SparkSession.builder.getOrCreate())
        owned = False
    else:
        spark = local_session(args.master or "local[*]", app="kraftpy-eos-audit")
        owned = True
    try:
        result = eos_audit(spark, args.paths, args.output,
                           settings=Settings(args.transaction_max_timeout_ms,
                                             args.producer_id_expiration_ms),
                           now_ms=now_ms, block_size=args.block_size, tasks=args.tasks or 0)
    finally:
        if owned:
            spark.stop()
    write_reports(result, args.output)
    (render_json if args.fmt == "json" else render_text)(result, sys.stdout)
    return EXIT_FINDINGS if result.errors else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kraftpy-eos-audit", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
