"""`kraftpy serve` on a directory that finalizes a level kraftpy cannot run: exit 2, one line
naming the feature and level, and the directory exactly as it was (no LeaderChange appended,
no epoch bumped, no files created)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from kraftpy.controller.log import files
from kraftpy.controller.log.snapshots import encode_snapshot
from kraftpy.controller.log.storage import (
    MetadataStorage,
    bootstrap_values,
    format_storage,
    write_checkpoint_file,
)
from kraftpy.protocol.control_records import ControlType, control_key, encode_control_value
from kraftpy.protocol.messages.k_raft_version_record import KRaftVersionRecord
from kraftpy.protocol.metadata_frame import encode_metadata_record
from kraftpy.protocol.records.feature_level_record import FeatureLevelRecord
from support.server import KraftpyServer

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def _contents(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file()}


def _refused(srv: KraftpyServer, what: str) -> None:
    before = _contents(srv.data_dir)
    proc = subprocess.run(srv.command(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert what in lines[0] and "not supported by kraftpy" in lines[0], lines[0]
    assert _contents(srv.data_dir) == before


def test_a_bootstrap_file_with_a_level_beyond_ours_is_refused_before_anything(
        tmp_path: Path) -> None:
    srv = KraftpyServer(tmp_path)
    data = srv.data_dir
    data.mkdir()
    # As another tool might format it: transaction.version 3 (Kafka 4.1 knows 0-2).
    values = bootstrap_values(27, {"transaction.version": 3})
    write_checkpoint_file(data / files.BOOTSTRAP_CHECKPOINT,
                          encode_snapshot(values, epoch=0, last_contained_log_timestamp=0,
                                          timestamp=0))
    files.write_meta_properties(data, cluster_id=CLUSTER, node_id=1,
                                directory_id="AAAAAAAAAAAAAAAAAAAAAQ")
    _refused(srv, "transaction.version level 3")


def test_a_log_that_raised_a_level_beyond_ours_is_refused_and_left_alone(tmp_path: Path) -> None:
    srv = KraftpyServer(tmp_path)
    format_storage(srv.data_dir, cluster_id=CLUSTER, node_id=1, metadata_version=27)
    storage = MetadataStorage.open(srv.data_dir, node_id=1)
    storage.metadata.append([encode_metadata_record(record, 0) for record in (
        FeatureLevelRecord(name="metadata.version", feature_level=27),
        FeatureLevelRecord(name="share.version", feature_level=2))],
        leader_epoch=1, timestamp=1)
    storage.metadata.flush()
    storage.close()
    _refused(srv, "share.version level 2")


def test_a_dynamic_quorum_directory_without_voters_is_refused(tmp_path: Path) -> None:
    """`kafka-storage format --no-initial-controllers` writes kraft.version 1 and no voters
    into a bootstrap snapshot: a controller that waits to be added, which kraftpy cannot be."""
    srv = KraftpyServer(tmp_path)
    format_storage(srv.data_dir, cluster_id=CLUSTER, node_id=1, metadata_version=27)
    partition = srv.data_dir / "__cluster_metadata-0"
    partition.mkdir()
    control = [(control_key(ControlType.KRAFT_VERSION),
                encode_control_value(ControlType.KRAFT_VERSION,
                                     KRaftVersionRecord(k_raft_version=1)))]
    write_checkpoint_file(partition / "00000000000000000000-0000000000.checkpoint",
                          encode_snapshot([], epoch=0, last_contained_log_timestamp=0,
                                          timestamp=0, control=control))
    _refused(srv, "kraft.version level 1 with no voter set")
