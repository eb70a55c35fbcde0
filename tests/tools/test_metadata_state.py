"""metadata-state: the controller's own replay of real Kafka directories."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from kraftpy.tools import metadata_state
from support.paths import reference


def state_of(path: Path) -> tuple[int, dict]:
    out, err = io.StringIO(), io.StringIO()
    status = metadata_state.main(str(path), as_json=True, out=out, err=err)
    assert err.getvalue() == ""
    return status, json.loads(out.getvalue())


def test_kafka_41_directory() -> None:
    status, state = state_of(reference("real-metadata-logs", "kafka-4.1-generated", "data"))
    assert status == 0
    assert state["cluster_id"] == "29aC0gQGTISc_JF9Z66TCA"
    assert state["metadata_version"] == 27 and state["features"]["transaction.version"] == 2
    assert state["producer_ids"]["next_producer_id"] == 5000
    [broker] = state["brokers"]
    assert broker["broker_id"] == 1 and broker["broker_epoch"] == 174
    assert broker["incarnation_id"] == "FtShrbrZSaaW6DVH25aEuw" and broker["fenced"] is True
    assert broker["endpoints"][0]["port"] == 39092
    topics = {t["name"]: t for t in state["topics"]}
    assert len(topics["golden-a"]["partitions"]) == 3 and len(topics["golden-b"]["partitions"]) == 1
    assert [(t["transactional_id"], t["producer_id"], t["producer_epoch"])
            for t in state["transactions"]] == [("golden-txn", 2392, 1)]


def test_spring_directory_after_many_restarts() -> None:
    status, state = state_of(reference("real-metadata-logs", "spring-kafka", "data"))
    assert status == 0
    assert state["producer_ids"]["next_producer_id"] == 5000
    assert [(b["broker_id"], b["broker_epoch"], b["fenced"]) for b in state["brokers"]] == [
        (1, 235852, False)]


def test_text_tree() -> None:
    out = io.StringIO()
    root = reference("real-metadata-logs", "flink-on-prem", "data")
    assert metadata_state.main(str(root), out=out, err=io.StringIO()) == 0
    lines = out.getvalue().splitlines()
    assert "/image/producerIds/nextProducerId: 1000" in lines
    assert "/image/features/metadata.version: 14" in lines
    assert any(line.startswith("/image/cluster/brokers/1: epoch=6 ") for line in lines)


def test_not_a_log_directory(tmp_path: Path) -> None:
    err = io.StringIO()
    assert metadata_state.main(str(tmp_path), out=io.StringIO(), err=err) == 2
    assert "no __cluster_metadata" in err.getvalue()
    assert metadata_state.main(str(tmp_path / "missing"), out=io.StringIO(), err=err) == 2


@pytest.mark.parametrize("cut", [100, 5000])
def test_torn_log_still_gives_state_and_a_report(tmp_path: Path, cut: int) -> None:
    src = reference("real-metadata-logs", "kafka-4.1-generated", "data", "__cluster_metadata-0")
    part = tmp_path / "__cluster_metadata-0"
    part.mkdir()
    data = (src / "00000000000000000000.log").read_bytes()
    (part / "00000000000000000000.log").write_bytes(data[:cut])
    out, err = io.StringIO(), io.StringIO()
    assert metadata_state.main(str(tmp_path), as_json=True, out=out, err=err) == 1
    assert "torn-tail" in err.getvalue()
    assert json.loads(out.getvalue())["log_end_offset"] >= 0


@pytest.mark.parametrize("seed", range(6))
def test_bit_flipped_log_gives_a_report_not_a_crash(tmp_path: Path, seed: int) -> None:
    import random

    src = reference("real-metadata-logs", "kafka-4.1-generated", "data", "__cluster_metadata-0")
    part = tmp_path / "__cluster_metadata-0"
    part.mkdir()
    data = bytearray((src / "00000000000000000000.log").read_bytes())
    rng = random.Random(seed)
    for _ in range(8):
        data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
    (part / "00000000000000000000.log").write_bytes(bytes(data))
    out, err = io.StringIO(), io.StringIO()
    assert metadata_state.main(str(tmp_path), as_json=True, out=out, err=err) == 1
    assert err.getvalue() and "Traceback" not in err.getvalue()
    json.loads(out.getvalue())


def test_formatted_directory_that_never_ran(tmp_path: Path) -> None:
    src = reference("real-metadata-logs", "kafka-4.1-generated", "data")
    for name in ("bootstrap.checkpoint", "meta.properties"):
        (tmp_path / name).write_bytes((src / name).read_bytes())
    status, state = state_of(tmp_path)
    assert status == 0 and state["metadata_version"] == 27
    assert state["cluster_id"] == "29aC0gQGTISc_JF9Z66TCA" and state["brokers"] == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bootstrap.checkpoint", "meta.properties"]


def test_several_logs_under_one_path_is_a_clear_error(tmp_path: Path) -> None:
    for node in ("a", "b"):
        (tmp_path / node / "__cluster_metadata-0").mkdir(parents=True)
    err = io.StringIO()
    assert metadata_state.main(str(tmp_path), out=io.StringIO(), err=err) == 2
    assert "2 metadata logs here" in err.getvalue()
