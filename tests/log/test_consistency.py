"""The rules that decide whether a metadata log has lost records (controller/log/consistency.py),
one by one, and MetadataStorage applying them before it changes anything."""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import pytest
from kraftpy.controller.log import files
from kraftpy.controller.log.consistency import InconsistentLogError, LogFacts, check
from kraftpy.controller.log.snapshots import SnapshotId
from kraftpy.controller.log.storage import CLEAN_SHUTDOWN, MetadataStorage, format_storage
from support.lone_quorum import allocate_blocks, stepped_lone

D = Path("/data/__cluster_metadata-0")


def facts(**kw: object) -> LogFacts:
    base: dict[str, object] = dict(start=0, end=500, segments=2, node_id=1,
                                   last_segment=f"{300:020d}.log")
    base.update(kw)
    return LogFacts(D, **base)  # type: ignore[arg-type]


def refusal(f: LogFacts) -> str:
    with pytest.raises(InconsistentLogError) as info:
        check(f)
    text = str(info.value)
    assert "\n" not in text and text.startswith(f"{D}: ")
    assert text.endswith("refusing to start (nothing in the directory was changed)")
    return text


def test_a_log_from_offset_0_needs_no_snapshot() -> None:
    check(facts(damaged=[(SnapshotId(400, 1), "no SnapshotFooter (incomplete)")]))


def test_the_log_start_must_be_reached_by_a_whole_snapshot() -> None:
    check(facts(start=300, whole=SnapshotId(300, 1), snapshots=[SnapshotId(300, 1)]))
    check(facts(start=300, whole=SnapshotId(350, 1), snapshots=[SnapshotId(350, 1)]))
    text = refusal(facts(start=300, whole=SnapshotId(200, 1),
                         snapshots=[SnapshotId(200, 1), SnapshotId(350, 1)],
                         damaged=[(SnapshotId(350, 1), "CRC mismatch")]))
    assert ("the log starts at offset 300 (00000000000000000300.log), but no whole snapshot "
            "reaches it (00000000000000000350-0000000001.checkpoint is damaged (CRC mismatch); "
            "00000000000000000200-0000000001.checkpoint ends at offset 200): offsets 200..299 "
            "are gone") in text
    assert "there is no snapshot): offsets 0..299 are gone" in refusal(facts(start=300))
    assert "offset 0 are gone" in refusal(facts(start=1))


def test_no_snapshot_may_lie_past_the_log_end() -> None:
    text = refusal(facts(snapshots=[SnapshotId(400, 1), SnapshotId(520, 2)],
                         whole=SnapshotId(400, 1), damaged=[(SnapshotId(520, 2), "torn")]))
    assert ("snapshot 00000000000000000520-0000000002.checkpoint was taken at offset 520, but "
            "the log ends at offset 500 (00000000000000000300.log): offsets 500..519 and any "
            "after are gone") in text


def test_a_leader_epoch_must_start_inside_the_log() -> None:
    check(facts(checkpointed_epochs=[(1, 0), (2, 499)], log_epoch=2))
    # A crash after the epoch was noted but before its first batch was written: allowed...
    check(facts(checkpointed_epochs=[(1, 0), (2, 500)], log_epoch=1))
    # ... but not after a clean stop, and never past the end.
    text = refusal(facts(checkpointed_epochs=[(1, 0), (2, 500)], log_epoch=1, clean=True))
    assert ("leader-epoch-checkpoint records epoch 2 from offset 500, but the log ends at offset "
            "500 (00000000000000000300.log) after a clean stop: offset 500 and any after are "
            "gone") in text
    text = refusal(facts(checkpointed_epochs=[(1, 0), (2, 510), (3, 600)], log_epoch=1))
    assert "records epoch 3 from offset 600" in text and "offsets 500..600 and any" in text


def test_after_a_clean_stop_the_index_and_quorum_state_are_held_to_the_log() -> None:
    index = D / f"{300:020d}.index"
    check(facts(indexed=(index, 499)))
    check(facts(indexed=(index, 520)))  # not clean: an index may run ahead of a torn write
    text = refusal(facts(indexed=(index, 520), clean=True))
    assert ("00000000000000000300.index names offset 520, but after a clean stop the log ends at "
            "offset 500: offsets 500..520 and any after are gone") in text
    alone = {"leaderId": 1, "leaderEpoch": 4, "currentVoters": [{"voterId": 1}]}
    check(facts(quorum_state=alone, log_epoch=4, clean=True))
    check(facts(quorum_state=alone, log_epoch=3))  # a crash before its LeaderChange was written
    text = refusal(facts(quorum_state=alone, log_epoch=3, clean=True))
    assert ("quorum-state says this node led epoch 4 and stopped cleanly, but the log "
            "(00000000000000000300.log, ending at offset 500) has no batch of epoch 4 (its last "
            "is epoch 3): the records of epoch 4 are gone") in text
    # In a quorum of several voters (or led by another node) a higher epoch proves nothing.
    check(facts(quorum_state={**alone, "currentVoters": [{"voterId": 1}, {"voterId": 2}]},
                log_epoch=3, clean=True))
    check(facts(quorum_state={**alone, "leaderId": 2}, log_epoch=3, clean=True))
    check(facts(quorum_state={"leaderId": 1, "leaderEpoch": 4, "data_version": 1}, log_epoch=3,
                clean=True))


def test_no_segments_at_all() -> None:
    check(facts(segments=0, end=0))  # a partition directory made just before a crash
    check(facts(segments=0, end=0, snapshots=[SnapshotId(0, 0)]))  # format --standalone
    text = refusal(facts(segments=0, end=0, snapshots=[SnapshotId(90, 1)]))
    assert "no segment files, but snapshot 00000000000000000090-0000000001.checkpoint exists" in text
    text = refusal(facts(segments=0, end=0, quorum_state={"leaderEpoch": 3}))
    assert "no segment files, but quorum-state records leader epoch 3: the whole log is gone" in text


# --- MetadataStorage applies them before anything changes -----------------------------------


def formatted(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    format_storage(d, cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=1, metadata_version=27)
    return d


def digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def session(d: Path, records: int, *, segment_bytes: int = 1 << 30) -> None:
    """A lone voter's session through the node's own road: elected in a new epoch, a broker
    takes `records` producer-id blocks (a ProducerIdsRecord each, committed one by one), a
    clean stop."""
    node = stepped_lone(d, {"metadata.log.segment.bytes": str(segment_bytes),
                            "metadata.max.idle.interval.ms": "0"})
    allocate_blocks(node, records)
    node.storage.close()


def refused(d: Path) -> str:
    before = digest(d)
    with pytest.raises(InconsistentLogError) as info:
        MetadataStorage.open(d, node_id=1)
    assert digest(d) == before
    return str(info.value)


def test_a_torn_tail_is_not_cut_when_the_start_is_refused(tmp_path: Path) -> None:
    d = formatted(tmp_path)
    session(d, 40, segment_bytes=2048)
    mdir = d / "__cluster_metadata-0"
    first, *_, last = sorted(mdir.glob("*.log"))
    for suffix in (".log", ".index", ".timeindex"):
        first.with_suffix(suffix).unlink()
    with open(last, "ab") as f:
        f.write(bytes(11) + b"\x40torn")  # a torn last batch, which a start would cut
    (d / CLEAN_SHUTDOWN).unlink()
    assert "no whole snapshot reaches it" in refused(d)


def test_a_clean_stop_whose_index_names_a_lost_batch(tmp_path: Path) -> None:
    d = formatted(tmp_path)
    session(d, 200)  # ~100 bytes a batch: index entries every ~4 KiB
    mdir = d / "__cluster_metadata-0"
    raw = (mdir / f"{0:020d}.index").read_bytes()
    assert len(raw) >= 16
    offset, position = int.from_bytes(raw[-8:-4], "big"), int.from_bytes(raw[-4:], "big")
    with open(mdir / f"{0:020d}.log", "r+b") as f:
        f.truncate(position)  # that batch and everything after it are gone
    text = refused(d)
    assert f"00000000000000000000.index names offset {offset}, but after a clean stop" in text


def test_a_clean_stop_whose_quorum_state_epoch_is_not_in_the_log(tmp_path: Path) -> None:
    d = formatted(tmp_path)
    session(d, 3)
    mdir = d / "__cluster_metadata-0"
    end_of_first = (mdir / f"{0:020d}.log").stat().st_size
    session(d, 3)
    assert files.read_quorum_state(mdir)["leaderEpoch"] == 2
    with open(mdir / f"{0:020d}.log", "r+b") as f:
        f.truncate(end_of_first)  # epoch 2's LeaderChange and records are gone ...
    files.write_leader_epochs(mdir, [(1, 0)])  # ... and leader-epoch-checkpoint was rewritten
    for suffix in (".index", ".timeindex"):
        (mdir / f"{0:020d}{suffix}").write_bytes(b"")
    assert "quorum-state says this node led epoch 2 and stopped cleanly" in refused(d)


def test_a_read_only_reader_is_warned_not_refused(tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    d = formatted(tmp_path)
    session(d, 5)
    (d / "__cluster_metadata-0" / f"{0:020d}-0000000001.checkpoint").write_bytes(b"")  # 0 < 7
    (d / "__cluster_metadata-0" / f"{99:020d}-0000000001.checkpoint").write_bytes(b"broken")
    with caplog.at_level(logging.WARNING, "kraftpy.log"):
        storage = MetadataStorage.open(d, read_only=True)
        storage.close()
    assert "snapshot 00000000000000000099-0000000001.checkpoint was taken at offset 99" in caplog.text
    assert "reading it as it is" in caplog.text
    assert "offset 99" in refused(d)
