"""Control records: our bytes equal Kafka's, and Kafka's decode."""

from __future__ import annotations

import pytest
from kraftpy.protocol.control_records import (
    ControlType,
    control_key,
    decode_control_record,
    end_txn_marker,
    leader_change,
    parse_control_key,
    snapshot_footer,
    snapshot_header,
)
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.record_batch import iter_record_batches
from support.paths import reference


def test_leader_change_matches_kafka_bytes() -> None:
    key, value = leader_change(1, [1])
    assert key == bytes.fromhex("00000002")
    assert value == bytes.fromhex("0000 00000001 02 00000001 00 02 00000001 00 00".replace(" ", ""))


def test_snapshot_header_and_footer_layout() -> None:
    key, value = snapshot_header(1713537222197)
    assert key == control_key(ControlType.SNAPSHOT_HEADER) == b"\x00\x00\x00\x03"
    assert value == b"\x00\x00" + (1713537222197).to_bytes(8, "big") + b"\x00"
    assert snapshot_footer() == (b"\x00\x00\x00\x04", b"\x00\x00\x00")


def test_end_txn_markers_and_unknown_types() -> None:
    assert decode_control_record(control_key(ControlType.COMMIT), end_txn_marker(7)) == (1, 7)
    assert decode_control_record(control_key(ControlType.ABORT), end_txn_marker(0)) == (0, 0)
    assert parse_control_key(b"\x00\x00\x00\x63") == -1
    with pytest.raises(DecodeError):
        parse_control_key(b"\x00")
    with pytest.raises(DecodeError):
        decode_control_record(control_key(ControlType.COMMIT), b"\x00\x01\x00\x00\x00\x00")


def test_real_snapshots_decode() -> None:
    folder = reference("real-metadata-logs", "kafka-4.1-generated", "data", "__cluster_metadata-0")
    seen = set()
    for path in sorted(folder.glob("*.checkpoint")):
        for batch in iter_record_batches(path.read_bytes()):
            if batch.is_control:
                for record in batch.records():
                    control_type, value = decode_control_record(record.key, record.value)
                    seen.add(control_type)
                    if control_type == ControlType.SNAPSHOT_HEADER:
                        assert value.last_contained_log_timestamp > 0
    assert seen == {ControlType.SNAPSHOT_HEADER, ControlType.SNAPSHOT_FOOTER}
