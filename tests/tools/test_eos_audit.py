"""`kraftpy eos-audit` on logs made to order: each finding kind from the batches that cause it,
the counts and tables of a healthy log, and what each bad input gets.

The logs are written in Kafka's formats by tests/support/eos_logs.py. Kafka 4.1's own logs,
written by real brokers under a real workload, are audited in tests/oracle/test_eos_kafka.py.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from kraftpy.protocol.records.config_record import ConfigRecord
from kraftpy.tools import dump_log, eos_audit
from kraftpy.tools.logdecode.batches import Batch, scan_batches
from kraftpy.tools.logdecode.eos import FINDING_KINDS, Settings
from kraftpy.tools.logdecode.eos_report import table_columns, table_ddl
from kraftpy.tools.logdecode.logdirs import find_log_dirs, replicas
from kraftpy.tools.logdecode.paths import classify
from kraftpy.tools.logdecode.small_files import first_sequence, producer_state_line
from support.eos_logs import (
    START_MS,
    PartitionLog,
    broker_dir,
    metadata_log,
    with_crc,
    write_producer_snapshot,
    write_txn_index,
)
from support.metadata_logs import MetadataLogWriter

END_MS = START_MS + 60_000


def audit(*dirs: Path, timeout: int = 900_000, now: int | None = None):
    return eos_audit.audit_dirs([str(d) for d in dirs], settings=Settings(timeout),
                                now_ms=now)


def found(result) -> list[tuple]:
    return [(f.kind, f.broker, f.topic, f.partition, f.producer_id, f.first_offset,
             f.last_offset) for f in result.findings]


@pytest.fixture
def broker(tmp_path: Path) -> Path:
    """A broker's log directory whose metadata log grants ids 1000..1999 to it."""
    log_dir = broker_dir(tmp_path / "b1", node=1)
    metadata_log(log_dir, blocks=[(1, 1000)], end_ms=END_MS)
    return log_dir


def healthy(log_dir: Path) -> PartitionLog:
    p = PartitionLog(log_dir / "orders-0")
    for i in range(7):  # an idempotent producer, seven batches of three
        p.data(1000, 0, 3 * i, 3)
    p.data(count=2)  # a plain producer
    p.data(1001, 0, 0, 4, transactional=True)  # transactions v2: each marker bumps the epoch
    p.data(1001, 0, 4, 1, transactional=True)
    p.marker(1001, 1, commit=True)
    p.roll()
    p.data(1001, 1, 0, 2, transactional=True)
    p.marker(1001, 2, commit=False)
    p.close()
    return p


# --- a healthy log ---------------------------------------------------------------------------

def test_a_healthy_log_has_no_finding_and_its_counts(broker: Path) -> None:
    healthy(broker)
    result = audit(broker)
    assert found(result) == [] and result.errors == []
    (summary,) = result.partitions
    assert (summary.broker, summary.topic, summary.partition, summary.segments) == (
        "1", "orders", 0, 2)
    assert (summary.records, summary.data_records, summary.control_records) == (32, 30, 2)
    assert (summary.idempotent_records, summary.committed_records, summary.aborted_records,
            summary.open_records) == (28, 5, 2, 0)
    assert (summary.log_end_offset, summary.last_stable_offset) == (32, 32)
    assert [(t.producer_id, t.first_offset, t.end_offset, t.outcome, t.records, t.batches)
            for t in result.transactions] == [(1001, 23, 28, "COMMIT", 5, 2),
                                              (1001, 29, 31, "ABORT", 2, 1)]
    idem, txn = result.producers
    assert (idem.producer_id, idem.last_sequence, idem.batches, idem.records) == (1000, 20, 7, 21)
    # a broker keeps the last five batches of a producer; the draft KIP only the last one
    assert (idem.state_entries, idem.state_entries_kip, idem.active) == (5, 1, True)
    assert (txn.producer_epoch, txn.committed, txn.aborted, txn.state_entries) == (2, 1, 1, 0)
    assert (idem.granted_by, idem.block_first_id, idem.block_last_id, idem.block_broker_id) == (
        "block", 1000, 1999, 1)
    (topic,) = result.topics
    assert (topic.topic, topic.records, topic.committed_records, topic.aborted_records,
            topic.producers) == ("orders", 32, 5, 2, 2)
    (b,) = result.brokers
    assert (b.broker, b.producers, b.state_entries, b.state_entries_kip) == ("1", 2, 5, 1)
    context = result.contexts[summary.cluster]
    assert (context.as_of_ms, context.as_of_source) == (END_MS, "the metadata log's last record")


def test_a_report_names_the_cluster_and_exits_0(broker: Path) -> None:
    healthy(broker)
    out, err = io.StringIO(), io.StringIO()
    assert eos_audit.main([str(broker)], out=out, err=err) == 0
    text = out.getvalue()
    assert "findings: 0" in text and "1 broker(s) (1)" in text and err.getvalue() == ""
    assert "granted by a block in the metadata log 2" in text
    out = io.StringIO()
    assert eos_audit.main([str(broker)], fmt="json", out=out) == 0
    report = json.loads(out.getvalue())
    assert report["totals"]["findings"] == 0 and report["topics"][0]["committed_records"] == 5
    assert report["brokers"][0]["state_entries"] == 5


# --- one finding kind each --------------------------------------------------------------------

def test_a_batch_appended_twice_is_a_duplicate(broker: Path) -> None:
    p = PartitionLog(broker / "orders-0")
    for i in range(8):
        p.data(1000, 0, 2 * i, 2)
        if i == 1:
            twice = p.last
    p.again(twice)  # seq 2..3 again, seven batches later (past the five Kafka compares)
    p.data(1000, 0, 2, 2, value=b"other")  # the same sequences, other records: not the same
    p.close()
    result = audit(broker)
    assert found(result) == [("duplicate", "1", "orders", 0, 1000, 16, 17),
                             ("sequence-out-of-order", "1", "orders", 0, 1000, 18, 19)]
    assert result.findings[0].related_offset == 2
    assert "sequences 2..3 were already appended at offset 2" in result.findings[0].message


def test_a_repeat_older_than_the_window_is_out_of_order(broker: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    from kraftpy.tools.logdecode import eos

    monkeypatch.setattr(eos, "SEEN_WINDOW", 3)  # memory stays bounded in long epochs
    p = PartitionLog(broker / "orders-0")
    p.data(1000, 0, 0, 1)
    first = p.last
    for i in range(1, 5):
        p.data(1000, 0, i, 1)
    p.again(first)
    p.close()
    assert found(audit(broker)) == [("sequence-out-of-order", "1", "orders", 0, 1000, 5, 5)]


def test_skipped_sequences_are_a_gap(broker: Path) -> None:
    p = PartitionLog(broker / "orders-0")
    p.data(1000, 0, 0, 2)
    p.data(1000, 0, 5, 1)
    p.data(1000, 1, 3, 1)  # a new epoch must start at 0
    p.close()
    result = audit(broker)
    assert found(result) == [("sequence-gap", "1", "orders", 0, 1000, 2, 2),
                             ("sequence-gap", "1", "orders", 0, 1000, 3, 3)]
    assert "sequences 2..4 are not in the log" in result.findings[0].message


def test_a_sequence_below_the_last_one_is_out_of_order(broker: Path) -> None:
    p = PartitionLog(broker / "orders-0")
    p.data(1000, 0, 0, 4)
    p.data(1000, 0, 2, 3)  # overlaps 0..3 without repeating a batch
    p.close()
    assert found(audit(broker)) == [("sequence-out-of-order", "1", "orders", 0, 1000, 4, 6)]


def test_sequences_wrap_at_the_int_maximum(broker: Path) -> None:
    p = PartitionLog(broker / "orders-0", base_offset=100)
    p.data(1000, 0, 0x7FFFFFFF - 1, 2)
    p.data(1000, 0, 0, 2)
    p.close()
    assert found(audit(broker)) == []
    assert first_sequence(1, 3) == 0x7FFFFFFF - 1


def test_a_first_batch_past_sequence_0_is_a_gap_only_when_the_log_starts_at_0(
        broker: Path) -> None:
    PartitionLog(broker / "orders-0").data(1000, 0, 7, 1)
    PartitionLog(broker / "orders-1", base_offset=500).data(1000, 0, 7, 1)  # older ones deleted
    assert found(audit(broker)) == [("sequence-gap", "1", "orders", 0, 1000, 0, 0)]


def test_an_epoch_going_back_is_rewound(broker: Path) -> None:
    p = PartitionLog(broker / "orders-0")
    p.data(1000, 3, 0, 1)
    p.data(1000, 2, 1, 1)
    p.data(1001, 5, 0, 1, transactional=True)
    p.marker(1001, 4, commit=True)
    p.close()
    assert found(audit(broker)) == [("epoch-rewound", "1", "orders", 0, 1000, 1, 1),
                                    ("epoch-rewound", "1", "orders", 0, 1001, 3, 3)]


def test_a_transaction_without_its_marker_before_a_newer_epoch(broker: Path) -> None:
    p = PartitionLog(broker / "orders-0")
    p.data(1001, 0, 0, 2, transactional=True)
    p.data(1001, 1, 0, 1, transactional=True)  # the COMMIT at epoch 1 is missing
    p.marker(1001, 2, commit=True)
    p.close()
    result = audit(broker)
    assert found(result) == [("missing-marker", "1", "orders", 0, 1001, 0, 1)]
    assert result.findings[0].related_offset == 2


def test_markers_with_no_data(broker: Path) -> None:
    p = PartitionLog(broker / "orders-0")
    p.marker(1001, 1, commit=False)  # Kafka writes these: a note
    p.marker(1002, 1, commit=True)  # a commit of nothing: the data is gone
    p.close()
    result = audit(broker)
    assert found(result) == [("abort-without-data", "1", "orders", 0, 1001, 0, 0),
                             ("commit-without-data", "1", "orders", 0, 1002, 1, 1)]
    assert [f.severity for f in result.findings] == ["note", "error"]


def test_a_marker_written_again_is_a_note(broker: Path) -> None:
    p = PartitionLog(broker / "orders-0")
    p.data(1001, 0, 0, 1, transactional=True)
    p.marker(1001, 1, commit=True, coordinator_epoch=0)
    p.marker(1001, 1, commit=True, coordinator_epoch=1)  # the new coordinator's retry
    p.marker(1001, 1, commit=False, coordinator_epoch=1)  # not the same: an abort of nothing
    p.close()
    result = audit(broker)
    assert found(result) == [("repeated-marker", "1", "orders", 0, 1001, 2, 2),
                             ("abort-without-data", "1", "orders", 0, 1001, 3, 3)]
    assert result.errors == []


def test_notes_alone_exit_0(broker: Path) -> None:
    PartitionLog(broker / "orders-0").marker(1001, 1, commit=False)
    out = io.StringIO()
    assert eos_audit.main([str(broker)], out=out) == 0
    assert "notes: abort-without-data 1" in out.getvalue()


def test_a_plain_batch_inside_a_transaction(broker: Path) -> None:
    p = PartitionLog(broker / "orders-0")
    p.data(1001, 0, 0, 1, transactional=True)
    p.data(1001, 0, 1, 1)
    p.close()
    assert found(audit(broker, now=START_MS)) == [
        ("non-transactional-in-transaction", "1", "orders", 0, 1001, 1, 1)]


def test_a_marker_from_an_older_coordinator(broker: Path) -> None:
    p = PartitionLog(broker / "orders-0")
    p.data(1001, 0, 0, 1, transactional=True)
    p.marker(1001, 1, commit=True, coordinator_epoch=5)
    p.data(1001, 1, 0, 1, transactional=True)
    p.marker(1001, 2, commit=True, coordinator_epoch=4)
    p.close()
    assert found(audit(broker)) == [
        ("coordinator-epoch-rewound", "1", "orders", 0, 1001, 3, 3)]


def test_an_open_transaction_past_the_timeout_is_hanging(broker: Path) -> None:
    p = PartitionLog(broker / "orders-0")
    p.data(1001, 0, 0, 3, transactional=True)
    p.close()
    last = p.now_ms
    assert found(audit(broker, timeout=END_MS - last)) == []  # not yet past it
    result = audit(broker, timeout=END_MS - last - 1)
    assert found(result) == [("hanging-transaction", "1", "orders", 0, 1001, 0, 2)]
    (summary,) = result.partitions
    assert (summary.last_stable_offset, summary.open_records, summary.open_transactions) == (
        0, 3, 1)
    assert "no __transaction_state log among the inputs" in result.findings[0].message


def test_an_open_transaction_its_coordinator_still_has_is_not_hanging(broker: Path) -> None:
    from kraftpy.protocol import txn_log
    from kraftpy.protocol.record_batch import build_record_batch
    from kraftpy.protocol.records.transaction_log_value import (
        PartitionsSchema,
        TransactionLogValue,
    )

    p = PartitionLog(broker / "orders-0")
    p.data(1001, 0, 0, 3, transactional=True)
    p.data(1002, 0, 0, 1, transactional=True)
    p.close()

    def state(pid: int, status: int, topics: list[str]) -> bytes:
        return txn_log.encode_value(TransactionLogValue(
            producer_id=pid, producer_epoch=0, transaction_timeout_ms=60000,
            transaction_status=status, transaction_partitions=[
                PartitionsSchema(topic=t, partition_ids=[0]) for t in topics]))

    coordinator = broker / "__transaction_state-0"
    coordinator.mkdir()
    (coordinator / "00000000000000000000.log").write_bytes(build_record_batch(
        [state(1001, 1, ["orders"]), state(1002, 1, ["other"])],
        keys=[txn_log.encode_key("t1"), txn_log.encode_key("t2")]))
    result = audit(broker, timeout=0)
    assert found(result) == [("hanging-transaction", "1", "orders", 0, 1002, 3, 3)]
    assert "its coordinator's state for 't2' does not include this partition" in \
        result.findings[0].message


def test_an_id_no_block_granted(broker: Path) -> None:
    p = PartitionLog(broker / "orders-0")
    p.data(1999, 0, 0, 1)
    p.data(2000, 0, 0, 2)
    p.close()
    result = audit(broker)
    assert found(result) == [("ungranted-producer-id", "1", "orders", 0, 2000, 1, 2)]
    assert [p.granted_by for p in result.producers] == ["block", "none"]
    assert [p.granted_by for p in result.producer_ids] == ["block", "none"]


def test_ids_below_the_first_block_were_granted_before_the_log(tmp_path: Path) -> None:
    log_dir = broker_dir(tmp_path / "b1")
    metadata_log(log_dir, blocks=[(1, 5000)], end_ms=END_MS)  # as after a ZooKeeper migration
    p = PartitionLog(log_dir / "orders-0")
    p.data(17, 0, 0, 1)
    p.data(5001, 0, 0, 1)
    p.data(6000, 0, 0, 1)
    p.close()
    result = audit(log_dir)
    assert [p.granted_by for p in result.producers] == ["before-log", "block", "none"]
    assert found(result) == [("ungranted-producer-id", "1", "orders", 0, 6000, 2, 2)]


def test_without_a_metadata_log_ids_are_not_traced(tmp_path: Path) -> None:
    log_dir = broker_dir(tmp_path / "b1")
    PartitionLog(log_dir / "orders-0").data(7, 0, 0, 1)
    result = audit(log_dir)
    assert found(result) == [] and result.producers[0].granted_by == "unknown"
    assert result.contexts[result.partitions[0].cluster].as_of_source == (
        "the newest segment file's modification time")


def test_damaged_bytes_are_found_and_the_rest_audited(broker: Path) -> None:
    p = PartitionLog(broker / "orders-0")
    for i in range(3):
        p.data(1000, 0, i, 1)
    p.close()
    segment = p.segments[0]
    data = bytearray(segment.read_bytes())
    batches = [b for b in scan_batches(classify(segment)) if type(b) is Batch]
    data[batches[1].position + 64] ^= 0xFF  # inside the second batch's records: its CRC fails
    segment.write_bytes(bytes(data) + b"\x00\x00\x00\x00\x00\x00\x00\x09\x00")  # and a torn tail
    result = audit(broker)
    assert [(k, first) for k, *_, first, _ in found(result)] == [
        ("damaged-batch", -1), ("damaged-batch", 1), ("sequence-gap", 2)]
    assert "torn-tail" in result.findings[0].message and "crc" in result.findings[1].message


def test_offsets_that_go_back_are_found(broker: Path) -> None:
    p = PartitionLog(broker / "orders-0")
    p.data(1000, 0, 0, 3)
    p.next_offset = 1
    p.data(1000, 0, 3, 1)
    p.close()
    assert found(audit(broker)) == [("offset-order", "1", "orders", 0, 1000, 1, 1)]


def test_snapshots_are_checked_against_the_log(broker: Path) -> None:
    p = healthy(broker)
    folder = p.folder
    ts = [b.max_timestamp for b in scan_batches(classify(p.segments[0])) if type(b) is Batch]
    # the state after offset 22 (before the first transaction): what Kafka writes at a roll
    write_producer_snapshot(folder, 23, [(1000, 0, 20, 20, 2, ts[6], -1, -1)])
    assert found(audit(broker)) == []
    write_producer_snapshot(folder, 23, [(1000, 0, 19, 20, 2, ts[6], -1, -1),
                                         (4444, 0, 0, 1, 0, ts[6], -1, -1)])
    result = audit(broker)
    assert found(result) == [("snapshot-mismatch", "1", "orders", 0, 1000, 23, 23),
                             ("snapshot-mismatch", "1", "orders", 0, 4444, 23, 23)]
    assert "lastSequence 19 (log: 20)" in result.findings[0].message
    (folder / f"{29:020d}.snapshot").write_bytes(b"\x00\x01\x00")
    assert "does not read" in found_messages(audit(broker))[-1]
    assert len(audit(broker).producer_state) == 3


def found_messages(result) -> list[str]:
    return [f.message for f in result.findings]


def test_the_transaction_index_is_checked_against_the_markers(broker: Path) -> None:
    p = healthy(broker)
    (p.folder / f"{0:020d}.index").write_bytes(b"")  # the folder as Kafka leaves it
    write_txn_index(p.folder, 29, [(1001, 29, 31, 32)])
    assert found(audit(broker)) == []
    write_txn_index(p.folder, 29, [(1001, 23, 28, 29)])
    assert sorted(found(audit(broker))) == [
        ("txn-index-mismatch", "1", "orders", 0, 1001, 23, 28),
        ("txn-index-mismatch", "1", "orders", 0, 1001, 29, 31)]


def test_coordinator_and_compacted_topics_have_no_sequence_checks(broker: Path) -> None:
    offsets = PartitionLog(broker / "__consumer_offsets-0")
    offsets.data(1001, 0, 0, 1, transactional=True)  # the group coordinator writes sequence 0
    offsets.data(1001, 0, 0, 1, transactional=True)
    offsets.marker(1001, 1, commit=True)
    offsets.close()
    compacted = PartitionLog(broker / "keyed-0")
    compacted.data(1000, 0, 0, 1)
    compacted.data(1000, 0, 9, 1)  # the cleaner removed 1..8
    compacted.close()
    w = MetadataLogWriter(broker / "__cluster_metadata-0", base_offset=100, start_ms=END_MS)
    w.append([(ConfigRecord(resource_type=2, resource_name="keyed", name="cleanup.policy",
                            value="compact"), 0)])
    w.close()
    assert found(audit(broker)) == []


def test_every_finding_kind_is_documented() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "eos-audit.md").read_text()
    for kind, (severity, meaning) in FINDING_KINDS.items():
        assert f"`{kind}`" in doc, kind
        assert severity in ("error", "note") and meaning


def test_every_table_and_column_is_documented() -> None:
    from kraftpy.tools.logdecode.batches import BATCH_TABLE_FIELDS
    from kraftpy.tools.logdecode.eos_report import TABLE_ROWS
    from kraftpy.tools.logdecode.records import FULL_NAMES

    doc = (Path(__file__).resolve().parents[2] / "docs" / "eos-audit.md").read_text()
    tables = {"batches": [n for n, _ in BATCH_TABLE_FIELDS],
              **{t: table_columns(t) for t in TABLE_ROWS}}
    for table, columns in tables.items():
        assert f"**{table}**" in doc, table
        for column in columns:
            assert f"`{column}`" in doc or column in ("cluster", "broker", "topic", "partition"), \
                (table, column)
    for column in FULL_NAMES:
        assert f"`{column}`" in doc, column


def test_table_schemas_come_from_the_rows() -> None:
    assert table_columns("findings")[:5] == ["cluster", "broker", "topic", "partition", "kind"]
    assert "producer_id bigint" in table_ddl("producers")
    assert "active boolean" in table_ddl("producers")


# --- the files around the audit -----------------------------------------------------------------

def test_log_dirs_are_found_from_any_level(tmp_path: Path, broker: Path) -> None:
    healthy(broker)
    copy = tmp_path / "copy" / "data"
    PartitionLog(copy / "orders-0").data(1000, 0, 0, 1)  # no meta.properties
    dirs = find_log_dirs([tmp_path])
    assert [(d.cluster, d.broker) for d in dirs] == [("eosTestClusterAAAAAAAAA", "1")]
    dirs = find_log_dirs([copy])
    assert [(d.cluster, d.broker) for d in dirs] == [("", "data")]
    dirs = find_log_dirs([broker / "orders-0"])
    assert [d.broker for d in dirs] == ["1"]
    assert [r.name for r in replicas(find_log_dirs([broker]))] == ["orders-0"]
    (broker / "orders-0.0f1e2d3c4b5a69788796a5b4c3d2e1f0-delete").mkdir()
    assert [r.name for r in replicas(find_log_dirs([broker]))] == ["orders-0"]
    PartitionLog(broker / "orders-1").data(1000, 0, 0, 1)
    result = audit(broker / "orders-1")  # a partition folder: that replica only
    assert [p.partition for p in result.partitions] == [1]
    assert result.producers[0].granted_by == "block"  # its log directory's metadata log


@pytest.mark.parametrize(("args", "message"), [
    (["missing"], "missing: no such file or directory"),
    (["file.txt"], "file.txt: not a directory"),
    (["empty"], "empty: no Kafka log directory here"),
])
def test_bad_inputs_get_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      args: list[str], message: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file.txt").write_text("x")
    (tmp_path / "empty").mkdir()
    out, err = io.StringIO(), io.StringIO()
    assert eos_audit.main(args, out=out, err=err) == 2
    assert err.getvalue().startswith(f"kraftpy eos-audit: {message}")
    assert err.getvalue().count("\n") == 1 and out.getvalue() == ""


def test_a_bad_now_gets_a_clear_error(broker: Path) -> None:
    err = io.StringIO()
    assert eos_audit.main([str(broker)], now="yesterday", err=err) == 2
    assert "'yesterday' is neither milliseconds since the epoch nor an ISO-8601 time" in \
        err.getvalue()
    assert eos_audit.parse_time("2026-01-31T12:00:00Z") == 1769860800000
    assert eos_audit.parse_time("1769860800000") == 1769860800000


def test_the_cli_runs_it(broker: Path) -> None:
    from kraftpy.tools.cli import main

    healthy(broker)
    assert main(["eos-audit", str(broker), "--json"]) == 0
    with pytest.raises(SystemExit):
        main(["eos-audit", str(broker), "--transaction-max-timeout-ms", "-1"])


# --- dump-log on the producer-state files -----------------------------------------------------

def test_producer_snapshots_print_as_kafka_prints_them(tmp_path: Path) -> None:
    path = write_producer_snapshot(tmp_path, 40, [(7, 2, 1, 39, 3, 1700000000000, 5, -1),
                                                  (8, 1, -1, -1, 0, 1700000000001, 0, 12)])
    out, err = io.StringIO(), io.StringIO()
    assert dump_log.main([str(path)], out=out, err=err, progress=False) == 0
    assert out.getvalue().splitlines() == [
        f"Dumping {path}",
        "producerId: 7 producerEpoch: 2 coordinatorEpoch: 5 currentTxnFirstOffset: "
        "OptionalLong.empty lastTimestamp: 1700000000000 firstSequence: 2147483646 "
        "lastSequence: 1 lastOffset: 39 offsetDelta: 3 timestamp: 1700000000000",
        "producerId: 8 producerEpoch: 1 coordinatorEpoch: 0 currentTxnFirstOffset: "
        "OptionalLong[12] lastTimestamp: 1700000000001 "]
    out = io.StringIO()
    assert dump_log.main([str(path)], mode="json", out=out, progress=False) == 0
    assert json.loads(out.getvalue())["content"]["entries"][1] == {
        "producerId": 8, "epoch": 1, "lastSequence": -1, "lastOffset": -1, "offsetDelta": 0,
        "timestamp": 1700000000001, "coordinatorEpoch": 0, "currentTxnFirstOffset": 12}
    line = producer_state_line({"producerId": 1, "epoch": 0, "lastSequence": 4, "lastOffset": 4,
                                "offsetDelta": 4, "timestamp": 5, "coordinatorEpoch": -1,
                                "currentTxnFirstOffset": -1})
    assert line.endswith("firstSequence: 0 lastSequence: 4 lastOffset: 4 offsetDelta: 4 "
                         "timestamp: 5")


def test_transaction_indexes_print_as_kafka_prints_them(tmp_path: Path) -> None:
    path = write_txn_index(tmp_path, 0, [(1001, 3, 9, 10)])
    out = io.StringIO()
    assert dump_log.main([str(path)], out=out, err=io.StringIO(), progress=False) == 0
    assert out.getvalue().splitlines()[1] == (
        "version: 0 producerId: 1001 firstOffset: 3 lastOffset: 9 lastStableOffset: 10")
    path.write_bytes(path.read_bytes() + b"\x00\x01")  # a partial entry is left out, as Kafka does
    out = io.StringIO()
    assert dump_log.main([str(path)], mode="json", out=out, progress=False) == 0
    assert json.loads(out.getvalue())["content"]["partialEntryBytes"] == 2
    path.write_bytes(b"\x00\x07" + bytes(32))
    err = io.StringIO()
    assert dump_log.main([str(path)], out=io.StringIO(), err=err, progress=False) == 1
    assert "transaction index entry 0 has version 7, not 0" in err.getvalue()


def test_with_crc_keeps_an_edited_batch_whole(broker: Path) -> None:
    p = PartitionLog(broker / "orders-0")
    p.data(1000, 0, 0, 1)
    p.close()
    data = bytearray(p.segments[0].read_bytes())
    data[51:53] = (1).to_bytes(2, "big")  # the producer epoch, inside the CRC's range
    p.segments[0].write_bytes(with_crc(bytes(data)))
    (b,) = scan_batches(classify(p.segments[0]))
    assert b.crc_valid and b.producer_epoch == 1
