"""Metadata logs made to order, for tests and benchmarks: Kafka's file names and batch format,
records encoded by the protocol layer, control batches as KRaft writes them.

    w = MetadataLogWriter(tmp_path / "c1" / "__cluster_metadata-0")
    w.append([(RegisterBrokerRecord(broker_id=1, broker_epoch=0), 3)])   # -> base offset 0
    w.append_control(LEADER_CHANGE, LeaderChangeMessage(leader_id=1))
    w.close()
    write_snapshot(w.directory, end_offset=w.next_offset, epoch=1, records=[...])
"""

from __future__ import annotations

import random
import struct
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kraftpy.protocol.metadata_frame import encode_metadata_record
from kraftpy.protocol.record_batch import build_record_batch

LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER = 2, 3, 4
START_MS = 1_760_000_000_000


def control_key(control_type: int) -> bytes:
    return struct.pack(">hh", 0, control_type)


class MetadataLogWriter:
    """Appends batches to `<base offset>.log` segments, rolling at `segment_bytes`."""

    def __init__(self, directory: Path, *, leader_epoch: int = 1, segment_bytes: int = 1 << 30,
                 start_ms: int = START_MS, base_offset: int = 0) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.leader_epoch = leader_epoch
        self.segment_bytes = segment_bytes
        self.now_ms = start_ms
        self.next_offset = base_offset
        self.records_written = 0
        self._file: Any = None
        self._size = 0
        self.segments: list[Path] = []

    def _segment(self, size: int):
        if self._file is None or (self._size and self._size + size > self.segment_bytes):
            if self._file is not None:
                self._file.close()
            path = self.directory / f"{self.next_offset:020d}.log"
            self.segments.append(path)
            self._file = path.open("wb")
            self._size = 0
        return self._file

    def append_raw(self, values: Sequence[bytes], *, keys: Sequence[bytes | None] | None = None,
                   control: bool = False) -> int:
        base = self.next_offset
        batch = build_record_batch(values, base_offset=base, partition_leader_epoch=self.leader_epoch,
                                   timestamp=self.now_ms, keys=keys, control=control)
        self._segment(len(batch)).write(batch)
        self._size += len(batch)
        self.next_offset += len(values)
        self.records_written += len(values)
        self.now_ms += 7
        return base

    def append(self, records: Sequence[tuple[Any, int]]) -> int:
        """One batch of metadata records; returns its base offset."""
        return self.append_raw([encode_metadata_record(r, v) for r, v in records])

    def append_control(self, control_type: int, message: Any) -> int:
        return self.append_raw([message.encode(0)], keys=[control_key(control_type)], control=True)

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def write_snapshot(directory: Path, *, end_offset: int, epoch: int,
                   records: Sequence[tuple[Any, int]], timestamp: int = START_MS) -> Path:
    """`<end offset>-<epoch>.checkpoint`: header batch, one data batch, footer batch."""
    from kraftpy.protocol.messages.snapshot_footer_record import SnapshotFooterRecord
    from kraftpy.protocol.messages.snapshot_header_record import SnapshotHeaderRecord

    header = SnapshotHeaderRecord(version=0, last_contained_log_timestamp=timestamp)
    parts = [build_record_batch([header.encode(0)], keys=[control_key(SNAPSHOT_HEADER)],
                                control=True, partition_leader_epoch=epoch, timestamp=timestamp)]
    n = 1
    if records:
        values = [encode_metadata_record(r, v) for r, v in records]
        parts.append(build_record_batch(values, base_offset=1, partition_leader_epoch=epoch,
                                        timestamp=timestamp))
        n += len(values)
    parts.append(build_record_batch([SnapshotFooterRecord(version=0).encode(0)],
                                    keys=[control_key(SNAPSHOT_FOOTER)], control=True,
                                    base_offset=n, partition_leader_epoch=epoch,
                                    timestamp=timestamp))
    path = Path(directory) / f"{end_offset:020d}-{epoch:010d}.checkpoint"
    path.write_bytes(b"".join(parts))
    return path


def register_broker(broker_id: int, epoch: int, port: int = 9092) -> tuple[Any, int]:
    from kraftpy.protocol.records.register_broker_record import BrokerEndpoint, RegisterBrokerRecord

    return RegisterBrokerRecord(
        broker_id=broker_id, broker_epoch=epoch, incarnation_id=uuid.UUID(int=broker_id << 64 | epoch),
        end_points=[BrokerEndpoint(name="PLAINTEXT", host="127.0.0.1", port=port)],
        rack=None, fenced=True, log_dirs=[uuid.UUID(int=broker_id + 1000)],
    ), 3


def producer_ids(broker_id: int, epoch: int, next_id: int) -> tuple[Any, int]:
    from kraftpy.protocol.records.producer_ids_record import ProducerIdsRecord

    return ProducerIdsRecord(broker_id=broker_id, broker_epoch=epoch, next_producer_id=next_id), 0


def registration_change(broker_id: int, epoch: int, *, fenced: int = 0,
                        shutdown: int = 0) -> tuple[Any, int]:
    from kraftpy.protocol.records.broker_registration_change_record import (
        BrokerRegistrationChangeRecord,
    )

    return BrokerRegistrationChangeRecord(broker_id=broker_id, broker_epoch=epoch, fenced=fenced,
                                          in_controlled_shutdown=shutdown), 1 if shutdown else 0


def no_op() -> tuple[Any, int]:
    from kraftpy.protocol.records.no_op_record import NoOpRecord

    return NoOpRecord(), 0


def synthetic_cluster(directory: Path, *, records: int, segment_bytes: int = 1 << 20,
                      brokers: int = 3, seed: int = 7, max_batch: int = 40) -> MetadataLogWriter:
    """A plausible busy log: registrations, id blocks, fencing, topics and partition changes,
    NoOps; producer ids strictly increasing so an audit of it finds nothing."""
    from kraftpy.protocol.records.partition_change_record import PartitionChangeRecord
    from kraftpy.protocol.records.partition_record import PartitionRecord
    from kraftpy.protocol.records.topic_record import TopicRecord

    rng = random.Random(seed)
    w = MetadataLogWriter(directory, segment_bytes=segment_bytes)
    epochs = {}
    for b in range(1, brokers + 1):
        epochs[b] = w.next_offset
        w.append([register_broker(b, w.next_offset)])
    next_id = 0
    topics: list[uuid.UUID] = []
    while w.records_written < records:
        batch: list[tuple[Any, int]] = []
        for _ in range(rng.randint(1, max_batch)):
            roll = rng.random()
            b = rng.randint(1, brokers)
            if roll < 0.30:
                batch.append(no_op())
            elif roll < 0.42:
                next_id += 1000
                batch.append(producer_ids(b, epochs[b], next_id))
            elif roll < 0.52:
                batch.append(registration_change(b, epochs[b], fenced=rng.choice((1, -1))))
            elif roll < 0.72 and topics:
                batch.append((PartitionChangeRecord(
                    partition_id=rng.randint(0, 5), topic_id=rng.choice(topics),
                    leader=b, isr=[b]), 0))
            elif roll < 0.92 and topics:
                batch.append((PartitionRecord(
                    partition_id=rng.randint(0, 5), topic_id=rng.choice(topics), replicas=[b],
                    isr=[b], leader=b), 0))
            else:
                topic = uuid.UUID(int=rng.getrandbits(128))
                topics.append(topic)
                batch.append((TopicRecord(name=f"topic-{len(topics)}", topic_id=topic), 0))
        w.append(batch)
    w.close()
    return w


def realistic_cluster(directory: Path, *, records: int, segment_bytes: int = 1 << 20,
                      brokers: int = 3, seed: int = 7) -> MetadataLogWriter:
    """A log shaped like a real cluster's: one NoOpRecord batch every 500 ms
    (`metadata.max.idle.interval.ms`), so >95% of records are NoOps in one-record batches,
    with the occasional topic creation (topic, partitions and configs in one batch), leader
    move, producer-id block, fence/unfence or broker restart in between."""
    from kraftpy.protocol.records.config_record import ConfigRecord
    from kraftpy.protocol.records.partition_change_record import PartitionChangeRecord
    from kraftpy.protocol.records.partition_record import PartitionRecord
    from kraftpy.protocol.records.topic_record import TopicRecord

    rng = random.Random(seed)
    w = MetadataLogWriter(directory, segment_bytes=segment_bytes)
    epochs = {}
    for b in range(1, brokers + 1):
        epochs[b] = w.next_offset
        w.append([register_broker(b, w.next_offset)])
    noop = [encode_metadata_record(*no_op())]
    next_id = 0
    topics: list[tuple[uuid.UUID, int]] = []
    tick = w.now_ms
    while w.records_written < records:
        tick += 500
        w.now_ms = tick
        w.append_raw(noop)
        roll = rng.random()
        b = rng.randint(1, brokers)
        event: list[tuple[Any, int]] = []
        if roll < 0.003:
            topic = uuid.UUID(int=rng.getrandbits(128))
            parts = rng.choice((1, 3, 6, 12))
            topics.append((topic, parts))
            event.append((TopicRecord(name=f"topic-{len(topics)}", topic_id=topic), 0))
            for p in range(parts):
                replicas = [(b + i) % brokers + 1 for i in range(min(3, brokers))]
                event.append((PartitionRecord(partition_id=p, topic_id=topic, replicas=replicas,
                                              isr=replicas, leader=replicas[0]), 0))
            for key in rng.sample(("retention.ms", "cleanup.policy", "min.insync.replicas"),
                                  rng.randint(0, 3)):
                event.append((ConfigRecord(resource_type=2, resource_name=f"topic-{len(topics)}",
                                           name=key, value=str(rng.randint(1, 10**8))), 0))
        elif roll < 0.011 and topics:
            topic, parts = rng.choice(topics)
            event.append((PartitionChangeRecord(partition_id=rng.randrange(parts), topic_id=topic,
                                                leader=b, isr=[b]), 0))
        elif roll < 0.015:
            next_id += 1000
            event.append(producer_ids(b, epochs[b], next_id))
        elif roll < 0.019:
            event.append(registration_change(b, epochs[b], fenced=rng.choice((1, -1))))
        elif roll < 0.020:
            epochs[b] = w.next_offset
            event.append(register_broker(b, w.next_offset))
        elif roll < 0.022:
            event.append((ConfigRecord(resource_type=4, resource_name=str(b),
                                       name="log.cleaner.threads", value=str(rng.randint(1, 8))), 0))
        if event:
            w.now_ms = tick + rng.randint(1, 400)
            w.append(event)
    w.close()
    return w
