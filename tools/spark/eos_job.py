"""`kraftpy pipeline eos-audit DIR... --output OUT`: the exactly-once audit on Spark, and its
entry point for `spark-submit`:

    spark-submit --master spark://host:7077 $(python3 -c 'import kraftpy.tools.spark.eos_job
        as j; print(j.__file__)') /nfs/kafka/*/data --output /nfs/eos

The driver finds the log directories, reads the metadata logs and `__transaction_state` (the
cluster's context: producer-id blocks, topic configs, coordinator state, the audit's "now";
megabytes) and hands the partition replicas out to tasks, balanced by size. One job writes
the `batches` table from the segments' batch headers (each task its own Parquet file, for a
local or shared output: the JVM then converts and encodes none of the rows); beside it
another scans them again and replays them (`kraftpy.tools.logdecode.eos`, the very code
`kraftpy eos-audit` runs), and its rows (a few per producer and per transaction) are kept and
split into the audit's tables. Scanning twice costs less than keeping every batch row in
Spark's cache. The summaries (topics,
producer ids, brokers) are built on the driver from the replicas' rows, as in one process;
the small tables the driver then holds it writes itself to a local or shared path (a Spark
job each would cost more than the table), through Spark anywhere else.

Tables under OUT (Parquet, zstd): batches, partitions, producers, transactions, findings,
producer_state, topics, producer_ids, brokers; and the report as report.txt and report.json.
Inputs must be readable by the driver and every executor (a shared file system on a cluster).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from kraftpy.tools.cmd_eos_audit import add_pipeline_arguments
from kraftpy.tools.logdecode.batches import BATCH_TABLE_DDL, BATCH_TABLE_FIELDS
from kraftpy.tools.logdecode.eos import (
    ClusterContext,
    Finding,
    PartitionSummary,
    Producer,
    Settings,
    SnapshotEntry,
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
from kraftpy.tools.logdecode.logdirs import (
    LogDir,
    NoLogDirs,
    find_log_dirs,
    replica_at,
    selected_replicas,
)

SUMMARY_TABLES = ("topics", "producer_ids", "brokers")
ARROW_ROWS = 20_000


# --- the tasks ---------------------------------------------------------------------------------

_AUDIT_ROWS = (("table", "string"), ("row", "string"))


def _work_of(arrow: Any) -> Iterator[tuple[int, list[Any]]]:
    """(bin, its replicas) of each task row in a batch of them (JSON: the bin's number and
    its replicas' descriptions)."""
    for work in arrow.column(0).to_pylist():
        task = json.loads(work)
        yield task["bin"], [replica_at(LogDir(Path(r["log_dir"]), r["cluster"], r["broker"]),
                                       Path(r["path"])) for r in task["replicas"]]


def _replicas_of(arrow: Any) -> Iterator[Any]:
    for _, replicas_ in _work_of(arrow):
        yield from replicas_


def _arrow_batches(schema: Any, rows: Iterator[tuple]) -> Iterator[Any]:
    """Rows as Arrow record batches of at most ARROW_ROWS rows."""
    import pyarrow as pa

    chunk: list[tuple] = []
    for row in rows:
        chunk.append(row)
        if len(chunk) >= ARROW_ROWS:
            yield _batch_of(pa, schema, chunk)
            chunk = []
    if chunk:
        yield _batch_of(pa, schema, chunk)


def _batch_of(pa: Any, schema: Any, rows: list[tuple]) -> Any:
    return pa.RecordBatch.from_arrays(
        [pa.array(c, type=schema.field(i).type)
         for i, c in enumerate(zip(*rows, strict=True))], schema=schema)


def _batch_tasks(folder: str | None):
    """The mapInArrow function of the batches table: each replica's batch headers, as Arrow
    columns read straight from the files (`batch_arrow`). With `folder`, each task writes its
    bin's rows there as one Parquet file itself and yields (file, rows): Spark's JVM then
    converts and encodes none of them (it would cost it more than the scan costs the task)."""

    def run(tasks: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from kraftpy.tools.spark.batch_arrow import segment_batches

        for arrow in tasks:
            for number, replicas_ in _work_of(arrow):
                batches = (b for replica in replicas_ for segment in replica.segments
                           for b in segment_batches(pa, segment, (replica.cluster,
                                                                  replica.broker, replica.topic,
                                                                  replica.partition),
                                                    ARROW_ROWS))
                if folder is None:
                    yield from batches
                else:
                    yield _write_part(pa, Path(folder), number, batches)

    return run


def _write_part(pa: Any, folder: Path, number: int, batches: Iterator[Any]) -> Any:
    """One task's batches as `part-<bin>.zstd.parquet` in `folder`, written under a hidden
    name and renamed, so a retried or speculative attempt leaves one whole file."""
    import uuid

    import pyarrow.parquet as pq
    from kraftpy.tools.spark.datasource import arrow_schema

    schema = arrow_schema(pa, BATCH_TABLE_FIELDS)
    final = folder / f"part-{number:05d}.zstd.parquet"
    temporary = folder / f".{final.name}.{uuid.uuid4().hex}"
    rows = 0
    with pq.ParquetWriter(temporary, schema, compression="zstd") as writer:
        for batch in batches:
            writer.write_batch(batch)
            rows += batch.num_rows
    os.replace(temporary, final)
    return pa.RecordBatch.from_arrays([pa.array([final.name]), pa.array([rows], pa.int64())],
                                      names=["file", "rows"])


def _audit_tasks(contexts: dict[str, ClusterContext], settings: Settings):
    """The mapInArrow function of the audit: each replica scanned and replayed; its rows of
    every audit table as (table, row as JSON)."""

    def run(tasks: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from kraftpy.tools.logdecode.dumptext import compact_json
        from kraftpy.tools.spark.datasource import arrow_schema

        def rows() -> Iterator[tuple]:
            for arrow in tasks:
                for replica in _replicas_of(arrow):
                    auditor, problems = replica_auditor(replica, contexts[replica.cluster],
                                                        settings)
                    for path, _, batch in replica_batches(replica, problems):
                        auditor.add(path, batch)
                    audit = auditor.finish(problems)
                    yield "partitions", compact_json(audit.summary.as_dict())
                    for table, items in (("producers", audit.producers),
                                         ("transactions", audit.transactions),
                                         ("findings", audit.findings),
                                         ("producer_state", audit.snapshot_entries)):
                        for i in items:
                            yield table, compact_json(i.as_dict())

        yield from _arrow_batches(arrow_schema(pa, _AUDIT_ROWS), rows())

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
    from pyspark.storagelevel import StorageLevel

    log_dirs = find_log_dirs(paths)
    contexts = build_contexts(log_dirs, now_ms=now_ms, block_size=block_size)
    found = selected_replicas(paths)
    work = [(r.size, {"log_dir": str(r.log_dir.path.resolve()), "cluster": r.cluster,
                      "broker": r.broker, "path": str(r.path.resolve())}) for r in found]
    sc = spark.sparkContext
    count = max(1, min(len(work), tasks or 4 * sc.defaultParallelism))
    bins = _bins(work, count)
    target = output.rstrip("/")
    work_rows = sc.parallelize([(json.dumps({"bin": i, "replicas": b}),)
                                for i, b in enumerate(bins)], len(bins)) if bins else \
        sc.parallelize([], 1)
    spread = spark.createDataFrame(work_rows, "work string")
    # The batches table straight to Parquet; the audit's rows (a few per producer and
    # transaction) kept, split into their tables and read back for the report. Each job
    # scans the segments: a second scan costs less than keeping every batch row. The two jobs
    # run side by side, so one's last tasks and its commit overlap the other's work.
    audit = (spread.mapInArrow(_audit_tasks(contexts.by_cluster, settings),
                              ", ".join(f"{n} {k}" for n, k in _AUDIT_ROWS))
             .persist(StorageLevel.MEMORY_AND_DISK))
    result = EosResult(problems=contexts.problems, contexts=contexts.by_cluster)
    with ThreadPoolExecutor(1) as beside:
        batches = beside.submit(_batches_table, spread, f"{target}/batches")
        _audit_tables(audit, target, result)
        batches.result()
    _order(result)
    result.summarize()
    for name in (*_HELD, *SUMMARY_TABLES):
        _write_held(spark, name, getattr(result, name), f"{target}/{name}")
    return result


_HELD = ("partitions", "producers", "findings", "producer_state")


def _batches_table(spread: Any, path: str) -> None:
    """The batches table: to a local or shared path by the tasks themselves, anywhere else
    (hdfs://, s3a://) through Spark's writer."""
    if "://" in path:
        _write(spread.mapInArrow(_batch_tasks(None), BATCH_TABLE_DDL), path)
        return
    folder = Path(path)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    spread.mapInArrow(_batch_tasks(str(folder.resolve())), "file string, rows bigint").collect()
    (folder / "_SUCCESS").write_bytes(b"")


def _audit_tables(audit: Any, target: str, result: EosResult) -> None:
    """The transactions table from the kept audit rows, and the rest of them to `result`."""
    from pyspark.sql import functions as F

    table = F.col("table")
    try:
        kept = audit.where(table.isin(*_HELD)).collect()
        # transactions: one row per transaction per replica, too many for the driver
        _write(audit.where(table == "transactions")
               .select(F.from_json("row", table_ddl("transactions")).alias("r")).select("r.*"),
               f"{target}/transactions")
    finally:
        audit.unpersist()
    for name, row in kept:
        getattr(result, name).append(TABLE_ROWS[name](**json.loads(row)))


def _write(df: Any, path: str) -> None:
    df.write.mode("overwrite").option("compression", "zstd").parquet(path)


def _write_held(spark: Any, table: str, rows: list[Any], path: str) -> None:
    """A table the driver holds (a row per replica, producer or finding, or a summary): to a
    local or shared path straight from the driver, as one Parquet file in Spark's layout (a
    Spark job for each would cost more than the table); anywhere else (hdfs://, s3a://)
    through Spark."""
    data = [tuple(r.as_dict().values()) for r in rows]
    if "://" in path:
        _write(spark.createDataFrame(data, table_ddl(table)).coalesce(1), path)
        return
    import pyarrow as pa
    import pyarrow.parquet as pq
    from kraftpy.tools.spark.datasource import arrow_schema

    fields = tuple(tuple(c.split(" ")) for c in table_ddl(table).split(", "))
    schema = arrow_schema(pa, fields)  # type: ignore[arg-type]
    folder = Path(path)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    columns = list(zip(*data, strict=True)) if data else [[] for _ in fields]
    arrays = [pa.array(c, type=schema.field(i).type) for i, c in enumerate(columns)]
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema),
                   folder / "part-00000-driver.zstd.parquet", compression="zstd")
    (folder / "_SUCCESS").write_bytes(b"")


def _order(result: EosResult) -> None:
    """The rows in the order one process makes them (by replica, then as the audit lists)."""
    from kraftpy.tools.logdecode.eos_report import _broker_key

    def replica(r: PartitionSummary | Producer | Finding | SnapshotEntry) -> tuple:
        return (r.cluster, _broker_key(r.broker), r.topic, r.partition)

    result.partitions.sort(key=replica)
    result.producers.sort(key=lambda p: (*replica(p), p.producer_id))
    result.producer_state.sort(key=lambda e: (*replica(e), e.snapshot_offset))
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
    add_pipeline_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
