"""Two Spark data sources over Kafka's log files, one input partition per file.

`spark.read.format("kraft-metadata").load(paths)`: the typed records of metadata logs and of the
coordinators' logs (`__transaction_state`, `__consumer_offsets`: one row per record, typed
TRANSACTION_LOG, OFFSET_COMMIT, ...), in the first columns of `kraftpy dump-log --json`'s rows
(`kraftpy.tools.logdecode.rows`). Files of ordinary topics get no input partition here.

`spark.read.format("kafka-log").load(paths)`: every record of every partition, with every
column `dump-log --json` prints (`kraftpy.tools.logdecode.records`: topic, partition, the
batch's producer id, epoch and sequences, the transactional bit, a marker's coordinator epoch,
an ordinary record's key, value and headers as bytes). Its option `table` picks other tables
of the same files: `batches` (one row per batch, headers only, the exactly-once audit's input)
or `producer_state` (the entries of the producer-state `.snapshot` files); `text` ("true")
gives keys, values and header values as text (decoded as Kafka's StringDecoder does).

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
from typing import Any

from kraftpy.tools.logdecode.batches import BATCH_TABLE_DDL
from kraftpy.tools.logdecode.paths import FileKind, LogKind, classify, cluster_of, expand
from kraftpy.tools.logdecode.records import full_ddl, full_fields, location, record_rows
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


_SPARK_TO_ARROW = {"string": "string", "bigint": "int64", "int": "int32", "boolean": "bool_",
                   "binary": "binary"}


def arrow_type(pa, kind: str):
    """The Arrow type of a Spark DDL type of these tables (scalars, arrays of key/value
    structs)."""
    if kind.startswith("array<struct<key:string,value:"):
        value = kind[len("array<struct<key:string,value:"):-2]
        return pa.list_(pa.struct([("key", pa.string()), ("value", arrow_type(pa, value))]))
    return getattr(pa, _SPARK_TO_ARROW[kind])()


def arrow_schema(pa, fields: tuple[tuple[str, str], ...]):
    return pa.schema([(name, arrow_type(pa, kind)) for name, kind in fields])


def _arrow_schema():
    import pyarrow as pa

    return arrow_schema(pa, ROW_FIELDS)


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


# --- kafka-log ---------------------------------------------------------------------------------

KAFKA_LOG_TABLES = ("records", "batches", "producer_state")
PRODUCER_STATE_FIELDS: tuple[tuple[str, str], ...] = (
    ("cluster", "string"), ("broker", "string"), ("topic", "string"), ("partition", "int"),
    ("file", "string"), ("snapshot_offset", "bigint"), ("producer_id", "bigint"),
    ("producer_epoch", "int"), ("last_sequence", "int"), ("last_offset", "bigint"),
    ("offset_delta", "int"), ("timestamp", "bigint"), ("coordinator_epoch", "int"),
    ("current_txn_first_offset", "bigint"), ("error", "string"),
)


class KafkaLogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "kafka-log"

    def schema(self) -> str:
        table, text = _kafka_log_options(dict(self.options))
        if table == "batches":
            return BATCH_TABLE_DDL
        if table == "producer_state":
            return ", ".join(f"{n} {k}" for n, k in PRODUCER_STATE_FIELDS)
        return full_ddl(text)

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaLogReader(dict(self.options))


def _kafka_log_options(options: dict[str, str]) -> tuple[str, bool]:
    table = options.get("table", "records").strip().lower()
    if table not in KAFKA_LOG_TABLES:
        raise ValueError(f"kafka-log: unknown table {table!r}; known: "
                         f"{', '.join(KAFKA_LOG_TABLES)}")
    text = options.get("text", "false").strip().lower()
    if text not in ("true", "false"):
        raise ValueError(f"kafka-log: text must be true or false, not {text!r}")
    return table, text == "true"


class KafkaLogReader(DataSourceReader):
    def __init__(self, options: dict[str, str]) -> None:
        self.cluster = options.get("cluster", "")
        self.table, self.text = _kafka_log_options(options)
        self.paths = input_paths(options)

    def partitions(self) -> list[FilePartition]:
        files = expand(self.paths, all_files=self.table == "producer_state")
        if self.table == "records":
            keep = [f for f in files if f.kind.has_batches]
        elif self.table == "batches":
            keep = [f for f in files if f.kind is FileKind.SEGMENT]
        else:
            keep = [f for f in files if f.kind is FileKind.PRODUCER_STATE]
        return [FilePartition(str(f.path)) for f in keep]

    def read(self, partition: FilePartition) -> Iterator:
        import pyarrow as pa

        try:
            file = classify(partition.path)
            if self.table == "batches":
                yield from _batch_rows(pa, file, self.cluster)
                return
            if self.table == "records":
                fields = full_fields(self.text)
                rows = record_rows(file, self.cluster, text=self.text)
            else:
                fields = PRODUCER_STATE_FIELDS
                rows = _producer_state_rows(file, self.cluster)
            schema = arrow_schema(pa, fields)
            while chunk := list(islice(rows, ARROW_BATCH_ROWS)):
                yield pa.RecordBatch.from_arrays(
                    [pa.array(column, type=schema.field(i).type)
                     for i, column in enumerate(zip(*chunk, strict=True))], schema=schema)
        finally:
            _freeze_worker_heap()


def _where(file, cluster: str) -> tuple[str, str, str, int]:
    """(cluster, broker, topic, partition) of a file, by its log directory's meta.properties."""
    from kraftpy.tools.logdecode.logdirs import log_dir

    owner = log_dir(file.path.parent.parent)
    topic, number = location(file)
    return (owner.cluster or cluster_of(file.path, cluster), owner.broker, topic or "",
            -1 if number is None else number)


def _batch_rows(pa: Any, file: Any, cluster: str) -> Iterator[Any]:
    from kraftpy.tools.spark.batch_arrow import segment_batches

    yield from segment_batches(pa, file, _where(file, cluster), ARROW_BATCH_ROWS)


def _producer_state_rows(file, cluster: str) -> Iterator[tuple]:
    from kraftpy.tools.logdecode.small_files import SmallFileError, read_producer_state

    where = _where(file, cluster)
    path = str(file.path)
    try:
        decoded = read_producer_state(file.path.read_bytes(), file.base_offset)
    except (SmallFileError, OSError) as e:
        yield (*where, path, file.base_offset, *(None,) * 8, str(e))
        return
    for e in decoded["entries"]:
        yield (*where, path, file.base_offset, e["producerId"], e["epoch"], e["lastSequence"],
               e["lastOffset"], e["offsetDelta"], e["timestamp"], e["coordinatorEpoch"],
               e["currentTxnFirstOffset"], None)
