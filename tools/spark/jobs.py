"""The pipeline's tables, built on the `kraft-metadata` source with the decoder's own logic.

`records` is the data source as is. `producer_id_blocks` and `broker_registrations` group the
few record types they need by cluster and run the very functions `kraftpy pid-audit` uses
(`kraftpy.tools.logdecode.audit` / `.history`) inside `applyInPandas`, so the Spark tables and
the single-process CLI agree row for row by construction, on one machine or a thousand.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import Any

from kraftpy.tools.logdecode.audit import AUDIT_TYPES, audit
from kraftpy.tools.logdecode.history import BROKER_TYPES, EVENT_COLUMNS, broker_events
from kraftpy.tools.logdecode.rows import audit_record
from kraftpy.tools.spark.job import TABLES
from pyspark.sql import DataFrame, SparkSession

BLOCK_SCHEMA = (
    "cluster string, offset bigint, timestamp_ms bigint, broker_id int, broker_epoch bigint, "
    "first_id bigint, last_id bigint, registration_offset bigint, "
    "registration_timestamp_ms bigint, incarnation_id string, finding string"
)
EVENT_SCHEMA = (
    "cluster string, offset bigint, timestamp_ms bigint, event string, broker_id int, "
    "broker_epoch bigint, incarnation_id string, fenced boolean, in_controlled_shutdown boolean, "
    "rack string, endpoints string"
)


def read_records(spark: SparkSession, paths: Sequence[str], *, cluster: str = "",
                 types: frozenset[str] | None = None) -> DataFrame:
    reader = spark.read.format("kraft-metadata")
    if cluster:
        reader = reader.option("cluster", cluster)
    if types:
        reader = reader.option("types", ",".join(sorted(types)))
    return reader.load(list(paths))


def producer_id_blocks(spark: SparkSession, paths: Sequence[str], *, cluster: str = "",
                       block_size: int = 1000) -> DataFrame:
    """One row per granted block, findings (gap, overlap, unregistered-epoch) per row; the
    overlap check covers every input of a cluster (several nodes' copies count once)."""
    df = read_records(spark, paths, cluster=cluster, types=AUDIT_TYPES)
    df = df.where("record_type IS NOT NULL AND payload IS NOT NULL")
    return (df.groupBy("cluster")
            .applyInPandas(partial(_blocks_of_cluster, block_size), BLOCK_SCHEMA)
            .orderBy("cluster", "offset"))


def broker_registrations(spark: SparkSession, paths: Sequence[str], *,
                         cluster: str = "") -> DataFrame:
    df = read_records(spark, paths, cluster=cluster, types=BROKER_TYPES)
    df = df.where("record_type IS NOT NULL AND payload IS NOT NULL AND file_kind = 'segment'")
    return (df.groupBy("cluster").applyInPandas(_events_of_cluster, EVENT_SCHEMA)
            .orderBy("cluster", "offset"))


def run(spark: SparkSession, inputs: Sequence[str], output: str, *,
        tables: Sequence[str] = TABLES, cluster: str = "", block_size: int = 1000) -> dict[str, Any]:
    """Write each table as Parquet (zstd) under `output/<table>`; return row counts and
    the number of overlapping blocks."""
    summary: dict[str, Any] = {}
    for table in tables:
        if table == "records":
            df = read_records(spark, inputs, cluster=cluster)
        elif table == "producer_id_blocks":
            df = producer_id_blocks(spark, inputs, cluster=cluster, block_size=block_size)
        elif table == "broker_registrations":
            df = broker_registrations(spark, inputs, cluster=cluster)
        else:
            raise ValueError(f"unknown table {table!r}; known: {', '.join(TABLES)}")
        target = f"{output.rstrip('/')}/{table}"
        df.write.mode("overwrite").option("compression", "zstd").parquet(target)
        written = spark.read.parquet(target)
        summary[table] = written.count()
        if table == "producer_id_blocks":
            summary["overlaps"] = written.where("finding LIKE '%overlap%'").count()
    return summary


def _blocks_of_cluster(block_size: int, frame):
    import pandas as pd

    result = audit((audit_record(r) for r in frame.to_dict("records")), block_size)
    rows = [b.as_dict() for b in result.blocks]
    return _frame(pd, rows, BLOCK_SCHEMA)


def _events_of_cluster(frame):
    import pandas as pd

    rows = [e.as_dict() for e in broker_events(audit_record(r) for r in frame.to_dict("records"))]
    return _frame(pd, rows, EVENT_SCHEMA)


_PANDAS_TYPES = {"string": "object", "bigint": "Int64", "int": "Int32", "boolean": "boolean"}


def _frame(pd, rows: list[dict[str, Any]], schema: str):
    columns = [c.strip().split(" ") for c in schema.split(",")]
    data = {name: pd.array([r[name] for r in rows], dtype=_PANDAS_TYPES[kind])
            for name, kind in columns}
    return pd.DataFrame(data, columns=[name for name, _ in columns])


assert tuple(c.strip().split(" ")[0] for c in EVENT_SCHEMA.split(",")) == EVENT_COLUMNS
