"""`kraftpy eos-audit` on logs real Kafka 4.1 brokers wrote on kraftpy under Kafka's own
exactly-once workload (tests/support/eos_workload.py: VerifiableProducer, then
TransactionalMessageCopier with random aborts, a broker killed with SIGKILL during each).

The audit finds nothing in what the workload wrote; its counts are what VerifiableProducer
had acknowledged and what a read_committed consumer read; the transaction left hanging on
purpose is the one `kafka-transactions find-hanging` listed on each broker; Kafka's producer-
state snapshots and transaction indexes agree with the audit's replay (else it would report
them); and every record's fields are what DumpLogSegments --deep-iteration prints. Then one
fault at a time is planted in a copy of the logs, and each is found and named.
"""

from __future__ import annotations

import base64
import io
import json
import re
from pathlib import Path

import pytest
from kraftpy.tools import dump_log
from kraftpy.tools.eos_audit import audit_dirs
from kraftpy.tools.logdecode.eos import ERROR, Settings
from kraftpy.tools.logdecode.eos_report import EosResult
from support.eos_faults import (
    plant_duplicate,
    plant_epoch_rewind,
    plant_lost_commit,
    plant_sequence_cut,
    plant_stray_id,
)
from support.eos_workload import RECORDS, EosLogs, copy_logs
from support.kafka import run_tool

pytestmark = pytest.mark.slow

# find-hanging was asked with --max-transaction-timeout 0: every open transaction older than
# "now" is a candidate; the audit is asked the same.
SETTINGS = Settings(transaction_max_timeout_ms=0)


def audit(root: Path) -> EosResult:
    return audit_dirs([str(root)], settings=SETTINGS)


@pytest.fixture(scope="module")
def pristine(eos_logs: EosLogs) -> EosResult:
    return audit(eos_logs.dirs[0].parent)


def key(f) -> tuple:
    return (f.kind, f.broker, f.topic, f.partition, f.producer_id, f.first_offset, f.last_offset)


def test_the_workload_gives_no_finding_and_its_counts(eos_logs: EosLogs,
                                                      pristine: EosResult) -> None:
    hanging = eos_logs.hanging_txn
    errors = [key(f) for f in pristine.errors]
    assert errors == [("hanging-transaction", str(b), "hanging", 0, hanging["producer_id"],
                       hanging["offset"], hanging["offset"]) for b in sorted(eos_logs.brokers)]
    # notes, not findings: markers Kafka writes with no data before them
    assert {f.kind for f in pristine.findings if f.severity != ERROR} <= {
        "abort-without-data", "repeated-marker"}
    topics = {t.topic: t for t in pristine.topics}
    assert topics["input"].data_records == len(eos_logs.acked) == RECORDS
    assert topics["input"].idempotent_records == RECORDS and topics["input"].open_records == 0
    output = topics["output"]
    assert output.committed_records == len(eos_logs.committed) == RECORDS
    assert output.aborted_records > 0 and output.open_records == 0
    assert output.data_records == output.committed_records + output.aborted_records
    assert eos_logs.copier["totalProcessed"] == RECORDS
    assert {p.granted_by for p in pristine.producer_ids} == {"block"}
    # Kafka's snapshots and transaction indexes were there to compare (and agreed)
    assert len(pristine.producer_state) >= 3 * len(eos_logs.brokers)
    assert len(pristine.brokers) == len(eos_logs.brokers) == 3


def test_the_records_are_what_was_acknowledged_and_read_committed(
        eos_logs: EosLogs, pristine: EosResult, tmp_path: Path) -> None:
    """The values in the input partitions are VerifiableProducer's acknowledged ones; those in
    the output's committed transactions (by the audit's transaction table) are exactly what
    the read_committed consumer read."""
    broker = min(eos_logs.brokers)
    rows = _json_rows([eos_logs.brokers[broker] / name
                       for name in ("input-0", "input-1", "output-0", "output-1")])
    values = {(r["topic"], r["partition"], r["offset"]): base64.b64decode(r["value"]).decode()
              for r in rows if r["record_type"] == "DATA"}
    assert sorted(v for (t, _, _), v in values.items() if t == "input") == sorted(eos_logs.acked)
    committed = [t for t in pristine.transactions if t.broker == str(broker)
                 and t.topic == "output" and t.outcome == "COMMIT"]
    read = [values[("output", t.partition, offset)] for t in committed
            for offset in range(t.first_offset, t.end_offset)
            if ("output", t.partition, offset) in values]
    assert sorted(read) == sorted(eos_logs.committed)


def _json_rows(folders: list[Path]) -> list[dict]:
    out = io.StringIO()
    assert dump_log.main([str(f) for f in folders], mode="json", out=out, err=io.StringIO(),
                         progress=False) == 0
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_hanging_transactions_agree_with_find_hanging(eos_logs: EosLogs,
                                                      pristine: EosResult) -> None:
    producers = {(p.broker, p.topic, p.partition, p.producer_id): p for p in pristine.producers}
    for broker, rows in eos_logs.hanging.items():
        ours = []
        for f in pristine.errors:
            if f.kind == "hanging-transaction" and f.broker == str(broker):
                p = producers[(f.broker, f.topic, f.partition, f.producer_id)]
                ours.append({"Topic": f.topic, "Partition": str(f.partition),
                             "ProducerId": str(f.producer_id),
                             "ProducerEpoch": str(p.producer_epoch),
                             "CoordinatorEpoch": str(p.coordinator_epoch),
                             "StartOffset": str(p.open_txn_first_offset),
                             "LastTimestamp": str(p.last_timestamp)})
        kafka = [{k: v for k, v in row.items() if k != "Duration(min)"} for row in rows]
        assert ours == kafka and len(kafka) == 1, (broker, ours, kafka)


BATCH = re.compile(r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) baseSequence: (-?\d+) "
                   r"lastSequence: (-?\d+) producerId: (-?\d+) producerEpoch: (-?\d+) "
                   r"partitionLeaderEpoch: (-?\d+) isTransactional: (\w+) isControl: (\w+) "
                   r"deleteHorizonMs: \S+ position: (\d+) (\w+): (-?\d+) size: \d+ magic: 2 "
                   r"compresscodec: (\w+) crc: \d+ isvalid: true$")
RECORD = re.compile(r"^\| offset: (\d+) (\w+): (-?\d+) keySize: (-?\d+) valueSize: (-?\d+) "
                    r"sequence: (-?\d+) headerKeys: \[(.*)\](?: endTxnMarker: (\w+) "
                    r"coordinatorEpoch: (\d+))?$")


def test_every_record_agrees_with_dump_log_segments(eos_logs: EosLogs) -> None:
    """DumpLogSegments --deep-iteration over every broker's segments (the coordinators' logs
    with its default decoder): each batch's and record's fields are the JSON rows' fields; and
    for ordinary topics our text dump is Kafka's, byte for byte."""
    segments = sorted(str(p) for b in eos_logs.brokers.values() for p in b.glob("*/*.log")
                      if not p.parent.name.startswith("__cluster_metadata"))
    kafka = run_tool("DumpLogSegments", "--deep-iteration", "--files", ",".join(segments),
                     timeout=180).check().stdout
    topics = [s for s in segments if not Path(s).parent.name.startswith("__")]
    out = io.StringIO()
    assert dump_log.main(topics, deep_iteration=True, out=out, err=io.StringIO(),
                         progress=False) == 0
    text = out.getvalue()
    assert text.splitlines() == _dumps_of(kafka, topics)
    expected = []
    batch: tuple = ()
    for line in kafka.splitlines():
        if m := BATCH.match(line):
            batch = (int(m[1]), int(m[2]), int(m[4]), int(m[5]), int(m[6]), int(m[7]),
                     int(m[8]), m[9] == "true", m[10] == "true", int(m[11]), m[12], m[14])
        elif m := RECORD.match(line):
            marker = (m[8], int(m[9])) if m[8] else (None, None)
            expected.append((*batch, int(m[1]), m[2], int(m[3]), int(m[6]), m[7], *marker,
                             (int(m[4]), int(m[5]))))
        else:
            assert line.startswith(("Dumping ", "Log starting offset: ")), line
    rows = _json_rows([Path(s) for s in segments])
    ours = [(r["batch_base_offset"], r["batch_last_offset"], r["base_sequence"],
             r["last_sequence"], r["producer_id"], r["producer_epoch"], r["leader_epoch"],
             r["is_transactional"], r["is_control"], r["batch_position"], r["timestamp_type"],
             r["compression"], r["offset"], r["timestamp_type"], r["timestamp_ms"],
             r["sequence"], ",".join(h["key"] for h in r["headers"] or ()),
             r["record_type"] if r["is_control"] else None, r["coordinator_epoch"],
             (_size(r["key"]), _size(r["value"])))
            for r in rows]
    # a coordinator's record and a marker keep key and value decoded in their payload
    sizes = [r["record_type"] == "DATA" for r in rows]
    assert len(ours) == len(expected) > 3 * 4000
    assert [o[:-1] + ((o[-1],) if s else ()) for o, s in zip(ours, sizes, strict=True)] == \
        [e[:-1] + ((e[-1],) if s else ()) for e, s in zip(expected, sizes, strict=True)]


def _dumps_of(kafka: str, files: list[str]) -> list[str]:
    """Kafka's output for just these files (it dumped more)."""
    keep, out = False, []
    for line in kafka.splitlines():
        if line.startswith("Dumping "):
            keep = line[len("Dumping "):] in files
        if keep:
            out.append(line)
    return out


def _size(b64: str | None) -> int:
    return -1 if b64 is None else len(base64.b64decode(b64))


# --- planted faults, one at a time, in copies of the logs -------------------------------------

def _new_findings(root: Path, pristine: EosResult) -> list[tuple]:
    before = {key(f) for f in pristine.findings}
    return sorted(key(f) for f in audit(root).findings if key(f) not in before)


@pytest.mark.parametrize("plant", [
    lambda root: plant_duplicate(root / "broker-3"),  # a batch spliced in twice
    lambda root: plant_sequence_cut(root / "broker-2"),  # a sequence cut out
    lambda root: plant_lost_commit(root / "broker-4"),  # a COMMIT marker removed
    lambda root: plant_epoch_rewind(root / "broker-2"),  # an epoch rewound
    lambda root: plant_stray_id(root / "broker-3"),  # an id outside every granted block
], ids=["duplicate", "sequence-cut", "commit-removed", "epoch-rewound", "ungranted-id"])
def test_a_planted_fault_is_found_and_named(eos_logs: EosLogs, pristine: EosResult,
                                           tmp_path: Path, plant) -> None:
    root = copy_logs(eos_logs, tmp_path / "logs")
    expected, related = plant(root)
    assert _new_findings(root, pristine) == [expected]
    (finding,) = [f for f in audit(root).findings if key(f) == expected]
    if related is not None:
        assert finding.related_offset == related
    kind, broker, topic, partition, pid, first, last = expected
    offsets = f"offset {first}" if first == last else f"offsets {first}..{last}"
    assert finding.line().startswith(f"{kind.upper()}: broker {broker} {topic}-{partition} "
                                     f"{offsets} producer {pid} ")
