"""`kraftpy pipeline eos-audit DIR... --output OUT`: the exactly-once audit on Spark, and its
entry point for `spark-submit`:

    spark-submit --master spark://host:7077 $(python3 -c 'import kraftpy.tools.spark.eos_job
        as j; print(j.__file__)') /nfs/kafka/*/data --output /nfs/eos

The driver finds the log directories, reads the metadata logs and `__transaction_state` (the
cluster's context: producer-id blocks, topic configs, coordinator state, the audit's "now";
megabytes) and hands the partition replicas out to tasks, balanced by their estimated batches.
To a local or shared output the audit is one job: each task scans its replicas once, replays
them (`kraftpy.tools.logdecode.eos`, the very code `kraftpy eos-audit` runs), writes its share
of the two big tables (`batches`, `transactions`) as Parquet itself (the JVM then converts and
encodes none of those rows) and hands the driver the rest (a few rows per replica, producer
and finding). The summaries (topics, producer ids, brokers) are built on the driver from
those rows, as in one process, and the driver writes the small tables itself (a Spark job
each would cost more than the table). To hdfs://, s3a:// and the like every table goes
through Spark's writer instead.

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
    Replica,
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


def _segment_batches(pa: Any, replicas_: list[Any]) -> Iterator[Any]:
    """The batches table's rows of some replicas, as Arrow columns read straight from the
    files (`batch_arrow`)."""
    from kraftpy.tools.spark.batch_arrow import segment_batches

    for replica in replicas_:
        for segment in replica.segments:
            yield from segment_batches(pa, segment, (replica.cluster, replica.broker,
                                                     replica.topic, replica.partition),
                                       ARROW_ROWS)


def _batch_tasks():
    """The mapInArrow function of the batches table when Spark writes it (to hdfs://, s3a://
    and the like)."""

    def run(tasks: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for arrow in tasks:
            for _, replicas_ in _work_of(arrow):
                yield from _segment_batches(pa, replicas_)

    return run


def _write_part(pa: Any, folder: Path, number: int, schema: Any, batches: Iterator[Any]) -> int:
    """One task's rows as `part-<bin>.zstd.parquet` in `folder`, written under a hidden name
    and renamed, so a retried or speculative attempt leaves one whole file; the row count."""
    import uuid

    import pyarrow.parquet as pq

    final = folder / f"part-{number:05d}.zstd.parquet"
    temporary = folder / f".{final.name}.{uuid.uuid4().hex}"
    rows = 0
    with pq.ParquetWriter(temporary, schema, compression="zstd") as writer:
        for batch in batches:
            writer.write_batch(batch)
            rows += batch.num_rows
    os.replace(temporary, final)
    return rows


def _table_schema(pa: Any, table: str) -> Any:
    from kraftpy.tools.spark.datasource import arrow_schema

    fields = tuple(tuple(c.split(" ")) for c in table_ddl(table).split(", "))
    return arrow_schema(pa, fields)  # type: ignore[arg-type]


def _audit_tasks(contexts: dict[str, ClusterContext], settings: Settings,
                 output: str | None):
    """The mapInArrow function of the audit: each replica scanned and replayed; its rows of
    the audit's tables as (table, row as JSON). With `output` (a local or shared folder) each
    task also writes its bin's `batches` and `transactions` there as Parquet itself and yields
    only the rows the driver keeps: the work is then all in the tasks, one job, and Spark's
    JVM converts and encodes none of the big tables (it would cost it more than the scan
    costs the task)."""

    def run(tasks: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from kraftpy.tools.logdecode.dumptext import compact_json
        from kraftpy.tools.spark.datasource import arrow_schema

        def audit_rows(replicas_: list[Any], transactions: list[tuple] | None
                       ) -> Iterator[tuple]:
            for replica in replicas_:
                auditor, problems = replica_auditor(replica, contexts[replica.cluster],
                                                    settings)
                for path, _, batch in replica_batches(replica, problems):
                    auditor.add(path, batch)
                audit = auditor.finish(problems)
                yield "partitions", compact_json(audit.summary.as_dict())
                if transactions is None:
                    for t in audit.transactions:
                        yield "transactions", compact_json(t.as_dict())
                else:
                    transactions.extend(tuple(t.as_dict().values())
                                        for t in audit.transactions)
                for table, items in (("producers", audit.producers),
                                     ("findings", audit.findings),
                                     ("producer_state", audit.snapshot_entries)):
                    for i in items:
                        yield table, compact_json(i.as_dict())

        def rows() -> Iterator[tuple]:
            for arrow in tasks:
                for number, replicas_ in _work_of(arrow):
                    if output is None:
                        yield from audit_rows(replicas_, None)
                        continue
                    folder = Path(output)
                    _write_part(pa, folder / "batches", number,
                                arrow_schema(pa, BATCH_TABLE_FIELDS),
                                _segment_batches(pa, replicas_))
                    transactions: list[tuple] = []
                    yield from audit_rows(replicas_, transactions)
                    schema = _table_schema(pa, "transactions")
                    _write_part(pa, folder / "transactions", number, schema,
                                _arrow_batches(schema, iter(transactions)))

        yield from _arrow_batches(arrow_schema(pa, _AUDIT_ROWS), rows())

    return run


_SAMPLE = 64 * 1024


def _cost(replica: Replica) -> int:
    """About how many batches the replica holds: its bytes times the batches per byte of the
    first 64 KB of its first segment. The scan's cost is per batch, not per byte: a replica of
    small batches (transactional offset commits) costs thirty times what its size says, and
    tasks balanced by bytes alone wait on the one that holds it."""
    size = replica.size
    if not replica.segments or size == 0:
        return 0
    try:
        with replica.segments[0].path.open("rb") as f:
            head = f.read(_SAMPLE)
    except OSError:
        return size
    position = batches = 0
    while position + 12 <= len(head):
        batches += 1
        position += 12 + max(0, int.from_bytes(head[position + 8:position + 12], "big",
                                                signed=True))
    return max(1, size * batches // max(position, 1))


def _bins(work: list[tuple[int, dict[str, str]]], count: int) -> list[list[dict[str, str]]]:
    """Replicas spread over `count` tasks, costliest first into the lightest."""
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

    log_dirs = find_log_dirs(paths)
    contexts = build_contexts(log_dirs, now_ms=now_ms, block_size=block_size)
    found = selected_replicas(paths)
    work = [(_cost(r), {"log_dir": str(r.log_dir.path.resolve()), "cluster": r.cluster,
                        "broker": r.broker, "path": str(r.path.resolve())}) for r in found]
    sc = spark.sparkContext
    count = max(1, min(len(work), tasks or 2 * sc.defaultParallelism))
    bins = _bins(work, count)
    target = output.rstrip("/")
    work_rows = sc.parallelize([(json.dumps({"bin": i, "replicas": b}),)
                                for i, b in enumerate(bins)], len(bins)) if bins else \
        sc.parallelize([], 1)
    spread = spark.createDataFrame(work_rows, "work string")
    result = EosResult(problems=contexts.problems, contexts=contexts.by_cluster)
    if "://" in target:
        _through_spark(spread, contexts.by_cluster, settings, target, result)
    else:
        _by_the_tasks(spread, contexts.by_cluster, settings, Path(target), result)
    _order(result)
    result.summarize()
    for name in (*_HELD, *SUMMARY_TABLES):
        _write_held(spark, name, getattr(result, name), f"{target}/{name}")
    return result


_HELD = ("partitions", "producers", "findings", "producer_state")
_AUDIT_DDL = ", ".join(f"{n} {k}" for n, k in _AUDIT_ROWS)


def _by_the_tasks(spread: Any, contexts: dict[str, ClusterContext], settings: Settings,
                  target: Path, result: EosResult) -> None:
    """To a local or shared path: one job, whose tasks write `batches` and `transactions`
    themselves and hand the driver the rows it keeps."""
    folders = [target / "batches", target / "transactions"]
    for folder in folders:
        _fresh(folder)
    kept = spread.mapInArrow(_audit_tasks(contexts, settings, str(target.resolve())),
                             _AUDIT_DDL).collect()
    for folder in folders:
        (folder / "_SUCCESS").write_bytes(b"")
    _keep(kept, result)


def _through_spark(spread: Any, contexts: dict[str, ClusterContext], settings: Settings,
                   target: str, result: EosResult) -> None:
    """To hdfs://, s3a:// and the like, every big table through Spark's writer: the audit's
    rows (a few per producer and transaction) kept, the transactions written from them, and
    beside that job another that scans the segments again for the batches table (a second
    scan costs less than keeping every batch row)."""
    from pyspark.sql import functions as F
    from pyspark.storagelevel import StorageLevel

    audit = (spread.mapInArrow(_audit_tasks(contexts, settings, None), _AUDIT_DDL)
             .persist(StorageLevel.MEMORY_AND_DISK))
    table = F.col("table")
    with ThreadPoolExecutor(1) as beside:
        batches = beside.submit(_write, spread.mapInArrow(_batch_tasks(), BATCH_TABLE_DDL),
                                f"{target}/batches")
        try:
            kept = audit.where(table.isin(*_HELD)).collect()
            _write(audit.where(table == "transactions")
                   .select(F.from_json("row", table_ddl("transactions")).alias("r"))
                   .select("r.*"), f"{target}/transactions")
        finally:
            audit.unpersist()
        batches.result()
    _keep(kept, result)


def _keep(kept: list[Any], result: EosResult) -> None:
    for name, row in kept:
        getattr(result, name).append(TABLE_ROWS[name](**json.loads(row)))


def _write(df: Any, path: str) -> None:
    df.write.mode("overwrite").option("compression", "zstd").parquet(path)


def _fresh(folder: Path) -> Path:
    """`folder`, emptied of an earlier run's table (Spark's overwrite, for a local path)."""
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


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

    schema = _table_schema(pa, table)
    folder = _fresh(Path(path))
    columns = list(zip(*data, strict=True)) if data else [[] for _ in schema]
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
