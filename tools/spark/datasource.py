"""`spark.read.format("kraft-metadata").load(paths)`: one input partition per log file, rows
exactly as `kraftpy dump-log --json` prints them (`kraftpy.tools.logdecode.rows`).

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

from kraftpy.tools.logdecode.paths import classify, expand
from kraftpy.tools.logdecode.rows import ROW_DDL, ROW_FIELDS, file_rows
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
        return [FilePartition(str(f.path)) for f in expand(self.paths)]

    def read(self, partition: FilePartition) -> Iterator:
        import pyarrow as pa

        schema = _arrow_schema()
        rows = file_rows(classify(partition.path), self.cluster, types=self.types)
        chunk: list[tuple] = []
        for row in rows:
            chunk.append(row)
            if len(chunk) >= ARROW_BATCH_ROWS:
                yield _to_arrow(pa, schema, chunk)
                chunk = []
        if chunk:
            yield _to_arrow(pa, schema, chunk)


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


# cluster, file and file_kind are the same on every row of a partition (one file).
_PER_FILE = 3


def _to_arrow(pa, schema, rows: list[tuple]):
    columns = list(zip(*rows, strict=True))
    n = len(rows)
    arrays = [pa.repeat(pa.scalar(rows[0][i], field.type), n) if i < _PER_FILE
              else pa.array(columns[i], type=field.type) for i, field in enumerate(schema)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
