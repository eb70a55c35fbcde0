"""The `kraft-metadata` source on a Kafka `log.dirs` directory: no input partitions (so no rows)
for ordinary topics, typed rows for the coordinators' logs, the same rows as `dump-log --json`.
Runs the reader's Python side only (no Spark session)."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import pytest
from kraftpy.protocol import txn_log
from kraftpy.protocol.record_batch import build_record_batch
from kraftpy.protocol.records.offset_commit_key import OffsetCommitKey
from kraftpy.protocol.records.offset_commit_value import OffsetCommitValue
from kraftpy.protocol.records.transaction_log_value import TransactionLogValue
from kraftpy.tools import dump_log
from kraftpy.tools.logdecode.rows import ROW_NAMES

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

SEGMENT = "00000000000000000000.log"


def _write(root: Path, partition: str, batch: bytes) -> None:
    (root / partition).mkdir(parents=True)
    (root / partition / SEGMENT).write_bytes(batch)


@pytest.fixture
def log_dirs(tmp_path: Path) -> Path:
    from support.metadata_logs import synthetic_cluster

    synthetic_cluster(tmp_path / "__cluster_metadata-0", records=100, seed=5)
    # an ordinary topic whose values would read as metadata records of unknown types
    _write(tmp_path, "orders-0", build_record_batch([b"\x01\x68\x00", b"{}"], keys=[b"a", None]))
    key = struct.pack(">h", 1) + OffsetCommitKey(group="g", topic="orders", partition=0).encode(0)
    value = struct.pack(">h", 4) + OffsetCommitValue(offset=2, commit_timestamp=9).encode(4)
    _write(tmp_path, "__consumer_offsets-0", build_record_batch([value, None], keys=[key, key]))
    txn = TransactionLogValue(producer_id=3, producer_epoch=0, transaction_timeout_ms=1,
                              transaction_partitions=None)
    _write(tmp_path, "__transaction_state-0",
           build_record_batch([txn_log.encode_value(txn)], keys=[txn_log.encode_key("t")]))
    return tmp_path


def _rows(reader, partition) -> list[dict]:
    return [row for batch in reader.read(partition) for row in batch.to_pylist()]


def test_ordinary_topics_get_no_partition_and_no_rows(log_dirs: Path) -> None:
    from kraftpy.tools.spark.datasource import KraftMetadataReader

    reader = KraftMetadataReader({"path": str(log_dirs)})
    partitions = reader.partitions()
    assert partitions and not [p for p in partitions if "/orders-0/" in p.path]
    rows = [row for p in partitions for row in _rows(reader, p)]
    assert all(row["error"] is None for row in rows)
    by_file = {Path(row["file"]).parent.name for row in rows}
    assert by_file == {"__cluster_metadata-0", "__consumer_offsets-0", "__transaction_state-0"}
    offsets = [row for row in rows if "__consumer_offsets" in row["file"]]
    assert [(r["record_type"], r["version"]) for r in offsets] == [
        ("OFFSET_COMMIT", 4), ("OFFSET_COMMIT", None)]
    assert json.loads(offsets[0]["payload"]) == {
        "key": {"group": "g", "topic": "orders", "partition": 0},
        "value": {"offset": 2, "leaderEpoch": -1, "metadata": "", "commitTimestamp": 9}}


def test_the_rows_are_dump_logs_json_rows(log_dirs: Path) -> None:
    from kraftpy.tools.spark.datasource import KraftMetadataReader

    reader = KraftMetadataReader({"path": str(log_dirs)})
    spark_rows = [row for p in reader.partitions() for row in _rows(reader, p)]
    out = io.StringIO()
    assert dump_log.main([str(log_dirs)], mode="json", out=out, err=io.StringIO(),
                         progress=False) == 0
    cli = [json.loads(line) for line in out.getvalue().splitlines()]
    for row in spark_rows:
        row["payload"] = None if row["payload"] is None else json.loads(row["payload"])
    # dump-log's rows have every column; this source's are the first ones, for typed records
    typed = [{k: row[k] for k in ROW_NAMES} for row in cli if "/orders-0/" not in row["file"]]
    assert spark_rows == typed and len(typed) < len(cli)


def test_a_types_option_of_metadata_types_skips_the_coordinator_logs(log_dirs: Path) -> None:
    from kraftpy.tools.spark.datasource import KraftMetadataReader

    reader = KraftMetadataReader({"path": str(log_dirs), "types": "PRODUCER_IDS_RECORD"})
    rows = [row for p in reader.partitions() for row in _rows(reader, p)]
    assert rows and {row["record_type"] for row in rows} == {"PRODUCER_IDS_RECORD"}
    reader = KraftMetadataReader({"path": str(log_dirs), "types": "TRANSACTION_LOG"})
    rows = [row for p in reader.partitions() for row in _rows(reader, p)]
    assert [json.loads(row["payload"])["key"] for row in rows] == [{"transactionalId": "t"}]
