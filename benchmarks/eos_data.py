"""Realistic Kafka data logs for benchmarks/eos_audit.py, written once into a folder.

Three brokers' log directories (meta.properties, each a full replica of every partition, as
replication factor 3 leaves them), a metadata log granting the producer-id blocks, and:

- `orders` (12 partitions): 60 idempotent producers, batches of 1-64 records of ~200-600
  bytes, lz4, as linger.ms=5 leaves them under uneven load;
- `payments` (6 partitions): 16 transactional producers (transactions v2: each marker bumps
  the epoch), transactions of 1-4 batches over 1-3 partitions, one in ten aborted, their
  offsets committed to `__consumer_offsets` in the same transaction (the group coordinator's
  batches, base sequence 0);
- `clicks` (6 partitions): batches of 1-200 small records, zstd, from producers without
  idempotence (no producer id) and a few idempotent ones;
- segments rolled at 16 MB, with the producer-state snapshot Kafka writes at each roll and at
  a clean shutdown, the transaction index of aborted transactions, an (empty) offset index,
  and a `__transaction_state` partition with each transactional id's last state.

Nothing here is random at run time: a seed fixes the data, so every run reads the same bytes.
"""

from __future__ import annotations

import json
import random
import shutil
import struct
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import cramjam

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from support.eos_logs import (  # noqa: E402 - after the path
    batch_bytes,
    broker_dir,
    metadata_log,
    records_region,
    write_producer_snapshot,
    write_txn_index,
)

CLUSTER = "eosBenchClusterAAAAAAAA"
BROKERS = (1, 2, 3)
SEGMENT_BYTES = 16 << 20
START_MS = 1_780_000_000_000
LZ4, ZSTD = 3, 4


@dataclass
class _State:
    """One producer's state in one partition, as ProducerStateManager keeps it."""

    epoch: int = -1
    last_seq: int = -1
    last_offset: int = -1
    delta: int = 0
    timestamp: int = -1
    coordinator_epoch: int = -1
    txn_first: int = -1

    def entry(self, pid: int) -> tuple[int, int, int, int, int, int, int, int]:
        return (pid, self.epoch, self.last_seq, self.last_offset, self.delta, self.timestamp,
                self.coordinator_epoch, self.txn_first)


@dataclass
class _Partition:
    folder: Path
    next_offset: int = 0
    size: int = 0
    segment_base: int = 0
    out: object = None
    states: dict[int, _State] = field(default_factory=dict)
    aborted: list[tuple[int, int, int, int]] = field(default_factory=list)  # this segment's
    batches: int = 0
    records: int = 0

    def open(self) -> None:
        self.segment_base = self.next_offset
        (self.folder / f"{self.segment_base:020d}.index").write_bytes(b"")
        self.out = (self.folder / f"{self.segment_base:020d}.log").open("wb")
        self.size = 0

    def roll(self, final: bool = False) -> None:
        self.out.close()  # type: ignore[attr-defined]
        if self.aborted:
            write_txn_index(self.folder, self.segment_base, self.aborted)
            self.aborted = []
        write_producer_snapshot(self.folder, self.next_offset,
                                [s.entry(pid) for pid, s in sorted(self.states.items())])
        if not final:
            self.open()

    def append(self, batch: bytes, count: int) -> int:
        if self.size and self.size + len(batch) > SEGMENT_BYTES:
            self.roll()
        base = self.next_offset
        self.out.write(struct.pack(">q", base) + batch[8:])  # type: ignore[attr-defined]
        self.size += len(batch)
        self.next_offset += count
        self.batches += 1
        self.records += count
        return base


class _Regions:
    """Encoded (and compressed) records regions, made once per shape and reused."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.cache: dict[tuple[int, int, int], bytes] = {}

    def get(self, count: int, size: int, codec: int) -> bytes:
        size -= size % 50  # a few shapes, each reused
        key = (count, size, codec)
        found = self.cache.get(key)
        if found is None:  # values compress about as text does (each a quarter repeated)
            values = [self.rng.randbytes(size // 4) * 4 for _ in range(count)]
            keys = [f"key-{i % 97}".encode() for i in range(count)]
            region = records_region(values, keys=keys, timestamps=list(range(count)))
            if codec == LZ4:
                region = bytes(cramjam.lz4.compress(region))
            elif codec == ZSTD:
                region = bytes(cramjam.zstd.compress(region))
            found = self.cache[key] = region
        return found


def generate(folder: Path, mb: int, seed: int = 7) -> dict[str, int]:
    """About `mb` MB of segments over the three replicas (of `mb / 3` unique); the counts."""
    marker = folder / "generated.json"
    if marker.exists():
        return json.loads(marker.read_text())
    if folder.exists():
        shutil.rmtree(folder)
    rng = random.Random(seed)
    regions = _Regions(rng)
    leader = broker_dir(folder / f"broker-{BROKERS[0]}", cluster=CLUSTER, node=BROKERS[0])
    topics = {"orders": 12, "payments": 6, "clicks": 6}
    parts = {(t, i): _Partition(leader / f"{t}-{i}") for t, n in topics.items() for i in range(n)}
    parts[("__consumer_offsets", 0)] = _Partition(leader / "__consumer_offsets-0")
    for p in parts.values():
        p.folder.mkdir(parents=True)
        p.open()
    # ids: broker 1's blocks from 1000 on
    orders = [1000 + i for i in range(60)]
    clicks_idempotent = [1060 + i for i in range(4)]
    payments = [1100 + i for i in range(16)]
    sequences: dict[tuple[int, str, int], tuple[int, int]] = {}  # (pid, topic, part) -> (epoch, next)
    epochs = {pid: 0 for pid in payments}
    now = START_MS
    unique = mb * 1_000_000 // len(BROKERS)
    written = 0
    coordinator_epoch = 0
    while written < unique:
        now += 1
        roll = rng.random()
        if roll < 0.55:
            written += _idempotent(parts, regions, rng, rng.choice(orders), "orders", 12,
                                   sequences, now, LZ4, rng.randint(1, 64), rng.randint(200, 600))
        elif roll < 0.75:
            if rng.random() < 0.7:
                count = rng.randint(1, 200)
                region = regions.get(count, 100, ZSTD)
                p = parts[("clicks", rng.randrange(6))]
                batch = batch_bytes(region, count, base_offset=0, attributes=ZSTD,
                                    first_ts=now, max_ts=now + count - 1)
                p.append(batch, count)
                written += len(batch)
            else:
                written += _idempotent(parts, regions, rng, rng.choice(clicks_idempotent),
                                       "clicks", 6, sequences, now, ZSTD,
                                       rng.randint(1, 200), 100)
        else:
            pid = rng.choice(payments)
            written += _transaction(parts, regions, rng, pid, epochs, now, coordinator_epoch)
    for p in parts.values():
        p.roll(final=True)
    metadata_log(leader, blocks=[(BROKERS[0], 1000)], start_ms=START_MS - 60_000,
                 end_ms=now + 1000)
    _transaction_state(leader, payments, epochs, now)
    for broker in BROKERS[1:]:  # the followers' replicas: the same bytes
        target = broker_dir(folder / f"broker-{broker}", cluster=CLUSTER, node=broker)
        for child in leader.iterdir():
            if child.is_dir():
                shutil.copytree(child, target / child.name)
    counts = {"bytes": sum(f.stat().st_size for f in folder.rglob("*.log")),
              "records": len(BROKERS) * sum(p.records for p in parts.values()),
              "batches": len(BROKERS) * sum(p.batches for p in parts.values())}
    marker.write_text(json.dumps(counts))
    return counts


def _idempotent(parts: dict, regions: _Regions, rng: random.Random, pid: int, topic: str,
                partitions: int, sequences: dict, now: int, codec: int, count: int,
                size: int) -> int:
    partition = rng.randrange(partitions)
    p = parts[(topic, partition)]
    epoch, seq = sequences.get((pid, topic, partition), (0, 0))
    region = regions.get(count, size, codec)
    batch = batch_bytes(region, count, base_offset=0, attributes=codec, first_ts=now,
                        max_ts=now + count - 1, producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq)
    base = p.append(batch, count)
    last_seq = (seq + count - 1) % 0x80000000
    sequences[(pid, topic, partition)] = (epoch, (last_seq + 1) % 0x80000000)
    s = p.states.setdefault(pid, _State())
    s.epoch, s.last_seq, s.last_offset, s.delta, s.timestamp = (
        epoch, last_seq, base + count - 1, count - 1, now + count - 1)
    return len(batch)


def _transaction(parts: dict, regions: _Regions, rng: random.Random, pid: int,
                 epochs: dict[int, int], now: int, coordinator_epoch: int) -> int:
    """One transactions-v2 transaction: data at the producer's epoch, the offsets commit, then
    each partition's marker at the epoch one up (which the next transaction writes with)."""
    epoch = epochs[pid]
    written = 0
    touched = [("payments", i) for i in rng.sample(range(6), rng.randint(1, 3))]
    touched.append(("__consumer_offsets", 0))
    for key in touched:
        p = parts[key]
        s = p.states.setdefault(pid, _State())
        seq = 0
        for _ in range(1 if key[0] == "__consumer_offsets" else rng.randint(1, 4)):
            count = 1 if key[0] == "__consumer_offsets" else rng.randint(1, 20)
            region = regions.get(count, 120 if key[0] == "__consumer_offsets" else 500, 0)
            batch = batch_bytes(region, count, base_offset=0, attributes=0x10, first_ts=now,
                                max_ts=now + count - 1, producer_id=pid, producer_epoch=epoch,
                                base_sequence=0 if key[0] == "__consumer_offsets" else seq)
            base = p.append(batch, count)
            if s.txn_first < 0:
                s.txn_first = base
            last_seq = 0 if key[0] == "__consumer_offsets" else seq + count - 1
            if s.epoch != epoch:
                s.epoch = epoch
            s.last_seq, s.last_offset, s.delta, s.timestamp = (
                last_seq, base + count - 1, count - 1, now + count - 1)
            seq += count
            written += len(batch)
    abort = rng.random() < 0.1
    for key in touched:
        p = parts[key]
        s = p.states[pid]
        region = _marker_region(abort, coordinator_epoch)
        batch = batch_bytes(region, 1, base_offset=0, attributes=0x30, first_ts=now + 30,
                            max_ts=now + 30, producer_id=pid, producer_epoch=epoch + 1)
        offset = p.append(batch, 1)
        if abort:
            p.aborted.append((pid, s.txn_first, offset, offset + 1))
        # the marker's epoch is new: the producer's batches are cleared (ProducerStateEntry)
        s.epoch, s.last_seq, s.last_offset, s.delta = epoch + 1, -1, -1, 0
        s.timestamp, s.coordinator_epoch, s.txn_first = now + 30, coordinator_epoch, -1
        written += len(batch)
    epochs[pid] = epoch + 1
    return written


_MARKERS: dict[tuple[bool, int], bytes] = {}


def _marker_region(abort: bool, coordinator_epoch: int) -> bytes:
    from kraftpy.protocol.control_records import control_key, end_txn_marker

    key = (abort, coordinator_epoch)
    if key not in _MARKERS:
        _MARKERS[key] = records_region([end_txn_marker(coordinator_epoch)],
                                       keys=[control_key(0 if abort else 1)])
    return _MARKERS[key]


def _transaction_state(log_dir: Path, payments: list[int], epochs: dict[int, int],
                       now: int) -> None:
    from kraftpy.protocol import txn_log
    from kraftpy.protocol.record_batch import build_record_batch
    from kraftpy.protocol.records.transaction_log_value import TransactionLogValue

    values = [txn_log.encode_value(TransactionLogValue(
        producer_id=pid, producer_epoch=epochs[pid], transaction_timeout_ms=60000,
        transaction_status=4, transaction_partitions=[],
        transaction_last_update_timestamp_ms=now, transaction_start_timestamp_ms=now))
        for pid in payments]
    keys = [txn_log.encode_key(f"payments-{i}") for i in range(len(payments))]
    folder = log_dir / "__transaction_state-0"
    folder.mkdir()
    (folder / "00000000000000000000.log").write_bytes(build_record_batch(values, keys=keys,
                                                                         timestamp=now))


def segment_files(folder: Path) -> Iterator[Path]:
    """The segments the audit replays: every partition's but the metadata log's."""
    return iter(sorted(p for p in folder.rglob("*.log")
                       if not p.parent.name.startswith("__cluster_metadata")))
