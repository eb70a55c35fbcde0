"""The data dir: format, lock, open, snapshots by policy (the node's own, through its road),
and state from real Kafka dirs."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords
from kraftpy.controller import replay
from kraftpy.controller.log.files import LogDirError, read_meta_properties
from kraftpy.controller.log.snapshot_files import SnapshotPolicy
from kraftpy.controller.log.snapshots import list_snapshots, read_snapshot
from kraftpy.controller.log.storage import (
    CLEAN_SHUTDOWN,
    MetadataStorage,
    format_storage,
    random_uuid,
    read_bootstrap,
)
from kraftpy.controller.quorum_controller import QuorumController
from kraftpy.controller.settings import ControllerSettings
from kraftpy.protocol.metadata_frame import decode_metadata_record
from kraftpy.protocol.records.producer_ids_record import ProducerIdsRecord
from support.lone_quorum import allocate_blocks, stepped_lone
from support.paths import reference

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def formatted(tmp_path: Path) -> Path:
    d = tmp_path / "data"
    assert format_storage(
        d,
        cluster_id=CLUSTER,
        node_id=1,
        metadata_version=27,
        features={"transaction.version": 2},
        now_ms=1_700_000_000_000,
    )
    return d


def test_format_writes_kafka_files(tmp_path: Path) -> None:
    d = formatted(tmp_path)
    text = (d / "meta.properties").read_text()
    lines = text.splitlines()
    assert lines[0] == "#" and lines[1].startswith("#") and "UTC" in lines[1]
    props = read_meta_properties(d)
    assert props["cluster.id"] == CLUSTER and props["node.id"] == "1" and props["version"] == "1"
    assert len(props["directory.id"]) == 22
    assert read_bootstrap(d) == (27, {"transaction.version": 2})
    records = MemoryRecords((d / "bootstrap.checkpoint").read_bytes())
    shapes = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        shapes.append((batch.base_offset, batch.is_control_batch, batch.leader_epoch))
    assert shapes == [(0, True, 0), (1, False, 0), (3, True, 0)]
    with pytest.raises(LogDirError, match="already formatted"):
        format_storage(d, cluster_id=CLUSTER, node_id=1, metadata_version=27)
    assert not format_storage(
        d, cluster_id=CLUSTER, node_id=1, metadata_version=27, ignore_formatted=True
    )
    with pytest.raises(LogDirError, match="not a Kafka uuid"):
        format_storage(tmp_path / "x", cluster_id="nope", node_id=1, metadata_version=27)
    assert len(random_uuid()) == 22


def test_unformatted_dir_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(LogDirError, match="not formatted.*kraftpy storage format"):
        MetadataStorage.open(tmp_path / "empty")
    with pytest.raises(LogDirError, match="does not exist"):
        MetadataStorage.open(tmp_path / "missing")


def test_node_id_mismatch_is_refused(tmp_path: Path) -> None:
    d = formatted(tmp_path)
    with pytest.raises(LogDirError, match="node.id 1"):
        MetadataStorage.open(d, node_id=2)


def test_second_process_is_refused_by_the_lock(tmp_path: Path) -> None:
    d = formatted(tmp_path)
    storage = MetadataStorage.open(d, node_id=1)
    try:
        with pytest.raises(LogDirError, match="in use by another process"):
            MetadataStorage.open(d, node_id=1)
        code = (
            "import sys; from pathlib import Path\n"
            "from kraftpy.controller.log.storage import MetadataStorage\n"
            "from kraftpy.controller.log.files import LogDirError\n"
            "try:\n    MetadataStorage.open(Path(sys.argv[1]))\n"
            "except LogDirError as e:\n    print(e); sys.exit(7)\n"
        )
        proc = subprocess.run(
            [sys.executable, "-c", code, str(d)], capture_output=True, text=True, timeout=60
        )
        assert proc.returncode == 7 and "in use by another process" in proc.stdout
    finally:
        storage.close()
    MetadataStorage.open(d, node_id=1).close()  # free again once closed


class RecordingController:
    """Just enough of the controller contract to watch what a restart replays."""

    def __init__(self) -> None:
        self.replayed: list[tuple[str, int, int]] = []
        self.next_id = 0

    def replay(self, record, version: int, offset: int) -> None:
        self.replayed.append((type(record).__name__, version, offset))
        if isinstance(record, ProducerIdsRecord):
            self.next_id = record.next_producer_id


def _restart(d: Path) -> tuple[RecordingController, MetadataStorage]:
    """What a restart replays of `d`: the newest whole snapshot, then the log after it."""
    again = MetadataStorage.open(d, node_id=1)
    replayed = RecordingController()
    replay.replay_snapshot_and_log([replayed], again.snapshot, again.metadata, None)
    return replayed, again


def test_snapshot_policy_trims_and_restart_replays_snapshot_plus_suffix(tmp_path: Path) -> None:
    d = tmp_path / "data"
    node = stepped_lone(d, {"metadata.log.segment.bytes": "2048",
                            "metadata.log.max.record.bytes.between.snapshots": "3000",
                            "metadata.log.max.snapshot.interval.ms": "0"})
    mdir = d / "__cluster_metadata-0"
    taken = set()
    for _ in range(12):
        allocate_blocks(node, 10)
        taken.update(sid for sid, _ in list_snapshots(mdir))
    assert len(taken) >= 3
    snaps = list_snapshots(mdir)
    newest = snaps[-1][0]
    assert newest == max(taken) and len(snaps) == 2  # newest + one fallback
    assert 0 < node.storage.metadata.log_start_offset <= newest.end_offset  # segments went
    next_id = node.controller.producer_ids.next_producer_id
    node.storage.close()
    assert (d / CLEAN_SHUTDOWN).exists()

    replayed, again = _restart(d)
    assert not (d / CLEAN_SHUTDOWN).exists()
    assert again.snapshot.snapshot_id == newest
    assert replayed.next_id == next_id
    # snapshot records at the snapshot's last offset, then the log after it at its own offsets
    snapshot_rows = [o for _, _, o in replayed.replayed if o < newest.end_offset]
    assert set(snapshot_rows) == {newest.end_offset - 1}
    log_rows = [o for _, _, o in replayed.replayed[len(snapshot_rows):]]
    assert log_rows == sorted(log_rows) and log_rows[0] >= newest.end_offset
    assert again.leader_epoch == 1
    again.close()


def test_damaged_newest_snapshot_falls_back_to_the_previous(tmp_path: Path) -> None:
    d = tmp_path / "data"
    node = stepped_lone(d, {"metadata.log.max.record.bytes.between.snapshots": "1500",
                            "metadata.log.max.snapshot.interval.ms": "0"})
    mdir = d / "__cluster_metadata-0"
    while len(list_snapshots(mdir)) < 2:
        allocate_blocks(node, 1)
    node.storage.close()
    (older, _), (newest, newest_path) = list_snapshots(mdir)
    newest_path.write_bytes(newest_path.read_bytes()[:-5])  # torn footer
    (mdir / "00000000000000000099-0000000001-123.checkpoint.part").write_bytes(b"partial")
    replayed, again = _restart(d)
    assert again.snapshot.snapshot_id == older
    expected = RecordingController()
    replay.replay_snapshot_and_log([expected], None, again.metadata, None)
    assert replayed.next_id == expected.next_id > 0  # the log after the older one replayed
    assert not list(mdir.glob("*.part"))
    again.close()


def _digest(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def _settings(storage: MetadataStorage) -> ControllerSettings:
    return ControllerSettings(cluster_id=storage.cluster_id, node_id=storage.node_id)


@pytest.mark.parametrize(
    ("sample", "mv", "next_pid", "broker_epoch", "end"),
    [
        ("flink-on-prem", 14, 1000, 6, 17027),
        ("spring-kafka", 21, 5000, 235852, 245533),
        ("kafka-4.1-generated", 27, 5000, 174, 308),
    ],
)
def test_real_kafka_dirs_report_their_state(sample, mv, next_pid, broker_epoch, end) -> None:
    data = reference("real-metadata-logs", sample, "data")
    before = _digest(data)
    storage = MetadataStorage.open(data, read_only=True)
    controller = QuorumController(_settings(storage))
    _, snapshot_records, _ = replay.replay_snapshot_and_log(
        [controller], storage.snapshot, storage.metadata, None)
    storage.close()
    assert _digest(data) == before  # read-only: not a byte changed, no lock file made
    assert storage.snapshot is not None and snapshot_records > 0
    image = controller.describe()
    assert image["metadata_version"] == mv
    assert image["producer_ids"]["next_producer_id"] == next_pid
    assert [(b["broker_id"], b["broker_epoch"]) for b in image["brokers"]] == [(1, broker_epoch)]
    assert image["log_end_offset"] == end


def test_kafka_snapshot_plus_suffix_equals_full_replay_of_kafkas_log() -> None:
    data = reference("real-metadata-logs", "flink-on-prem", "data")
    storage = MetadataStorage.open(data, read_only=True)
    from_snapshot = QuorumController(_settings(storage))
    replay.replay_snapshot_and_log([from_snapshot], storage.snapshot, storage.metadata, None)
    full = QuorumController(_settings(storage))
    for batch in storage.metadata.read(0):
        if not batch.is_control:
            for i, value in enumerate(batch.values()):
                record, version = decode_metadata_record(value)
                full.replay(record, version, batch.base_offset + i)
    storage.close()
    # FinalizedFeaturesEpoch differs, as in Kafka: a loaded snapshot's offset, or the offset
    # where a replayed log last changed the levels.
    ours, theirs = from_snapshot.describe(), full.describe()
    assert ours.pop("features_epoch") == storage.snapshot.snapshot_id.end_offset - 1
    theirs.pop("features_epoch")
    assert ours == theirs


def test_kafka_snapshot_records_read_back(tmp_path: Path) -> None:
    folder = reference("real-metadata-logs", "kafka-4.1-generated", "data", "__cluster_metadata-0")
    for sid, path in list_snapshots(folder):
        snap = read_snapshot(path, sid)
        kinds = {type(decode_metadata_record(v)[0]).__name__ for v in snap.values}
        assert "ProducerIdsRecord" in kinds and "RegisterBrokerRecord" in kinds


def test_a_lone_voters_first_epoch_writes_kafkas_quorum_state_and_leader_change(
        tmp_path: Path) -> None:
    d = formatted(tmp_path)
    node = stepped_lone(d, clock=[1713532847629])
    assert node.raft.epoch == 1
    node.storage.close()
    mdir = d / "__cluster_metadata-0"
    real = reference("real-metadata-logs", "flink-on-prem", "data", "__cluster_metadata-0")
    # Kafka 3.6 wrote exactly this for node 1, epoch 1.
    assert (mdir / "quorum-state").read_bytes() == (real / "quorum-state").read_bytes()
    ours = (mdir / "00000000000000000000.log").read_bytes()
    theirs = (real / "00000000000000000000.log").read_bytes()
    reader = MetadataStorage.open(d, node_id=1, read_only=True)
    first_ours = next(iter(reader.metadata.read()))
    reader.close()
    assert first_ours.raw() == theirs[: first_ours.size] == ours[: first_ours.size]
    assert not (mdir / "quorum-state.tmp").exists()


def test_snapshot_policy_has_kafkas_two_triggers() -> None:
    policy = SnapshotPolicy()  # 20 MiB, 1 h: Kafka's defaults
    assert (policy.max_record_bytes, policy.interval_ms) == (20 * 1024 * 1024, 3_600_000)
    assert not policy.due(bytes_since=10**9, ms_since=10**9, new_records=False)
    assert policy.due(bytes_since=20 * 1024 * 1024, ms_since=0, new_records=True)
    assert not policy.due(bytes_since=20 * 1024 * 1024 - 1, ms_since=3_599_999, new_records=True)
    assert policy.due(bytes_since=1, ms_since=3_600_000, new_records=True)
    assert not SnapshotPolicy(interval_ms=0).due(bytes_since=1, ms_since=10**12, new_records=True)


def test_a_large_snapshots_batches_stay_within_kafkas_8_mib() -> None:
    """Kafka's brokers read a snapshot batch past 8 MiB only by allocating a new buffer for
    it: each batch stays within the limit, however the records fall."""
    from kraftpy.controller.log.snapshots import MAX_BATCH_BYTES, encode_snapshot
    from kraftpy.protocol.record_batch import iter_record_batches

    values = [bytes([i % 251]) * (100 + i % 900) for i in range(30_000)]  # ~15 MB
    data = b"".join(encode_snapshot(values, epoch=1, last_contained_log_timestamp=1,
                                    timestamp=1))
    batches = list(iter_record_batches(data))
    assert len(batches) >= 4 and max(b.size for b in batches) <= MAX_BATCH_BYTES
    assert [v for b in batches if not b.is_control for v in b.values()] == values
