"""dump-log, pid-audit and metadata-state on a log written by `kraftpy serve` after brokers
registered and took producer-ID blocks: the tools show exactly what was handed out."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from kraftpy.tools import dump_log, metadata_state, pid_audit
from support.broker_sim import BrokerSim
from support.server import running_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("served")
    handed: list[tuple[int, int, int, int]] = []  # (broker, epoch, first, last)
    epochs: dict[int, int] = {}
    with running_server(root) as srv:
        brokers = [BrokerSim((srv.host, srv.controller_port), b, srv.cluster_id()) for b in (101, 102)]
        try:
            for b in brokers:
                epochs[b.broker_id] = b.register()
                b.wait_unfenced()
            for b in (brokers[0], brokers[1], brokers[0], brokers[0], brokers[1]):
                first, length = b.allocate()
                handed.append((b.broker_id, b.epoch, first, first + length - 1))
            assert brokers[1].unregister() == 0
        finally:
            for b in brokers:
                b.close()
        data_dir = srv.data_dir
    return {"dir": Path(data_dir), "handed": handed, "epochs": epochs}


def test_pid_audit_shows_exactly_the_blocks_handed_out(served: dict) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert pid_audit.main([str(served["dir"])], fmt="json", out=out, err=err) == 0
    result = json.loads(out.getvalue())
    assert err.getvalue() == "" and result["findings"] == []
    to_sims = [(b["broker_id"], b["broker_epoch"], b["first_id"], b["last_id"])
               for b in result["blocks"] if b["broker_id"] in (101, 102)]
    assert to_sims == served["handed"]
    for b in result["blocks"]:
        if b["broker_id"] in (101, 102):
            assert b["registration_offset"] == served["epochs"][b["broker_id"]]
    # Any other block is the node's own (for its InitProducerId answers); none is shared.
    ranges = sorted((b["first_id"], b["last_id"]) for b in result["blocks"])
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:], strict=False))


def test_dump_log_decodes_it_cleanly(served: dict) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert dump_log.main([str(served["dir"])], mode="json", out=out, err=err, progress=False) == 0
    rows = [json.loads(line) for line in out.getvalue().splitlines()]
    assert err.getvalue() == "" and all(r["error"] is None for r in rows)
    segment = [r for r in rows if r["file_kind"] == "segment"]
    registrations = {r["payload"]["brokerId"]: r for r in segment
                     if r["record_type"] == "REGISTER_BROKER_RECORD"}
    for broker, epoch in served["epochs"].items():
        assert registrations[broker]["payload"]["brokerEpoch"] == epoch
    assert [r["payload"]["brokerId"] for r in segment
            if r["record_type"] == "UNREGISTER_BROKER_RECORD"] == [102]
    out = io.StringIO()
    assert dump_log.main([str(served["dir"])], out=out, err=err, progress=False) == 0
    assert out.getvalue().count('"type":"PRODUCER_IDS_RECORD"') >= len(served["handed"])


def test_metadata_state_matches(served: dict) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert metadata_state.main(str(served["dir"]), as_json=True, out=out, err=err) == 0
    state = json.loads(out.getvalue())
    brokers = {b["broker_id"]: b for b in state["brokers"]}
    assert 102 not in brokers
    assert brokers[101]["broker_epoch"] == served["epochs"][101]
    assert brokers[101]["endpoints"][0]["port"] == 20101
    assert state["producer_ids"]["next_producer_id"] > max(last for *_, last in served["handed"])
