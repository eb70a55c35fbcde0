"""dump-log and pid-audit on the real Kafka directories (skipped without ../shared)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from kraftpy.tools import dump_log, pid_audit
from kraftpy.tools.logdecode.model import BatchInfo, Problem, RecordInfo
from kraftpy.tools.logdecode.paths import expand
from kraftpy.tools.logdecode.reader import read_log_file
from support.paths import reference

SAMPLES = ("flink-on-prem", "spring-kafka", "kafka-4.1-generated")


def run_dump(paths: list[str], **kw) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = dump_log.main(paths, out=out, err=err, progress=False, **kw)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("sample", SAMPLES)
def test_every_batch_and_record_decodes(sample: str) -> None:
    root = reference("real-metadata-logs", sample, "data")
    batches = records = 0
    for file in expand([root]):
        last_end = 0
        for event in read_log_file(file):
            assert not isinstance(event, Problem), event
            if isinstance(event, BatchInfo):
                assert event.crc_valid and event.position == last_end
                last_end = event.position + event.size
                batches += 1
            else:
                assert isinstance(event, RecordInfo)
                assert not event.error and event.type_name and event.type_name != "UNKNOWN"
                assert event.data is not None
                records += 1
        assert last_end == file.path.stat().st_size
    assert batches > 50 and records >= batches


def test_text_matches_kafka_dump_log_line_for_line() -> None:
    root = reference("real-metadata-logs", "kafka-4.1-generated")
    expected = (root / "dump-cluster-metadata.txt").read_text().splitlines()
    status, out, err = run_dump([str(root / "data" / "__cluster_metadata-0")])
    assert status == 0 and err == ""
    ours = out.splitlines()
    assert len(ours) == len(expected) == 949

    def unpath(line: str) -> str:  # "Dumping <path>": compare the file name only
        return "Dumping " + Path(line[8:]).name if line.startswith("Dumping ") else line

    for number, (a, b) in enumerate(zip(ours, expected, strict=True), 1):
        assert unpath(a) == unpath(b), f"line {number}"


def test_json_rows_carry_the_same_payloads_as_kafka() -> None:
    root = reference("real-metadata-logs", "kafka-4.1-generated")
    segment = root / "data" / "__cluster_metadata-0" / "00000000000000000000.log"
    kafka_payloads = [json.loads(line.split(" payload: ", 1)[1])
                      for line in (root / "dump-cluster-metadata.txt").read_text().splitlines()
                      if " payload: " in line]
    status, out, _ = run_dump([str(segment)], mode="json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert status == 0
    metadata = [r for r in rows if not r["is_control"]]
    assert len(metadata) == 306
    assert [{"type": r["record_type"], "version": r["version"], "data": r["payload"]}
            for r in metadata] == kafka_payloads[: len(metadata)]
    assert [r["offset"] for r in rows] == list(range(len(rows)))
    assert {r["cluster"] for r in rows} == {"kafka-4.1-generated"}
    assert rows[0]["record_type"] == "LeaderChange" and rows[0]["payload"]["leaderId"] == 1


def test_skip_noop_and_summary() -> None:
    root = reference("real-metadata-logs", "flink-on-prem", "data")
    status, out, _ = run_dump([str(root)], skip_noop=True)
    assert status == 0 and "NO_OP_RECORD" not in out
    assert out.count("\n| offset:") == 18204 - 16277
    status, out, _ = run_dump([str(root)], mode="summary-json")
    summary = json.loads(out)
    assert summary["by_type"]["NO_OP_RECORD"] == 16277 and summary["records"] == 18204
    assert summary["problems"] == 0


def test_transaction_log_is_decoded() -> None:
    """Kafka 4.1's `--transaction-log-decoder` prints this line for the real record."""
    part = reference("real-metadata-logs", "kafka-4.1-generated", "data", "__transaction_state-10")
    status, out, _ = run_dump([str(part)])
    assert status == 0
    assert ('headerKeys: [] key: {"type":"0","data":{"transactionalId":"golden-txn"}} payload: '
            '{"version":"1","data":{"producerId":2392,"producerEpoch":1,"transactionTimeoutMs":60000,'
            '"transactionStatus":0,"transactionPartitions":null,'
            '"transactionLastUpdateTimestampMs":1795242694052,"transactionStartTimestampMs":-1}}\n') in out
    status, out, _ = run_dump([str(part)], mode="json")
    rows = [json.loads(line) for line in out.splitlines()]
    assert [r["payload"]["value"]["producerEpoch"] for r in rows] == [0, 1]
    assert rows[0]["payload"]["key"] == {"transactionalId": "golden-txn"}


def test_small_files_named_or_all_files() -> None:
    root = reference("real-metadata-logs", "kafka-4.1-generated", "data")
    status, out, _ = run_dump([str(root / "__cluster_metadata-0" / "quorum-state"),
                               str(root / "__cluster_metadata-0" / "00000000000000000000.index")])
    assert status == 0 and '"leaderEpoch":2' in out and "offset: 88 position: 6644" in out
    status, out, _ = run_dump([str(root)], mode="json", all_files=True)
    kinds = {json.loads(line).get("file_kind") for line in out.splitlines()}
    assert {"quorum-state", "meta.properties", "index", "timeindex", "segment", "snapshot"} <= kinds


@pytest.mark.parametrize("sample,blocks", [
    ("kafka-4.1-generated", [(0, 999, 9), (1000, 1999, 9), (2000, 2999, 9), (3000, 3999, 174),
                             (4000, 4999, 174)]),
    ("flink-on-prem", [(0, 999, 6)]),
    ("spring-kafka", [(4000, 4999, 235852)]),
])
def test_pid_audit_of_real_logs(sample: str, blocks: list[tuple[int, int, int]]) -> None:
    root = reference("real-metadata-logs", sample, "data")
    out, err = io.StringIO(), io.StringIO()
    assert pid_audit.main([str(root)], fmt="json", out=out, err=err) == 0
    result = json.loads(out.getvalue())
    assert [(b["first_id"], b["last_id"], b["broker_epoch"]) for b in result["blocks"]] == blocks
    assert result["findings"] == []
    assert all(b["registration_offset"] == b["broker_epoch"] for b in result["blocks"])
