"""pid-audit on constructed logs: a deliberate overlap and a gap are flagged; formats."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

from kraftpy.tools import pid_audit
from support.metadata_logs import (
    MetadataLogWriter,
    no_op,
    producer_ids,
    register_broker,
    registration_change,
    write_snapshot,
)


def constructed(root: Path) -> Path:
    """Broker 1 registers at 0, broker 2 at 1; blocks 0-999, 1000-1999, then a gap
    (2000-2999 never granted), 3000-3999, then an overlap: 3500-4499 reaches into 3000-3999."""
    part = root / "cluster=lab" / "__cluster_metadata-0"
    w = MetadataLogWriter(part)
    w.append([register_broker(1, 0)])
    w.append([register_broker(2, 1), registration_change(2, 1, fenced=-1)])
    w.append([producer_ids(1, 0, 1000)])
    w.append([no_op()])
    w.append([producer_ids(2, 1, 2000)])
    w.append([producer_ids(1, 0, 4000)])
    w.append([producer_ids(2, 1, 4500)])
    w.close()
    return root


def audit(paths: list[Path], fmt: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = pid_audit.main([str(p) for p in paths], fmt=fmt, out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def test_overlap_and_gap_are_findings(tmp_path: Path) -> None:
    status, out, err = audit([constructed(tmp_path)], "json")
    assert status == 1 and err == ""
    result = json.loads(out)
    assert [(b["offset"], b["broker_id"], b["broker_epoch"], b["first_id"], b["last_id"])
            for b in result["blocks"]] == [
        (3, 1, 0, 0, 999), (5, 2, 1, 1000, 1999), (6, 1, 0, 3000, 3999), (7, 2, 1, 3500, 4499)]
    assert [b["registration_offset"] for b in result["blocks"]] == [0, 1, 0, 1]
    assert [(f["kind"], f["offset"], f["first_id"], f["last_id"]) for f in result["findings"]] == [
        ("gap", 6, 2000, 2999), ("overlap", 7, 3500, 3999)]
    assert {b["cluster"] for b in result["blocks"]} == {"lab"}


def test_text_and_csv(tmp_path: Path) -> None:
    root = constructed(tmp_path)
    status, out, _ = audit([root], "text")
    assert status == 1
    assert "lab: GAP at offset 6: ids 2000..2999 were never granted" in out
    assert "lab: OVERLAP at offset 7: ids 3500..3999 were already granted at offset 6" in out
    status, out, _ = audit([root], "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["first_id"] for r in rows] == ["0", "1000", "3000", "3500"]
    assert rows[3]["finding"] == "overlap" and rows[2]["finding"] == "gap"


def test_clean_log_exits_zero_and_snapshot_seeds(tmp_path: Path) -> None:
    part = tmp_path / "__cluster_metadata-0"
    # Segments before 100 were deleted; the snapshot at 100 holds the state up to there.
    w = MetadataLogWriter(part, base_offset=100)
    w.append([producer_ids(1, 5, 8000)])
    w.close()
    write_snapshot(part, end_offset=100, epoch=1,
                   records=[register_broker(1, 5), producer_ids(-1, -1, 7000)])
    status, out, _ = audit([tmp_path], "json")
    result = json.loads(out)
    assert status == 0 and result["findings"] == []
    assert result["blocks"][0]["first_id"] == 7000
    assert result["seeded_from_snapshot"] == {tmp_path.name: 100}


def test_command_line_exit_status(tmp_path: Path) -> None:
    root = constructed(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "kraftpy.tools", "pid-audit", "--csv", str(root)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stdout.startswith("cluster,offset,")
    proc = subprocess.run([sys.executable, "-m", "kraftpy.tools", "pid-audit", str(tmp_path / "x")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "no such file" in proc.stderr


def test_snapshots_that_replaced_the_grants_and_registrations_give_no_false_findings(
        tmp_path: Path) -> None:
    """Segments below 100 were deleted. The older snapshot (50) ends before the log start, the
    newer one (120) inside the first segment left: the audit starts from the newer one, so the
    ids granted between 50 and 100 are no gap and broker 2's registration at offset 60 (epoch
    60, in a deleted segment) is no missing registration. Real findings still count."""
    part = tmp_path / "cluster=lab" / "__cluster_metadata-0"
    part.mkdir(parents=True)
    write_snapshot(part, end_offset=50, epoch=1,
                   records=[register_broker(1, 10), producer_ids(-1, -1, 5000)])
    write_snapshot(part, end_offset=120, epoch=1,
                   records=[register_broker(1, 10), register_broker(2, 60),
                            producer_ids(-1, -1, 9000)])
    w = MetadataLogWriter(part, base_offset=100)
    for next_id in (7000, 8000, 9000):  # offsets 100-102: granted before the snapshot at 120
        w.append([producer_ids(2, 60, next_id)])
    while w.next_offset < 120:
        w.append([no_op()])
    w.append([producer_ids(2, 60, 10000)])  # 120
    w.append([producer_ids(1, 10, 11000)])  # 121
    w.close()
    status, out, _ = audit([tmp_path], "json")
    result = json.loads(out)
    assert status == 0 and result["findings"] == []
    assert [b["first_id"] for b in result["blocks"]] == [6000, 7000, 8000, 9000, 10000]
    assert [b["finding"] for b in result["blocks"]] == [""] * 5
    assert [b["incarnation_id"] is not None for b in result["blocks"]] == [True] * 5
    assert result["seeded_from_snapshot"] == {"lab": 120}

    w = MetadataLogWriter(part, base_offset=122)  # a second segment: what must still be found
    w.append([producer_ids(3, 110, 12000)])  # 122: epoch 110 >= 100 would be in the log
    w.append([producer_ids(3, 110, 12500)])  # 123: overlaps 11000..11999
    w.close()
    status, out, _ = audit([tmp_path], "json")
    findings = [(f["kind"], f["offset"]) for f in json.loads(out)["findings"]]
    assert status == 1
    assert findings == [("unregistered-epoch", 122), ("unregistered-epoch", 123),
                        ("overlap", 123)]


def test_a_served_log_trimmed_by_a_snapshot_audits_clean(tmp_path: Path) -> None:
    """Blocks taken through a running `kraftpy serve` by broker 2, and by broker 3 once it
    registered after broker 2's first hundred; then a snapshot at the log end (taken by the
    node itself, as its policy takes them) replaces every segment but the last,
    and with them both registrations. The snapshot ends inside the segment left. Every
    acknowledged block still in the log is listed, none with a finding (before: an
    "unregistered-epoch" finding for each)."""
    from support.broker_sim import BrokerSim
    from support.lone_quorum import snapshot_now
    from support.server import running_server

    with running_server(tmp_path / "srv", {
            "metadata.log.max.record.bytes.between.snapshots": str(10**9),
            "metadata.log.segment.bytes": "4096"}, log_level="WARNING") as srv:
        two = BrokerSim((srv.host, srv.controller_port), 2)
        two.register()
        acked = [two.allocate() for _ in range(100)]
        three = BrokerSim((srv.host, srv.controller_port), 3)
        three.register()
        for _ in range(100):
            acked += [two.allocate(), three.allocate()]
        two.close()
        three.close()
    snapshot_end = snapshot_now(srv.data_dir, {"metadata.log.segment.bytes": "4096"})
    mdir = srv.data_dir / "__cluster_metadata-0"
    (segment,) = mdir.glob("*.log")
    start = int(segment.name[:20])
    assert max(two.epoch, three.epoch) < start < snapshot_end  # registrations gone
    status, out, err = audit([srv.data_dir], "json")
    result = json.loads(out)
    assert (status, result["findings"], err) == (0, [], "")
    assert list(result["seeded_from_snapshot"].values()) == [snapshot_end]
    listed = {(b["first_id"], b["last_id"] - b["first_id"] + 1) for b in result["blocks"]
              if b["broker_epoch"] != -1}
    lowest = min(first for first, _ in listed)
    assert listed == {b for b in acked if b[0] >= lowest}  # the log's share, all of it
    assert {b["broker_id"] for b in result["blocks"]} >= {2} and acked[-1] in listed
