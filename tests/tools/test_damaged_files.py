"""Damaged files give reports with file and position, never a crash or a hang."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraftpy.tools import dump_log, pid_audit
from kraftpy.tools.logdecode.model import BatchInfo, Problem, RecordInfo
from kraftpy.tools.logdecode.paths import classify
from kraftpy.tools.logdecode.reader import read_log_file
from kraftpy.tools.logdecode.rows import file_rows
from support.metadata_logs import MetadataLogWriter, no_op, producer_ids, register_broker


@pytest.fixture(scope="module")
def segment_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    w = MetadataLogWriter(tmp_path_factory.mktemp("seg") / "__cluster_metadata-0")
    w.append([register_broker(1, 0)])
    for i in range(1, 6):
        w.append([producer_ids(1, 0, 1000 * i), no_op()])
    w.close()
    return w.segments[0].read_bytes()


def dump(path: Path, mode: str = "text") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = dump_log.main([str(path)], mode=mode, out=out, err=err, progress=False)
    return status, out.getvalue(), err.getvalue()


def write(tmp_path: Path, data: bytes, name: str = "00000000000000000000.log") -> Path:
    part = tmp_path / "__cluster_metadata-0"
    part.mkdir(exist_ok=True)
    path = part / name
    path.write_bytes(data)
    return path


def test_clean_segment(tmp_path: Path, segment_bytes: bytes) -> None:
    status, out, err = dump(write(tmp_path, segment_bytes))
    assert status == 0 and err == "" and out.count("PRODUCER_IDS_RECORD") == 5


def test_truncated_tail_is_reported_like_kafka(tmp_path: Path, segment_bytes: bytes) -> None:
    path = write(tmp_path, segment_bytes[:-10])
    status, out, err = dump(path)
    assert status == 1
    assert out.count("PRODUCER_IDS_RECORD") == 4  # the last batch is torn away
    assert out.rstrip().splitlines()[-1].startswith("Found ")
    assert "invalid bytes at the end of 00000000000000000000.log" in out
    assert f"{path}: torn-tail at position" in err


def test_bit_flip_is_a_crc_report_and_decoding_goes_on(tmp_path: Path, segment_bytes: bytes) -> None:
    data = bytearray(segment_bytes)
    data[150] ^= 0x40  # inside the second batch's records
    path = write(tmp_path, bytes(data))
    status, out, err = dump(path)
    assert status == 1 and "isvalid: false" in out and "crc at position" in err
    assert out.count("baseOffset:") == 6  # every batch still listed


def test_undecodable_record_prints_kafkas_error_form(tmp_path: Path) -> None:
    w = MetadataLogWriter(tmp_path / "__cluster_metadata-0")
    w.append_raw([b"\x01\x0f\x00\x00\x00"])  # a ProducerIdsRecord cut short
    w.append([no_op()])
    w.close()
    status, out, err = dump(w.segments[0])
    assert status == 1
    assert "| offset: 0 " in out and "payload: Error at 0, skipping." in out
    assert "NO_OP_RECORD" in out  # the next batch is decoded
    assert "undecodable-record" in err and "offset 0" in err


def test_random_bytes_and_empty_files(tmp_path: Path) -> None:
    path = write(tmp_path, os.urandom(3000))
    status, out, err = dump(path)
    assert status == 1 and ("not a record batch" in err or "torn-tail" in err)
    assert "Found 3000 invalid bytes at the end of" in out
    empty = write(tmp_path, b"", "00000000000000000100.log")
    status, out, err = dump(empty)
    assert status == 0 and out.splitlines() == [f"Dumping {empty}", "Log starting offset: 100"]


def test_not_a_kafka_file_is_a_clear_error(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    status, out, err = dump(other)
    assert status == 2 and "not a Kafka log file" in err and "Traceback" not in err
    status, _, err = dump(tmp_path / "missing")
    assert status == 2 and "no such file" in err
    (tmp_path / "empty-dir").mkdir()
    status, _, err = dump(tmp_path / "empty-dir")
    assert status == 2 and "no Kafka log segments" in err


def test_damaged_small_file_is_reported(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    path.write_bytes(b"\x00garbage")
    status, out, err = dump(path)
    assert status == 1 and "bad-file" in err


def test_json_mode_reports_damage_as_rows(tmp_path: Path, segment_bytes: bytes) -> None:
    path = write(tmp_path, segment_bytes[:-3])
    status, out, _ = dump(path, "json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert status == 1 and rows[-1]["record_type"] is None
    assert rows[-1]["error"].startswith("torn-tail")


def test_pid_audit_reports_damage_and_still_lists_blocks(tmp_path: Path,
                                                         segment_bytes: bytes) -> None:
    path = write(tmp_path, segment_bytes[:-10])
    out, err = io.StringIO(), io.StringIO()
    assert pid_audit.main([str(path)], fmt="json", out=out, err=err) == 0
    assert len(json.loads(out.getvalue())["blocks"]) == 4
    assert "torn-tail" in err.getvalue()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_damage_gives_events_not_exceptions(segment_bytes: bytes, data: st.DataObject) -> None:
    buf = bytearray(segment_bytes)
    action = data.draw(st.sampled_from(["flip", "cut", "splice", "random"]))
    if action == "flip":
        for _ in range(data.draw(st.integers(1, 4))):
            buf[data.draw(st.integers(0, len(buf) - 1))] ^= 1 << data.draw(st.integers(0, 7))
    elif action == "cut":
        del buf[data.draw(st.integers(0, len(buf))):]
    elif action == "splice":
        at = data.draw(st.integers(0, len(buf)))
        buf[at:at] = data.draw(st.binary(min_size=1, max_size=40))
    else:
        buf = bytearray(data.draw(st.binary(max_size=400)))
    file = classify("x/__cluster_metadata-0/00000000000000000000.log")
    covered = 0
    for event in read_log_file(file, bytes(buf)):
        assert isinstance(event, BatchInfo | RecordInfo | Problem)
        if isinstance(event, BatchInfo):
            covered = event.position + event.size
        elif isinstance(event, Problem) and event.kind in ("torn-tail", "trailing-bytes"):
            covered = len(buf)
    assert covered == len(buf)  # every byte is either a batch or reported
    assert sum(1 for _ in file_rows(file, data=bytes(buf))) >= 0


def test_null_value_and_unknown_control_type_print_as_kafka_does(tmp_path: Path) -> None:
    w = MetadataLogWriter(tmp_path / "__cluster_metadata-0")
    w.append_raw([None])  # type: ignore[list-item]
    w.append_raw([b"\x00\x00"], keys=[b"\x00\x00\x00\x09"], control=True)
    w.close()
    status, out, err = dump(w.segments[0])
    lines = out.splitlines()
    assert lines[3].endswith("valueSize: -1 sequence: -1 headerKeys: []")
    assert lines[5].endswith("headerKeys: [] controlType: UNKNOWN(9)")
    assert status == 1 and "null value" in err
