"""The cached hot loop (logdecode.scan, behind dump-log --json and Spark) gives exactly the rows
the general reader gives, record by record, on clean, damaged and real Kafka logs."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
from kraftpy.tools import dump_log
from kraftpy.tools.logdecode import records
from kraftpy.tools.logdecode.model import BatchInfo, Problem, RecordInfo
from kraftpy.tools.logdecode.paths import classify, cluster_of, expand
from kraftpy.tools.logdecode.reader import read_log_file
from kraftpy.tools.logdecode.rows import ROW_NAMES, file_rows, row_dict
from support.metadata_logs import (
    MetadataLogWriter,
    no_op,
    producer_ids,
    realistic_cluster,
    synthetic_cluster,
)
from support.paths import reference

REPORTED = ("crc", "torn-tail", "trailing-bytes", "bad-batch", "io")


def reference_rows(path: Path, types: frozenset[str] | None = None) -> list[tuple]:
    """Rows built from the general reader's events, without the scan's caches."""
    file = classify(path)
    kind = file.kind.value
    cluster = cluster_of(str(path), "")
    rows: list[tuple] = []
    batch: BatchInfo | None = None
    for event in read_log_file(file, types=types):
        if type(event) is BatchInfo:
            batch = event
        elif type(event) is Problem:
            if event.kind in REPORTED:
                inside = batch if event.kind in ("crc", "bad-batch") else None
                rows.append((cluster, str(path), kind, event.position,
                             -1 if inside is None else inside.base_offset, event.offset,
                             -1 if inside is None else inside.partition_leader_epoch, -1, False,
                             None, None, None, f"{event.kind}: {event.message}"))
        else:
            assert type(event) is RecordInfo and batch is not None
            if types is not None and event.type_name not in types:
                continue
            rows.append((cluster, str(path), kind, batch.position, batch.base_offset, event.offset,
                         batch.partition_leader_epoch, event.timestamp, event.kind == "control",
                         event.type_name or None, event.version if event.version >= 0 else None,
                         None if event.error else event.json, event.error or None))
    return rows


@pytest.fixture(scope="module")
def realistic(tmp_path_factory: pytest.TempPathFactory) -> MetadataLogWriter:
    return realistic_cluster(tmp_path_factory.mktemp("real") / "__cluster_metadata-0",
                             records=20_000, segment_bytes=256 << 10, seed=11)


def test_realistic_generator_is_shaped_like_real_logs(realistic: MetadataLogWriter) -> None:
    rows = [r for s in realistic.segments for r in file_rows(classify(s))]
    noops = sum(r[9] == "NO_OP_RECORD" for r in rows)
    batches = len({(r[1], r[3]) for r in rows})
    assert len(rows) == realistic.records_written
    assert noops > 0.95 * len(rows) and batches > 0.95 * len(rows)
    assert {r[9] for r in rows} >= {"REGISTER_BROKER_RECORD", "PRODUCER_IDS_RECORD", "TOPIC_RECORD",
                                    "PARTITION_RECORD", "BROKER_REGISTRATION_CHANGE_RECORD"}
    stamps = [r[7] for r in rows if r[9] == "NO_OP_RECORD"]
    assert all(b - a == 500 for a, b in zip(stamps[:50], stamps[1:51], strict=False))


@pytest.mark.parametrize("types", [None, frozenset({"NO_OP_RECORD", "PRODUCER_IDS_RECORD"})])
def test_scan_matches_the_reader(realistic: MetadataLogWriter, tmp_path: Path,
                                 types: frozenset[str] | None) -> None:
    dense = synthetic_cluster(tmp_path / "__cluster_metadata-0", records=5000, seed=5)
    for segment in [*realistic.segments, *dense.segments]:
        got = list(file_rows(classify(segment), types=types))
        assert got == reference_rows(segment, types)
        assert len(got) > 100


def test_damaged_copies_match_the_reader(realistic: MetadataLogWriter, tmp_path: Path) -> None:
    clean = realistic.segments[0].read_bytes()[:30_000]
    rng = random.Random(3)
    part = tmp_path / "__cluster_metadata-0"
    part.mkdir()
    problems = 0
    for i in range(30):
        data = bytearray(clean)
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
        cut = rng.choice((len(data), rng.randrange(len(data))))
        path = part / f"{i:020d}.log"
        path.write_bytes(bytes(data[:cut]))
        got = list(file_rows(classify(path)))
        assert got == reference_rows(path)
        problems += sum(r[12] is not None for r in got)
    assert problems >= 30


def test_same_record_bytes_in_other_batches_keep_their_own_offsets(tmp_path: Path) -> None:
    w = MetadataLogWriter(tmp_path / "__cluster_metadata-0", leader_epoch=4)
    for i in range(5):
        w.now_ms = 1_000 * i
        w.append([no_op()])
        w.append([producer_ids(1, 0, 1000)])  # identical values, new offsets and times
        w.append([no_op(), no_op()])
    w.close()
    rows = list(file_rows(classify(w.segments[0])))
    assert [r[5] for r in rows] == list(range(20))
    assert [r[7] for r in rows[:4]] == [0, 7, 14, 14] and rows[4][7] == 1000
    assert {r[6] for r in rows} == {4}
    assert rows == reference_rows(w.segments[0])


def test_json_lines_are_the_rows(realistic: MetadataLogWriter) -> None:
    out = io.StringIO()
    status = dump_log.main([str(realistic.directory)], mode="json", out=out, err=io.StringIO(),
                           progress=False)
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    expected = [row_dict(r) for f in expand([realistic.directory]) for r in file_rows(f)]
    assert status == 0 and len(lines) == realistic.records_written
    assert [{k: line[k] for k in ROW_NAMES} for line in lines] == expected
    full = [records.row_dict(r) for f in expand([realistic.directory])
            for r in records.record_rows(f)]
    assert lines == full
    assert {(line["topic"], line["producer_id"], line["sequence"], line["is_transactional"])
            for line in lines} == {("__cluster_metadata", -1, -1, False)}
    assert all(line["batch_last_offset"] >= line["offset"] for line in lines)


def test_real_kafka_logs_match_the_reader() -> None:
    real = reference("real-metadata-logs")
    files = [f for f in expand(sorted(real.glob("*/data"))) if f.kind.has_batches]
    assert len(files) > 10
    for f in files:
        assert list(file_rows(f)) == reference_rows(f.path)
