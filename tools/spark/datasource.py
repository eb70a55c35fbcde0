"""`spark.read.format("kraft-metadata").load(paths)`: one input partition per log file, rows
exactly as `kraftpy dump-log --json` prints them (`kraftpy.tools.logdecode.rows`).

The records are those of metadata logs and of the coordinators' logs (`__transaction_state`,
`__consumer_offsets`: one row per record, typed TRANSACTION_LOG, OFFSET_COMMIT, ...). Files of
ordinary topics in a Kafka `log.dirs` directory hold application data, not typed records: they
get no input partition, so they give no rows (as `dump-log --json` writes none for them).

Options (Spark lower-cases their keys): `cluster` names the cluster for files whose path does
not say it; `types` (comma-separated record type names, e.g. PRODUCER_IDS_RECORD) decodes and
returns only those records, which makes audit queries several times faster. Directories are
walked here, not by Spark's file listing, which would hide `__cluster_metadata-0` (a leading
underscore marks a hidden folder for Spark).
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from operator import itemgetter

from kraftpy.tools.logdecode.paths import LogKind, classify, cluster_of, expand
from kraftpy.tools.logdecode.rows import ROW_DDL, ROW_FIELDS
from kraftpy.tools.logdecode.scan import Item, scan
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

ARROW_BATCH_ROWS = 20_000


@dataclass
class FilePartition(InputPartition):
    path: str

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.path = path


class KraftMetadataDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kraft-metadata"

    def schema(self) -> str:
        return ROW_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return KraftMetadataReader(dict(self.options))


class KraftMetadataReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.cluster = options.get("cluster", "")
        types = options.get("types", "")
        self.types = frozenset(t.strip() for t in types.split(",") if t.strip()) or None
        self.paths = input_paths(options)

    def partitions(self) -> list[FilePartition]:
        return [FilePartition(str(f.path)) for f in expand(self.paths) if f.log is not LogKind.DATA]

    def read(self, partition: FilePartition) -> Iterator:
        """Arrow batches of the file's rows (`rows.file_rows`' columns, built from the decoder's
        scan without a Python tuple per row)."""
        import pyarrow as pa

        try:
            file = classify(partition.path)
            path = str(file.path)
            head = (cluster_of(path, self.cluster), path, file.kind.value)
            schema = _arrow_schema()
            items = scan(file, types=self.types)
            while chunk := list(islice(items, ARROW_BATCH_ROWS)):  # no Python step per row
                yield _to_arrow(pa, schema, head, chunk)
        finally:
            _freeze_worker_heap()


def _freeze_worker_heap() -> None:
    """A reused Python worker is garbage-collected in full after every task (Spark's daemon
    calls `gc.collect()`), which walks every object of pyarrow, pandas and pyspark and the
    decoder's caches: ~10-25 ms per input file. Freezing what the worker holds at the end of
    each task (as `gc.freeze` intends for forked servers) leaves those collections only what
    the next task makes. Frozen objects are still freed when nothing refers to them; only a
    reference cycle left behind by a task would stay, and the decoder makes none."""
    if os.environ.get("SPARK_REUSE_WORKER"):
        import gc

        gc.freeze()


def input_paths(options: dict[str, str]) -> list[str]:
    """`.load(path)` arrives as `path`, `.load([a, b])` as `paths` (a JSON list); globs and
    comma-separated lists are expanded; paths become absolute for executors elsewhere."""
    raw: list[str] = []
    if "paths" in options:
        raw.extend(json.loads(options["paths"]))
    if "path" in options:
        raw.extend(p for p in options["path"].split(",") if p)
    if not raw:
        raise ValueError("kraft-metadata needs a path: .load('<dir or file>')")
    out: list[str] = []
    for item in raw:
        matches = sorted(glob.glob(item)) if glob.has_magic(item) else [item]
        if not matches:
            raise FileNotFoundError(f"kraft-metadata: no file matches {item}")
        for match in matches:
            if not os.path.exists(match):
                raise FileNotFoundError(f"kraft-metadata: {match} does not exist")
            out.append(os.path.abspath(match))
    return out


_SPARK_TO_ARROW = {"string": "string", "bigint": "int64", "int": "int32", "boolean": "bool_"}


def _arrow_schema():
    import pyarrow as pa

    return pa.schema([(name, getattr(pa, _SPARK_TO_ARROW[kind])()) for name, kind in ROW_FIELDS])


def _to_arrow(pa, schema, head: tuple[str, str, str], items: list[Item]):
    """cluster, file and file_kind are the same on every row of a file. The last five columns
    come from the decoder's shared column tuples, converted as one struct column in a single
    pass and split (cheaper than a list per column, or a gather of distinct values when most
    of them are distinct)."""
    n = len(items)
    fields = list(schema)
    arrays = [pa.repeat(pa.scalar(value, fields[i].type), n) for i, value in enumerate(head)]
    arrays += [pa.array(list(map(itemgetter(i), items)), type=fields[3 + i].type) for i in range(5)]
    tails = pa.array(list(map(itemgetter(5), items)), type=pa.struct(fields[8:]))
    arrays += tails.flatten()
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
