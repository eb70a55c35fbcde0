"""The small files beside a metadata log, on Kafka's real files and on damaged copies."""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
import pytest
from kraftpy.tools.logdecode.paths import FileKind, classify, cluster_of, expand
from kraftpy.tools.logdecode.small_files import SmallFileError, read_small_file, render_small_file
from support.paths import reference


def kafka41() -> Path:
    return reference("real-metadata-logs", "kafka-4.1-generated", "data")


def test_classify_names() -> None:
    assert classify("x/00000000000000000029-0000000001.checkpoint").kind is FileKind.SNAPSHOT
    snap = classify("x/00000000000000000029-0000000001.checkpoint")
    assert (snap.base_offset, snap.snapshot_epoch) == (29, 1)
    assert classify("a/__cluster_metadata-0/00000000000000000100.log").base_offset == 100
    assert classify("a/__cluster_metadata-0/00000000000000000100.log").partition == "__cluster_metadata-0"
    assert classify("a/__transaction_state-3/00000000000000000000.log").is_transaction_log
    assert classify("bootstrap.checkpoint").kind is FileKind.BOOTSTRAP
    assert classify("x/00000000000000007207-0000000001.checkpoint.deleted").kind is FileKind.UNKNOWN
    assert classify("x/00000000000000000172.snapshot").kind is FileKind.PRODUCER_STATE


def test_cluster_names() -> None:
    assert cluster_of("/r/cluster=east/n1/__cluster_metadata-0/0.log") == "east"
    assert cluster_of("/r/flink-on-prem/data/__cluster_metadata-0/0.log") == "flink-on-prem"
    assert cluster_of("/r/prod/__cluster_metadata-0/0.log") == "prod"
    assert cluster_of("/r/prod/__cluster_metadata-0/0.log", "given") == "given"


def test_directory_walk_yields_record_files_in_kafka_order() -> None:
    files = list(expand([kafka41()]))
    names = [f.path.name for f in files]
    assert names[0] == "00000000000000000000.log"
    assert names[-1] == "bootstrap.checkpoint"
    assert sum(f.kind is FileKind.SNAPSHOT for f in files) == 8
    assert all(f.kind.has_batches for f in files)
    everything = list(expand([kafka41()], all_files=True))
    kinds = {f.kind for f in everything}
    assert {FileKind.QUORUM_STATE, FileKind.META_PROPERTIES, FileKind.OFFSET_INDEX,
            FileKind.TIME_INDEX, FileKind.PRODUCER_STATE, FileKind.PARTITION_METADATA,
            FileKind.LEADER_EPOCH_CHECKPOINT} <= kinds


def test_real_small_files() -> None:
    part = kafka41() / "__cluster_metadata-0"
    qs = read_small_file(classify(part / "quorum-state"))
    assert qs["leaderEpoch"] == 2 and qs["data_version"] == 0
    lec = read_small_file(classify(part / "leader-epoch-checkpoint"))
    assert lec["entries"] == [{"epoch": 1, "startOffset": 0}, {"epoch": 2, "startOffset": 172}]
    pm = read_small_file(classify(part / "partition.metadata"))
    assert pm == {"version": 0, "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ"}
    meta = read_small_file(classify(kafka41() / "meta.properties"))
    assert meta["cluster.id"] == "29aC0gQGTISc_JF9Z66TCA" and meta["node.id"] == "1"
    index = classify(part / "00000000000000000000.index")
    assert render_small_file(index, read_small_file(index)) == [
        "offset: 88 position: 6644", "offset: 170 position: 11591", "offset: 239 position: 15875"]
    tindex = read_small_file(classify(part / "00000000000000000000.timeindex"))
    assert tindex["entries"][0] == {"timestamp": 1795242693721, "offset": 88}
    assert read_small_file(classify(part / "00000000000000000172.snapshot"))["entries"] == []


def test_producer_state_with_entries(tmp_path: Path) -> None:
    entry = struct.pack(">qhiqiqiq", 7, 1, 4, 99, 4, 1700000000000, -1, -1)
    body = struct.pack(">i", 1) + entry
    data = struct.pack(">hI", 1, crc32c.crc32c(body)) + body
    path = tmp_path / "00000000000000000100.snapshot"
    path.write_bytes(data)
    decoded = read_small_file(classify(path))
    assert decoded["entries"][0]["producerId"] == 7 and decoded["entries"][0]["lastOffset"] == 99
    path.write_bytes(data[:-1] + b"\x00")
    with pytest.raises(SmallFileError, match="CRC"):
        read_small_file(classify(path))


@pytest.mark.parametrize("name,content", [
    ("quorum-state", b"{not json"),
    ("quorum-state", b"\xff\xfe"),
    ("leader-epoch-checkpoint", b"0\n2\n1 0\n"),
    ("leader-epoch-checkpoint", b"0\nx\n"),
    ("partition.metadata", b"garbage"),
    ("meta.properties", b"#\nnode.id=1\n"),
    ("00000000000000000000.index", b"\x00" * 7),
    ("00000000000000000000.timeindex", b"\x00" * 13),
    ("00000000000000000000.snapshot", b"\x00\x01"),
])
def test_damaged_small_files_raise_clear_errors(tmp_path: Path, name: str, content: bytes) -> None:
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(SmallFileError):
        read_small_file(classify(path))
