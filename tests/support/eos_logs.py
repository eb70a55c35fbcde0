"""Kafka data logs made to order, for the exactly-once audit's tests and benchmark: a broker's
log directory (meta.properties, partition folders), batches with any producer id, epoch,
sequence and transactional bit, transaction markers, producer-state snapshots and transaction
indexes in Kafka's formats, and a metadata log that grants producer-id blocks.

    log_dir = broker_dir(tmp / "b1", cluster="c", node=1)
    p = PartitionLog(log_dir / "orders-0")
    p.data(pid=1000, epoch=0, seq=0, count=5)                      # offsets 0..4
    p.data(pid=1001, epoch=3, seq=0, count=2, transactional=True)
    p.marker(pid=1001, epoch=4, commit=True)
    p.close()
    metadata_log(log_dir, blocks=[(1, 1000)])                      # grants 1000..1999 to broker 1
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path

import crc32c
from kraftpy.protocol.control_records import control_key, end_txn_marker
from kraftpy.protocol.record_batch import BATCH_HEADER, RECORD_BATCH_OVERHEAD, build_record_batch

from support.metadata_logs import MetadataLogWriter, producer_ids, register_broker

START_MS = 1_760_000_000_000
CLUSTER = "eosTestClusterAAAAAAAAA"
ABORT, COMMIT = 0, 1


def broker_dir(path: Path, *, cluster: str = CLUSTER, node: int = 1) -> Path:
    """A log directory with the meta.properties Kafka writes into each of `log.dirs`."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "meta.properties").write_text(
        f"#\n#Mon Jan 01 00:00:00 UTC 2026\nnode.id={node}\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\n"
        f"version=1\ncluster.id={cluster}\n")
    return path


def batch_bytes(records: bytes, count: int, *, base_offset: int, leader_epoch: int = 0,
                attributes: int = 0, first_ts: int = START_MS, max_ts: int = START_MS,
                producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """A v2 batch around an already encoded records region (offset deltas from 0), its CRC
    computed: building the records once and reusing them keeps large logs quick to write."""
    head = BATCH_HEADER.pack(base_offset, RECORD_BATCH_OVERHEAD - 12 + len(records),
                             leader_epoch, 2, 0, attributes, count - 1, first_ts, max_ts,
                             producer_id, producer_epoch, base_sequence, count)
    crc = crc32c.crc32c(head[21:] + records)
    return head[:17] + struct.pack(">I", crc) + head[21:] + records


def records_region(values: Sequence[bytes | None], keys: Sequence[bytes | None] | None = None,
                   timestamps: Sequence[int] | None = None) -> bytes:
    """The records part of a batch (what follows the 61-byte header)."""
    return build_record_batch(values, keys=keys, timestamps=timestamps)[RECORD_BATCH_OVERHEAD:]


def with_crc(batch: bytes) -> bytes:
    """The batch with its CRC recomputed (after an edit inside the CRC's range)."""
    return batch[:17] + struct.pack(">I", crc32c.crc32c(batch[21:])) + batch[21:]


class PartitionLog:
    """Appends batches to a partition folder's segments as a broker would (offsets in order,
    one segment per `roll()`)."""

    def __init__(self, folder: Path, *, leader_epoch: int = 0, start_ms: int = START_MS,
                 base_offset: int = 0) -> None:
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.leader_epoch = leader_epoch
        self.now_ms = start_ms
        self.next_offset = base_offset
        self.segments: list[Path] = []
        self.last = b""  # the last batch written
        self._file = None

    def _out(self):
        if self._file is None:
            path = self.folder / f"{self.next_offset:020d}.log"
            self.segments.append(path)
            self._file = path.open("wb")
        return self._file

    def write(self, batch: bytes) -> None:
        self._out().write(batch)
        self.last = batch

    def again(self, batch: bytes) -> tuple[int, int]:
        """The very same batch appended again at the next offsets (the base offset is outside
        the CRC, so it is the same batch as far as the CRC tells)."""
        base = self.next_offset
        count = struct.unpack_from(">i", batch, 57)[0]
        self.write(struct.pack(">q", base) + batch[8:])
        self.next_offset += count
        return base, base + count - 1

    def data(self, pid: int = -1, epoch: int = -1, seq: int = -1, count: int = 1, *,
             transactional: bool = False, value: bytes = b"v") -> tuple[int, int]:
        """A data batch of `count` records; (base offset, last offset)."""
        base = self.next_offset
        self.now_ms += 3
        region = records_region([value] * count, keys=[b"k"] * count)
        self.write(batch_bytes(region, count, base_offset=base, leader_epoch=self.leader_epoch,
                               attributes=0x10 if transactional else 0, first_ts=self.now_ms,
                               max_ts=self.now_ms, producer_id=pid, producer_epoch=epoch,
                               base_sequence=seq))
        self.next_offset += count
        return base, base + count - 1

    def marker(self, pid: int, epoch: int, *, commit: bool, coordinator_epoch: int = 0) -> int:
        """A COMMIT or ABORT marker; its offset."""
        base = self.next_offset
        self.now_ms += 3
        region = records_region([end_txn_marker(coordinator_epoch)],
                                keys=[control_key(COMMIT if commit else ABORT)])
        self.write(batch_bytes(region, 1, base_offset=base, leader_epoch=self.leader_epoch,
                               attributes=0x30, first_ts=self.now_ms, max_ts=self.now_ms,
                               producer_id=pid, producer_epoch=epoch))
        self.next_offset += 1
        return base

    def roll(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def close(self) -> None:
        self.roll()


_ENTRY = struct.Struct(">qhiqiqiq")


def write_producer_snapshot(folder: Path, offset: int,
                            entries: Sequence[tuple[int, int, int, int, int, int, int, int]]
                            ) -> Path:
    """`<offset>.snapshot` in ProducerStateManager's format; each entry is (producer id, epoch,
    last sequence, last offset, offset delta, timestamp, coordinator epoch, current txn first
    offset)."""
    body = struct.pack(">i", len(entries)) + b"".join(_ENTRY.pack(*e) for e in entries)
    path = Path(folder) / f"{offset:020d}.snapshot"
    path.write_bytes(struct.pack(">hI", 1, crc32c.crc32c(body)) + body)
    return path


def write_txn_index(folder: Path, base_offset: int,
                    entries: Sequence[tuple[int, int, int, int]]) -> Path:
    """`<base offset>.txnindex`: (producer id, first offset, last offset, last stable offset)
    of each aborted transaction whose marker is in that segment."""
    path = Path(folder) / f"{base_offset:020d}.txnindex"
    path.write_bytes(b"".join(struct.pack(">hqqqq", 0, *e) for e in entries))
    return path


def metadata_log(log_dir: Path, *, blocks: Sequence[tuple[int, int]],
                 start_ms: int = START_MS, end_ms: int | None = None) -> MetadataLogWriter:
    """`__cluster_metadata-0` with each broker's registration and, per (broker, first id), a
    ProducerIdsRecord granting the 1000 ids from `first id`; a last record at `end_ms`."""
    w = MetadataLogWriter(Path(log_dir) / "__cluster_metadata-0", start_ms=start_ms)
    for broker in sorted({b for b, _ in blocks}):
        w.append([register_broker(broker, broker)])
    for broker, first in blocks:
        w.append([producer_ids(broker, broker, first + 1000)])
    if end_ms is not None:
        from support.metadata_logs import no_op

        w.now_ms = end_ms
        w.append([no_op()])
    w.close()
    return w
