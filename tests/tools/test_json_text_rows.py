"""The row path's JSON text straight from the bytes (`payload.metadata_text`) agrees with the
object path (`payload.metadata_value`) on good and damaged values alike, and dump-log loads
only the codecs of the record types it meets."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraftpy.protocol.metadata_frame import encode_metadata_record
from kraftpy.protocol.registry import METADATA_RECORDS
from kraftpy.tools.logdecode.payload import metadata_text, metadata_value
from support.generated import versions
from support.kafka_strategies import message_strategy
from support.metadata_logs import realistic_cluster

CASES = [(cls, v) for cls in METADATA_RECORDS.values() for v in versions(cls)]


def _object_way(value: bytes | None, types: frozenset[str] | None = None) -> tuple:
    type_id, name, version, _data, text, error = metadata_value(value, types)
    return type_id, name, version, text, error


@st.composite
def _values(draw: st.DrawFn) -> bytes:
    cls, version = draw(st.sampled_from(CASES))
    value = encode_metadata_record(draw(message_strategy(cls, version, unknown_tags=True)), version)
    how = draw(st.sampled_from(("as is", "cut", "byte", "extra", "version")))
    if how == "cut":
        value = value[:draw(st.integers(0, len(value) - 1))]
    elif how == "byte":
        i = draw(st.integers(0, len(value) - 1))
        value = value[:i] + bytes([draw(st.integers(0, 255))]) + value[i + 1:]
    elif how == "extra":
        value += draw(st.binary(min_size=1, max_size=4))
    elif how == "version":
        value = value[:2] + bytes([draw(st.integers(0, 255))]) + value[3:]
    return value


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(value=_values())
def test_text_way_and_object_way_agree_on_good_and_damaged_values(value: bytes) -> None:
    assert metadata_text(value) == _object_way(value)
    assert metadata_text(memoryview(value)) == _object_way(value)


def test_damaged_values_keep_the_decoders_report() -> None:
    from kraftpy.protocol.records.partition_record import PartitionRecord

    good = encode_metadata_record(PartitionRecord(partition_id=1, replicas=[1, 2], isr=[1]), 0)
    for value in (good[:-3], good + b"\x00", b"\x01\x02\x00\x03\xff\xfe" + bytes(17), b"\x00\x03\x00",
                  b"\x01\x7f\x00", b"\x01\x03\x09" + good[3:], b"\x01", b"", None):
        got = metadata_text(value)
        assert got == _object_way(value)
        assert got[4], value  # each one is reported, with offset and field where known
    assert "offset" in metadata_text(good[:-3])[4]


def test_types_filter_leaves_other_types_undecoded() -> None:
    from kraftpy.protocol.records.no_op_record import NoOpRecord

    value = encode_metadata_record(NoOpRecord(), 0)
    keep = frozenset({"PRODUCER_IDS_RECORD"})
    assert metadata_text(value, keep) == (20, "NO_OP_RECORD", 0, None, "")
    assert metadata_text(value, frozenset({"NO_OP_RECORD"})) == (20, "NO_OP_RECORD", 0, "{}", "")


@pytest.mark.timeout(120)
def test_dump_log_loads_only_the_codecs_it_needs(tmp_path: Path) -> None:
    log_dir = tmp_path / "c" / "__cluster_metadata-0"
    realistic_cluster(log_dir, records=3000, seed=1)
    script = (
        "import io, sys\n"
        "from kraftpy.tools import dump_log\n"
        f"dump_log.main([{str(log_dir)!r}], mode='json', progress=False, out=io.StringIO())\n"
        "print(sorted(m for m in sys.modules if m.startswith('kraftpy.protocol.')))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         check=True, timeout=100).stdout
    loaded = json.loads(out.strip().replace("'", '"'))
    assert "kraftpy.protocol.records.no_op_record" in loaded
    assert "kraftpy.protocol.registry" not in loaded
    assert not [m for m in loaded if m.startswith("kraftpy.protocol.messages.")]
    assert "kraftpy.protocol.records.transaction_log_value" not in loaded


def test_reader_without_data_gives_the_same_text(tmp_path: Path) -> None:
    from kraftpy.tools.logdecode.model import RecordInfo
    from kraftpy.tools.logdecode.paths import expand
    from kraftpy.tools.logdecode.reader import read_log_file

    log_dir = tmp_path / "c" / "__cluster_metadata-0"
    realistic_cluster(log_dir, records=2000, seed=3)
    records = 0
    for file in expand([log_dir]):
        full = [e for e in read_log_file(file) if type(e) is RecordInfo]
        lean = [e for e in read_log_file(file, with_data=False) if type(e) is RecordInfo]
        assert len(full) == len(lean)
        for a, b in zip(full, lean, strict=True):
            assert (a.type_id, a.type_name, a.version, a.json, a.error) == \
                (b.type_id, b.type_name, b.version, b.json, b.error)
            assert b.data is None and a.data is not None
        records += len(full)
    assert records >= 2000
