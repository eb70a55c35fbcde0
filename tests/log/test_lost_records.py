"""`kraftpy serve` never starts on a metadata log that has lost records.

Each case: a broker takes producer-ID blocks from a running `kraftpy serve` (every block it
gets is acknowledged), the node stops, the data dir is damaged the way a disk, an operator or
a bad copy would, and the next `kraftpy serve` must exit 2 with one ERROR line that names the
files and the offsets that are gone, no traceback, and not a byte of the directory changed.
Before, recovery replayed around the gap and handed out acknowledged blocks again.
The healthy counterparts (a trimmed log with a good snapshot, a damaged newest snapshot whose
older one still reaches the log start) start and hand out only ids above every acknowledged
block. The layouts are the same on every run: the node takes no snapshot of its own during
the sessions and writes no periodic NoOpRecord; snapshots are taken between sessions by the
node itself, started with a policy that asks for one at once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from kraftpy.controller.log.segment import scan
from kraftpy.controller.log.snapshots import list_snapshots
from support.broker_sim import BrokerSim
from support.lone_quorum import snapshot_now as take_snapshot_now
from support.server import KraftpyServer

MDIR = "__cluster_metadata-0"
# No snapshot by the node's own policy and no periodic NoOpRecords: the layout (segment rolls,
# snapshot offsets) is the same on every run. Snapshots are taken between sessions.
SETTINGS = {"metadata.log.max.record.bytes.between.snapshots": str(10**9),
            "metadata.log.segment.bytes": "4096",
            "metadata.max.idle.interval.ms": "0"}
ONE_SEGMENT = {**SETTINGS, "metadata.log.segment.bytes": str(1 << 20)}

Block = tuple[int, int]


def serve_and_allocate(srv: KraftpyServer, blocks: int) -> list[Block]:
    """One session: broker 2 registers and takes `blocks` blocks; the node stops cleanly."""
    srv.start()
    broker = BrokerSim((srv.host, srv.controller_port), 2)
    try:
        broker.register()
        acked = [broker.allocate() for _ in range(blocks)]
    finally:
        broker.close()
    assert srv.stop() == 0, srv.log_tail()
    return acked


def snapshot_now(data: Path) -> int:
    """A snapshot at the log end, taken by the node itself (`lone_quorum.snapshot_now`)."""
    return take_snapshot_now(data, SETTINGS)


def template(root: Path, steps: list[int | str]) -> tuple[Path, list[Block]]:
    """Sessions of n blocks, "snapshot" between them, "one segment" for a session that may
    not roll its segment."""
    acked: list[Block] = []
    settings = SETTINGS
    for step in steps:
        if step == "snapshot":
            snapshot_now(root / "data")
        elif step == "one segment":
            settings = ONE_SEGMENT
        else:
            srv = KraftpyServer(root, settings, log_level="WARNING")
            acked += serve_and_allocate(srv, int(step))
            settings = SETTINGS
    return root / "data", acked


@pytest.fixture(scope="module")
def trimmed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Block]]:
    """Two snapshots; the older ends before the log start (the segments between were deleted
    with the newer one), the newer inside the one segment left."""
    return template(tmp_path_factory.mktemp("trimmed"), [60, "snapshot", 60, "snapshot"])


@pytest.fixture(scope="module")
def close_snapshots(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Block]]:
    """Two snapshots, both inside the one segment left."""
    return template(tmp_path_factory.mktemp("close"),
                    [60, "snapshot", "one segment", 2, "snapshot"])


@pytest.fixture(scope="module")
def unsnapshotted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Block]]:
    """No snapshot, many segments, two leader epochs (two sessions)."""
    return template(tmp_path_factory.mktemp("plain"), [60, 60])


def copy_of(made: tuple[Path, list[Block]], root: Path) -> tuple[KraftpyServer, list[Block]]:
    data, acked = made
    srv = KraftpyServer(root, SETTINGS, log_level="WARNING")
    shutil.copytree(data, srv.data_dir)
    return srv, acked


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "dir" for p in sorted(folder.rglob("*"))}


def refused(srv: KraftpyServer) -> str:
    """Run `kraftpy serve` on the damaged dir: exit 2, one ERROR line (returned), nothing
    changed in the directory, no traceback."""
    before = digest(srv.data_dir)
    proc = subprocess.run(srv.command(), capture_output=True, text=True, timeout=120,
                          cwd=srv.root)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, proc.stderr
    assert digest(srv.data_dir) == before
    return errors[0]


def segments(srv: KraftpyServer) -> list[Path]:
    return sorted((srv.data_dir / MDIR).glob("*.log"))


def snapshots(srv: KraftpyServer) -> list[tuple[int, Path]]:
    return [(sid.end_offset, path) for sid, path in list_snapshots(srv.data_dir / MDIR)]


def flip_a_byte(path: Path, position: int = -3) -> None:
    data = bytearray(path.read_bytes())
    data[position] ^= 0xFF
    path.write_bytes(bytes(data))


def next_block_is_new(srv: KraftpyServer, acked: list[Block]) -> None:
    """The node starts, and the next block lies above every acknowledged one."""
    srv.start()
    broker = BrokerSim((srv.host, srv.controller_port), 2)
    try:
        broker.register()
        start, _length = broker.allocate()
    finally:
        broker.close()
    assert srv.stop() == 0
    assert start >= max(first + length for first, length in acked)


def test_a_healthy_trimmed_log_with_a_good_snapshot_starts(trimmed, tmp_path: Path) -> None:
    srv, acked = copy_of(trimmed, tmp_path)
    (older, _), (newest, _) = snapshots(srv)
    assert older < int(segments(srv)[0].name[:20]) < newest and len(segments(srv)) == 1
    next_block_is_new(srv, acked)


def test_damaged_newest_snapshot_with_segments_already_trimmed(trimmed, tmp_path: Path) -> None:
    srv, acked = copy_of(trimmed, tmp_path)
    (older, _), (newest, newest_path) = snapshots(srv)
    start = int(segments(srv)[0].name[:20])
    assert older < start < newest
    flip_a_byte(newest_path)
    line = refused(srv)
    assert "inconsistent snapshot state" in line
    assert f"the log starts at offset {start} ({start:020d}.log)" in line
    assert f"{newest_path.name} is damaged (CRC mismatch" in line
    assert f"{snapshots(srv)[0][1].name} ends at offset {older}" in line
    assert f"offsets {older}..{start - 1} are gone" in line


def test_both_snapshots_damaged(trimmed, tmp_path: Path) -> None:
    srv, acked = copy_of(trimmed, tmp_path)
    start = int(segments(srv)[0].name[:20])
    assert start > 0 and len(snapshots(srv)) == 2
    for _end, path in snapshots(srv):
        flip_a_byte(path)
    line = refused(srv)
    assert "no whole snapshot reaches it" in line
    assert all(f"{path.name} is damaged" in line for _end, path in snapshots(srv))
    assert f"offsets 0..{start - 1} are gone" in line


def test_damaged_newest_snapshot_whose_older_one_reaches_the_log_start(close_snapshots,
                                                                      tmp_path: Path) -> None:
    srv, acked = copy_of(close_snapshots, tmp_path)
    (older, _), (_newest, newest_path) = snapshots(srv)
    assert int(segments(srv)[0].name[:20]) <= older  # nothing between them is lost
    flip_a_byte(newest_path)
    next_block_is_new(srv, acked)
    assert f"snapshot {newest_path.name} is damaged" in srv.log_text()


def test_missing_first_segment(unsnapshotted, tmp_path: Path) -> None:
    srv, acked = copy_of(unsnapshotted, tmp_path)
    first, second = segments(srv)[:2]
    assert first.name == f"{0:020d}.log" and not snapshots(srv)
    for suffix in (".log", ".index", ".timeindex"):
        first.with_suffix(suffix).unlink()
    line = refused(srv)
    after = int(second.name[:20])
    assert f"the log starts at offset {after} ({second.name})" in line
    assert "there is no snapshot" in line and f"offsets 0..{after - 1} are gone" in line


def batch_starts(srv: KraftpyServer) -> list[tuple[Path, int, int, int]]:
    """(segment, file position, base offset, leader epoch) of every batch."""
    return [(seg, b.position, b.base_offset, b.partition_leader_epoch)
            for seg in segments(srv) for b in scan(seg)]


def cut_log_at(srv: KraftpyServer, segment: Path, position: int) -> None:
    """The log as if everything from `position` of `segment` on had never been written."""
    with open(segment, "r+b") as f:
        f.truncate(position)
    for later in segments(srv):
        if later.name > segment.name:
            for suffix in (".log", ".index", ".timeindex"):
                later.with_suffix(suffix).unlink()


@pytest.mark.parametrize("how", ["crashed", "stopped cleanly"])
def test_log_truncated_before_a_recorded_epoch(unsnapshotted, tmp_path: Path, how: str) -> None:
    srv, acked = copy_of(unsnapshotted, tmp_path)
    batches = batch_starts(srv)
    second = next(i for i, b in enumerate(batches) if b[3] == 2)  # epoch 2's LeaderChange
    epoch_start = batches[second][2]
    if how == "crashed":  # the cut reaches into epoch 1 too: its offset lies past the end
        seg, position, end, _ = batches[second - 3]
        (srv.data_dir / ".kafka_cleanshutdown").unlink()
    else:  # after a clean stop even the epoch's own first offset must be in the log
        seg, position, end, _ = batches[second]
        assert (srv.data_dir / ".kafka_cleanshutdown").exists()
    cut_log_at(srv, seg, position)
    line = refused(srv)
    assert (f"leader-epoch-checkpoint records epoch 2 from offset {epoch_start}, but the log "
            f"ends at offset {end} ({seg.name})") in line
    gone = f"offset {end}" if end == epoch_start else f"offsets {end}..{epoch_start}"
    assert f"{gone} and any after are gone" in line


def test_snapshot_and_log_do_not_meet(trimmed, tmp_path: Path) -> None:
    srv, acked = copy_of(trimmed, tmp_path)
    (_older, _), (newest, newest_path) = snapshots(srv)
    (first,) = segments(srv)
    # Cut the log below the newest snapshot, still above the log start.
    seg, position, end, _ = max(b for b in batch_starts(srv) if b[2] < newest)
    assert int(first.name[:20]) <= end < newest
    cut_log_at(srv, seg, position)
    line = refused(srv)
    gone = f"offset {end}" if end == newest - 1 else f"offsets {end}..{newest - 1}"
    assert (f"snapshot {newest_path.name} was taken at offset {newest}, but the log ends at "
            f"offset {end} ({first.name}): {gone} and any after are gone") in line


def test_the_refusal_holds_on_every_later_start(trimmed, tmp_path: Path) -> None:
    """Nothing a refused start does makes the next one succeed (no marker removed, no epoch
    bumped, no snapshot cleaned away)."""
    srv, _acked = copy_of(trimmed, tmp_path)
    flip_a_byte(snapshots(srv)[-1][1])
    (srv.data_dir / MDIR / "00000000000000000001-0000000001-7.checkpoint.part").write_bytes(b"x")
    first = refused(srv)
    assert refused(srv).split("] ", 1)[1] == first.split("] ", 1)[1]  # after the timestamp
    assert os.path.exists(srv.data_dir / MDIR / "00000000000000000001-0000000001-7.checkpoint.part")
