"""The Spark job against the single-process CLI on the same inputs: the same records and the
same producer-ID blocks, row for row, including a directory of many files."""

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
from kraftpy.tools import dump_log, pid_audit
from kraftpy.tools.logdecode.history import broker_events
from kraftpy.tools.logdecode.paths import LogKind, classify, expand
from kraftpy.tools.logdecode.rows import ROW_NAMES, audit_record, file_rows
from support.metadata_logs import (
    MetadataLogWriter,
    producer_ids,
    realistic_cluster,
    register_broker,
    registration_change,
    synthetic_cluster,
    write_snapshot,
)
from support.paths import REFERENCE

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Two generated busy clusters of many small segments each (one with a snapshot), one shaped
    like a real cluster (NoOp batches), a cluster with a deliberate overlap, plus the real Kafka
    directories when ../shared is there."""
    root = tmp_path_factory.mktemp("logs")
    for name, seed in (("east", 1), ("west", 2)):
        w = synthetic_cluster(root / f"cluster={name}" / "__cluster_metadata-0", records=4000,
                              segment_bytes=8 << 10, seed=seed)
        write_snapshot(w.directory, end_offset=w.next_offset, epoch=1,
                       records=[register_broker(1, 0), producer_ids(-1, -1, 10_000_000)])
    realistic_cluster(root / "cluster=north" / "__cluster_metadata-0", records=6000,
                      segment_bytes=64 << 10, seed=3)
    part = root / "cluster=lab" / "__cluster_metadata-0"
    w = MetadataLogWriter(part)
    w.append([register_broker(1, 0)])
    w.append([producer_ids(1, 0, 1000), registration_change(1, 0, fenced=-1)])
    w.append([producer_ids(1, 0, 3000)])
    w.append([producer_ids(1, 0, 2500)])
    w.append([registration_change(1, 0, shutdown=1)])
    w.close()
    (part / "00000000000000000005.log").write_bytes(w.segments[0].read_bytes()[:50])  # torn
    _broker_log_dirs(root / "cluster=broker")
    paths = [str(root)]
    real = REFERENCE / "real-metadata-logs"
    paths += [str(real / s / "data") for s in ("flink-on-prem", "spring-kafka", "kafka-4.1-generated")
              if (real / s / "data").exists()]
    return paths


def _broker_log_dirs(root: Path) -> None:
    """A broker's log.dirs: its metadata log, an ordinary topic (no rows) and the coordinators'
    logs (typed rows)."""
    synthetic_cluster(root / "__cluster_metadata-0", records=500, seed=6)
    key = struct.pack(">h", 1) + OffsetCommitKey(group="g", topic="orders", partition=0).encode(0)
    value = struct.pack(">h", 4) + OffsetCommitValue(offset=2, commit_timestamp=9).encode(4)
    batches = {
        "orders-0": build_record_batch([b"\x01\x68\x00", b"{}"], keys=[b"a", None]),
        "__consumer_offsets-0": build_record_batch([value, None], keys=[key, key]),
        "__transaction_state-0": build_record_batch(
            [txn_log.encode_value(TransactionLogValue(producer_id=3, transaction_partitions=None))],
            keys=[txn_log.encode_key("t")]),
    }
    for partition, batch in batches.items():
        (root / partition).mkdir(parents=True)
        (root / partition / "00000000000000000000.log").write_bytes(batch)


@pytest.fixture(scope="module")
def cli(inputs: list[str]) -> list[dict]:
    """`kraftpy dump-log --json` of the inputs, parsed: the rows of typed records (ordinary
    topics' files have rows there, but no input partition in `kraft-metadata`), in the
    columns `kraft-metadata` has (dump-log's first ones)."""
    out = io.StringIO()
    dump_log.main(inputs, mode="json", out=out, err=io.StringIO(), progress=False)
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    typed = [r for r in rows if classify(r["file"]).log is not LogKind.DATA]
    assert sum("/orders-0/" in r["file"] for r in rows) == 2  # orders-0's two records
    return [{k: r[k] for k in ROW_NAMES} for r in typed]


def key(row: dict) -> tuple:
    return (row["file"], row["batch_position"], row["offset"] if row["offset"] is not None else -1,
            row["error"] or "")


def test_records_match_the_cli_row_for_row(spark, inputs: list[str], cli: list[dict]) -> None:
    from kraftpy.tools.spark.jobs import read_records

    files = [f for f in expand(inputs) if f.log is not LogKind.DATA]  # topics give no rows
    assert len(files) > 40  # many files, one input partition each
    df = read_records(spark, inputs)
    assert df.rdd.getNumPartitions() == len(files)
    ours = sorted(cli, key=key)
    theirs = []
    for r in df.collect():
        row = r.asDict()
        row["payload"] = json.loads(row["payload"]) if row["payload"] is not None else None
        theirs.append(row)
    theirs.sort(key=key)
    # The generated clusters alone hold 14,045 rows; the real Kafka directories, read when
    # ../shared is there, bring it past 20,000.
    real = any("real-metadata-logs" in path for path in inputs)
    assert len(theirs) == len(ours) > (20_000 if real else 14_000)
    assert theirs == ours
    assert any(r["error"] and r["error"].startswith("torn-tail") for r in theirs)
    assert {r["cluster"] for r in theirs} >= {"east", "west", "north", "lab", "broker"}
    assert {r["record_type"] for r in theirs} >= {"OFFSET_COMMIT", "TRANSACTION_LOG"}


def test_pipeline_tables_match_pid_audit(spark, inputs: list[str], cli: list[dict],
                                         tmp_path: Path) -> None:
    from kraftpy.tools.spark import jobs

    summary = jobs.run(spark, inputs, str(tmp_path / "tables"))
    assert summary["overlaps"] == 1

    out = io.StringIO()
    assert pid_audit.main(inputs, fmt="json", out=out, err=io.StringIO()) == 1
    expected = json.loads(out.getvalue())["blocks"]
    blocks = spark.read.parquet(str(tmp_path / "tables" / "producer_id_blocks"))
    got = [r.asDict() for r in blocks.orderBy("cluster", "offset").collect()]
    assert len(got) == summary["producer_id_blocks"] == len(expected) > 500
    assert got == sorted(expected, key=lambda b: (b["cluster"], b["offset"]))
    lab = [b for b in got if b["cluster"] == "lab"]
    assert [(b["first_id"], b["finding"]) for b in lab] == [(0, ""), (2000, "gap"), (1500, "overlap")]

    records = spark.read.parquet(str(tmp_path / "tables" / "records"))
    assert tuple(records.columns) == ROW_NAMES
    assert records.count() == summary["records"] == len(cli)

    rows = [row for f in expand(inputs) for row in file_rows(f)
            if row[9] is not None and row[11] is not None]
    events = broker_events(audit_record(r) for r in rows)
    table = spark.read.parquet(str(tmp_path / "tables" / "broker_registrations"))
    got_events = [r.asDict() for r in table.orderBy("cluster", "offset").collect()]
    assert got_events == [e.as_dict() for e in events]
    assert [e["event"] for e in got_events if e["cluster"] == "lab"] == [
        "REGISTER", "UNFENCE", "CONTROLLED_SHUTDOWN"]


def test_types_option_and_single_path(spark, inputs: list[str]) -> None:
    df = (spark.read.format("kraft-metadata").option("types", "PRODUCER_IDS_RECORD")
          .option("cluster", "ignored-when-the-path-names-one").load(inputs[0]))
    types = {r.record_type for r in df.select("record_type").distinct().collect()}
    assert types == {"PRODUCER_IDS_RECORD", None}  # None: the torn file's report row
