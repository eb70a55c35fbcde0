"""`kraftpy pipeline eos-audit` and the `kafka-log` source on logs real Kafka 4.1 brokers wrote
on kraftpy (tests/support/eos_workload.py), on the suite's shared Spark session.

The job runs on a copy of those logs with all five planted faults at once, and its tables and
report are the one-process audit's, row for row; the `kafka-log` source's rows are `dump-log
--json`'s, and its batches and producer-state tables are what the audit read.
"""

from __future__ import annotations

import base64
import io
import json
from dataclasses import asdict
from pathlib import Path

import pytest
from kraftpy.tools import dump_log
from kraftpy.tools.eos_audit import audit_dirs
from kraftpy.tools.logdecode.eos import Settings
from kraftpy.tools.logdecode.eos_report import render_json, render_text
from support.eos_faults import (
    plant_duplicate,
    plant_epoch_rewind,
    plant_lost_commit,
    plant_sequence_cut,
    plant_stray_id,
)
from support.eos_workload import RECORDS, EosLogs, copy_logs

pytestmark = pytest.mark.slow

SETTINGS = Settings(transaction_max_timeout_ms=0)


def _rows(items) -> list[tuple]:
    return sorted(tuple(asdict(i).values()) for i in items)


def test_the_spark_job_is_the_one_process_audit(spark, eos_logs: EosLogs,
                                                tmp_path: Path) -> None:
    from kraftpy.tools.spark.eos_job import eos_audit, write_reports

    root = copy_logs(eos_logs, tmp_path / "logs")
    planted = [plant_duplicate(root / "broker-3")[0], plant_sequence_cut(root / "broker-2")[0],
               plant_lost_commit(root / "broker-4")[0], plant_epoch_rewind(root / "broker-2")[0],
               plant_stray_id(root / "broker-3")[0]]
    one = audit_dirs([str(root)], settings=SETTINGS)
    out = tmp_path / "tables"
    job = eos_audit(spark, [str(root)], str(out), settings=SETTINGS, tasks=3)
    found = {(f.kind, f.broker, f.topic, f.partition, f.producer_id, f.first_offset,
              f.last_offset) for f in job.errors}
    assert set(planted) <= found
    for name in ("findings", "partitions", "producers", "topics", "producer_ids", "brokers"):
        assert getattr(job, name) == getattr(one, name), name
    tables = {name: spark.read.parquet(str(out / name)) for name in (
        "batches", "partitions", "producers", "transactions", "findings", "producer_state",
        "topics", "producer_ids", "brokers")}
    for name in ("transactions", "producer_state", "findings", "producers"):
        rows = sorted(tuple(r) for r in tables[name].collect())
        assert rows == _rows(getattr(one, name)), name
    assert tables["batches"].count() == sum(p.batches for p in one.partitions)
    stray = tables["producer_ids"].where("granted_by = 'none'").collect()
    assert [(r.producer_id, r.partitions) for r in stray] == [(planted[4][4], 0)]  # counted from broker 2
    write_reports(job, str(out))
    text, report = io.StringIO(), io.StringIO()
    render_text(one, text)
    render_json(one, report)
    assert (out / "report.txt").read_text() == text.getvalue()
    assert json.loads((out / "report.json").read_text()) == json.loads(report.getvalue())


def test_through_sparks_writer_the_tables_are_the_same(spark, eos_logs: EosLogs,
                                                       tmp_path: Path) -> None:
    """An output URL (hdfs://, s3a://; here file://) takes Spark's writer for every table
    instead of the tasks' own Parquet files: the same rows."""
    from kraftpy.tools.spark.eos_job import eos_audit

    root = copy_logs(eos_logs, tmp_path / "logs")
    plant_duplicate(root / "broker-3")
    plant_lost_commit(root / "broker-4")
    one = audit_dirs([str(root)], settings=SETTINGS)
    out = tmp_path / "tables"
    job = eos_audit(spark, [str(root)], f"file://{out}", settings=SETTINGS, tasks=2)
    assert job.errors and job.findings == one.findings
    for name in ("transactions", "producer_state", "findings", "producers", "partitions"):
        rows = sorted(tuple(r) for r in spark.read.parquet(str(out / name)).collect())
        assert rows == _rows(getattr(one, name)), name
    assert not list((out / "batches").glob("part-*-driver*"))
    assert spark.read.parquet(str(out / "batches")).count() == sum(p.batches
                                                                  for p in one.partitions)


def test_kafka_log_rows_are_dump_logs_rows(spark, eos_logs: EosLogs) -> None:
    folders = [eos_logs.brokers[2] / name
               for name in ("output-0", "output-1", "__consumer_offsets-0")]
    rows = spark.read.format("kafka-log").load([str(f) for f in folders]).collect()
    ours = [row.asDict(recursive=True) for row in rows]
    for row in ours:
        row["payload"] = None if row["payload"] is None else json.loads(row["payload"])
        for name in ("key", "value"):
            if row[name] is not None:
                row[name] = base64.b64encode(row[name]).decode()
        for header in row["headers"] or ():
            header["value"] = None if header["value"] is None else \
                base64.b64encode(header["value"]).decode()
    out = io.StringIO()
    assert dump_log.main([str(f) for f in folders], mode="json", out=out, err=io.StringIO(),
                         progress=False) == 0
    expected = [json.loads(line) for line in out.getvalue().splitlines()]
    key = lambda r: (r["file"], r["offset"])  # noqa: E731 - the order of input partitions varies
    assert sorted(ours, key=key) == sorted(expected, key=key)
    # Every acknowledged input record is in a committed transaction of one output partition
    # or the other (which one is the producer's choice, so neither alone is bounded).
    data = [r for r in ours if r["topic"] == "output" and r["record_type"] == "DATA"]
    assert len(data) >= len(eos_logs.acked) >= RECORDS
    text = spark.read.format("kafka-log").option("text", "true").load(str(folders[0]))
    values = {r.value for r in text.where("record_type = 'DATA'").select("value").collect()}
    assert values <= set(eos_logs.acked) and len(values) > 500  # the copies of input values


def test_kafka_log_batches_and_producer_state(spark, eos_logs: EosLogs) -> None:
    one = audit_dirs([str(eos_logs.dirs[0].parent)], settings=SETTINGS)
    reader = spark.read.format("kafka-log")
    root = str(eos_logs.dirs[0].parent)
    batches = reader.option("table", "batches").load(root)
    data = batches.where("topic NOT LIKE '\\_\\_cluster%'")
    assert data.count() == sum(p.batches for p in one.partitions)
    assert data.where("NOT crc_valid").count() == 0
    markers = data.where("control_type IN ('COMMIT', 'ABORT') AND topic = 'output'").count()
    assert markers == sum(1 for t in one.transactions
                          if t.topic == "output" and t.outcome != "OPEN") + sum(
        1 for f in one.findings if f.topic == "output" and f.kind in (
            "repeated-marker", "abort-without-data", "commit-without-data"))
    state = spark.read.format("kafka-log").option("table", "producer_state").load(root)
    got = sorted((r.broker, r.topic, r.partition, r.snapshot_offset, r.producer_id,
                  r.producer_epoch) for r in state.collect())
    assert got == sorted((s.broker, s.topic, s.partition, s.snapshot_offset, s.producer_id,
                          s.producer_epoch) for s in one.producer_state)
    with pytest.raises(Exception, match="unknown table 'rows'"):
        spark.read.format("kafka-log").option("table", "rows").load(root).collect()


def test_the_batches_columns_are_the_batch_rows(eos_logs: EosLogs, tmp_path: Path) -> None:
    """batch_arrow's numpy columns against batches.batch_row, on Kafka's segments and on odd
    batches: LogAppendTime, compression, a control batch that is no marker, one whose record
    does not read, a sequence that wraps."""
    import pyarrow as pa
    from kraftpy.protocol.record_batch import build_record_batch
    from kraftpy.tools.logdecode.batches import Batch, batch_row, scan_batches
    from kraftpy.tools.logdecode.paths import classify
    from kraftpy.tools.spark.batch_arrow import segment_batches
    from support.eos_logs import PartitionLog, batch_bytes, records_region

    p = PartitionLog(tmp_path / "odd-3")
    p.data(7, 2, 0x7FFFFFFF, 3)
    p.marker(7, 3, commit=False, coordinator_epoch=9)
    region = records_region([b"x", b"y"])
    p.write(batch_bytes(region, 2, base_offset=p.next_offset, attributes=0x08 | 4,
                        producer_id=8, producer_epoch=0, base_sequence=0))
    p.write(build_record_batch([b"\x00"], keys=[b"\x00\x00\x00\x02"], control=True,
                               base_offset=p.next_offset + 2))
    p.write(build_record_batch([b"?"], keys=[b"?"], control=True, base_offset=p.next_offset + 3))
    p.close()
    segments = [*sorted(eos_logs.brokers[3].glob("*/*.log")), *p.segments]
    where = ("c", "3", "t", 1)
    rows = 0
    for path in segments:
        segment = classify(path)
        expected = [batch_row(where, str(path), segment.base_offset, b)
                    for b in scan_batches(segment) if type(b) is Batch]
        got = [tuple(r.values()) for rb in segment_batches(pa, segment, where, rows=50)
               for r in rb.to_pylist()]
        assert got == expected, path
        rows += len(got)
    assert rows > 500
    odd = [tuple(r.values()) for rb in segment_batches(pa, classify(p.segments[0]), where)
           for r in rb.to_pylist()]
    assert [(r[14], r[15], r[19], r[22], r[23]) for r in odd] == [
        ("CreateTime", "none", 1, None, None), ("CreateTime", "none", -1, "ABORT", 9),
        ("LogAppendTime", "zstd", 1, None, None), ("CreateTime", "none", -1, "LeaderChange", None),
        ("CreateTime", "none", -1, "UNKNOWN", None)]


def test_bad_inputs_stop_before_spark_starts(tmp_path: Path, capsys) -> None:
    from kraftpy.tools.cli import main

    assert main(["pipeline", "eos-audit", str(tmp_path / "missing"), "-o",
                 str(tmp_path / "out")]) == 2
    assert "missing: no such file or directory" in capsys.readouterr().err
    assert main(["pipeline", "eos-audit", str(tmp_path), "-o", str(tmp_path / "o"), "--now",
                 "soon"]) == 2
    assert "'soon' is neither" in capsys.readouterr().err
