"""Replay of metadata logs written by real Kafka (3.6, 3.9, 4.1): every record type accepted,
the state matches what the logs say, and our snapshots agree with Kafka's own."""

from __future__ import annotations

from collections import Counter
from itertools import groupby
from pathlib import Path

import pytest
from kraftpy.controller.quorum_controller import QuorumController
from kraftpy.protocol.metadata_frame import decode_metadata_record
from kraftpy.protocol.record_batch import iter_record_batches
from support.controller_harness import settings
from support.paths import reference


def metadata_dir(name: str) -> Path:
    return reference("real-metadata-logs", name, "data", "__cluster_metadata-0")


def records(path: Path):
    """(offset, record, version) of the data batches of a segment or checkpoint file."""
    for batch in iter_record_batches(path.read_bytes()):
        if batch.is_control:
            continue
        for rec in batch.records():
            record, version = decode_metadata_record(rec.value)
            yield rec.offset, record, version


def snapshots(directory: Path) -> list[tuple[int, Path]]:
    return sorted((int(p.name.split("-")[0]), p) for p in directory.glob("*.checkpoint"))


def replay_log(directory: Path, *, start: int = 0, stop: int | None = None,
               snapshot: Path | None = None, end: int = 0) -> QuorumController:
    qc = QuorumController(settings())
    if snapshot is not None:
        for _, record, version in records(snapshot):
            qc.replay(record, version, end - 1)
    for segment in sorted(directory.glob("*.log")):
        for offset, record, version in records(segment):
            if offset >= start and (stop is None or offset < stop):
                qc.replay(record, version, offset)
    return qc


def stable(qc: QuorumController) -> dict:
    """describe() without soft state (contact times) and log positions."""
    image = qc.describe()
    for b in image["brokers"]:
        b.pop("last_contact_ms")
    for key in ("log_end_offset", "features_epoch", "high_watermark"):
        image.pop(key)
    return image


def sections(pairs) -> list[int]:
    """The order of the image's parts (topics come in map order, so only the parts count)."""
    kinds = [2 if r.API_KEY == 3 else r.API_KEY for r, _ in pairs]  # a topic's partitions
    return [k for k, _ in groupby(kinds)]


def as_json(pairs) -> Counter:
    """Records as comparable text; endpoints and features are sets (Kafka keeps them in maps)."""
    out = Counter()
    for record, version in pairs:
        data = record.to_json(version)
        for listed in ("endPoints", "features"):
            if listed in data:
                data[listed] = sorted(data[listed], key=lambda e: e["name"])
        out[f"{type(record).__name__}/{version}/{data}"] += 1
    return out


def test_kafka_41_log_replays_to_what_it_says():
    qc = replay_log(metadata_dir("kafka-4.1-generated"))
    image = qc.describe()
    assert image["metadata_version"] == 27
    assert image["producer_ids"]["next_producer_id"] == 5000
    (broker,) = image["brokers"]
    assert (broker["broker_id"], broker["broker_epoch"], broker["fenced"]) == (1, 174, True)
    assert {t["name"] for t in image["topics"]} >= {"golden-a", "golden-b"}
    golden_a = next(t for t in image["topics"] if t["name"] == "golden-a")
    assert len(golden_a["partitions"]) == 3


def test_flink_36_log_replays_to_what_it_says():
    qc = replay_log(metadata_dir("flink-on-prem"))
    image = qc.describe()
    assert image["metadata_version"] == 14
    assert image["producer_ids"]["next_producer_id"] == 1000
    (broker,) = image["brokers"]
    assert (broker["broker_id"], broker["broker_epoch"]) == (1, 6)
    assert broker["in_controlled_shutdown"] and broker["fenced"]
    assert len(image["topics"]) == 63
    assert sum(len(t["partitions"]) for t in image["topics"]) == 151


def test_spring_39_newest_snapshot_plus_segment():
    directory = metadata_dir("spring-kafka")
    segment_base = min(int(p.stem) for p in directory.glob("*.log"))
    end, path = snapshots(directory)[-1]  # the older segment is gone: start from here
    assert end >= segment_base
    qc = replay_log(directory, start=end, snapshot=path, end=end)
    image = qc.describe()
    assert image["metadata_version"] == 21
    assert image["producer_ids"]["next_producer_id"] == 5000
    assert image["brokers"] and all(b["broker_epoch"] > 0 for b in image["brokers"])


@pytest.mark.parametrize("name", ["kafka-4.1-generated", "flink-on-prem", "spring-kafka"])
def test_kafka_snapshot_plus_suffix_equals_full_replay(name):
    directory = metadata_dir(name)
    segment_base = min(int(p.stem) for p in directory.glob("*.log"))
    usable = [s for s in snapshots(directory) if s[0] >= segment_base]
    first_end, first = usable[0] if segment_base else (0, None)
    full = stable(replay_log(directory, start=first_end, snapshot=first, end=first_end))
    for end, path in usable:
        assert stable(replay_log(directory, start=end, snapshot=path, end=end)) == full, path.name


@pytest.mark.parametrize("name", ["kafka-4.1-generated", "flink-on-prem"])
def test_our_snapshot_matches_kafkas_for_the_records_we_keep(name):
    directory = metadata_dir(name)
    # brokers, topics, partitions, configs, features, ids, controllers; and what is kept
    # without being acted on: quotas, SCRAM, delegation tokens, the ZK migration state
    kept = {0, 2, 3, 4, 12, 15, 27, 10, 11, 14, 21}
    for end, path in snapshots(directory):
        ours = replay_log(directory, stop=end).snapshot_records()
        theirs = [(r, v) for _, r, v in records(path) if r.API_KEY in kept]
        assert as_json(ours) == as_json(theirs), path.name
        assert sections(ours) == sections(theirs), path.name


def test_our_snapshot_replays_to_the_same_state():
    directory = metadata_dir("kafka-4.1-generated")
    qc = replay_log(directory)
    again = QuorumController(settings())
    for record, version in qc.snapshot_records():
        again.replay(record, version, qc.log_end_offset - 1)
    assert stable(again) == stable(qc)
