"""The transaction log on disk: Kafka's `__transaction_state-<n>` partition directories.

Each partition is a `PartitionLog` (its segments, indexes, leader-epoch-checkpoint and
partition.metadata, as Kafka keeps them), opened when found at startup or created, with the
topic id of the record that first needs it, when a record goes there. Batches carry the
partition's leader epoch (never below the last one in its file), so a Kafka node taking the
directory over reads them as its own partitions' history.

To the quorum the partitions are one log: `accumulate` gives a result's records one count
(`log_end_offset`, over all partitions, not a file offset), a flush round writes and fsyncs
every partition written since the last round and moves `durable` to the count it
covered. A result's records in one partition share a batch; a result over several
partitions (only the migration of the former layout writes one) is durable once the round
that covers it is.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraftpy.controller.log import files
from kraftpy.controller.log.accumulator import BatchAccumulator
from kraftpy.controller.log.partition_log import FlushTicket, PartitionLog
from kraftpy.protocol.txn_log import TOPIC, encode_key, encode_value
from kraftpy.protocol.uuid import kafka_uuid_str

log = logging.getLogger("kraftpy.log")

PARTITION_DIR = re.compile(re.escape(TOPIC) + r"-(0|[1-9][0-9]{0,8})")


@dataclass
class TxnFlush:
    """One commit round's share of the transaction log: a ticket per partition written."""

    end: int
    tickets: list[tuple[int, FlushTicket]] = field(default_factory=list)

    @property
    def fds(self) -> list[int]:
        return [fd for _, ticket in self.tickets for fd in ticket.fds]

    def fsync(self) -> None:
        for _, ticket in self.tickets:
            ticket.fsync()

    def release(self) -> None:
        for _, ticket in self.tickets:
            ticket.release()


@dataclass
class TxnLogRecord:
    """A record read back: its partition, offset in that partition, key and value bytes."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None


class TransactionStateLog:
    """Every `__transaction_state-<n>` directory of one log dir."""

    def __init__(self, log_dir: Path, *, segment_bytes: int, read_only: bool) -> None:
        self.log_dir = Path(log_dir)
        self.segment_bytes = segment_bytes
        self.read_only = read_only
        self.partitions: dict[int, PartitionLog] = {}
        self._open: dict[int, BatchAccumulator] = {}  # each written partition's open batch
        self.topic_ids: dict[int, str | None] = {}  # each directory's partition.metadata
        self.log_end_offset = 0
        self.durable = 0
        self._dirty: set[int] = set()

    @classmethod
    def open(cls, log_dir: Path, *, clean: bool, segment_bytes: int,
             read_only: bool = False) -> TransactionStateLog:
        """Recover every partition directory found (renamed ones, `-stray` or `-delete`,
        are not the topic's and are left alone, as Kafka leaves them)."""
        self = cls(log_dir, segment_bytes=segment_bytes, read_only=read_only)
        found = sorted((int(m.group(1)), p) for p in self.log_dir.iterdir()
                       if (m := PARTITION_DIR.fullmatch(p.name)) and p.is_dir())
        for index, path in found:
            self.topic_ids[index] = files.read_partition_metadata(path)
            self.partitions[index] = PartitionLog.open(
                path, recovery_point=None if clean else 0, segment_bytes=segment_bytes,
                read_only=read_only, contiguous=False)
        return self

    def disk_topic_id(self) -> str | None:
        """The topic id every partition directory names (None without directories);
        `LogDirError` when they disagree, since then they are not one topic."""
        ids = {i for i in self.topic_ids.values() if i is not None}
        if len(ids) > 1:
            named = ", ".join(f"{TOPIC}-{p}: {t}" for p, t in sorted(self.topic_ids.items()))
            raise files.LogDirError(
                f"{self.log_dir}: the {TOPIC} partition directories name different topic ids "
                f"({named}); refusing to start on them")
        return next(iter(ids), None)

    def check_topic(self, topic_id: str) -> None:
        """The metadata log's topic must be the one every directory was written for."""
        for index, found in sorted(self.topic_ids.items()):
            if found is not None and found != topic_id:
                path = self.log_dir / f"{TOPIC}-{index}" / files.PARTITION_METADATA
                raise files.LogDirError(
                    f"{path}: topic id {found}, but the metadata log's {TOPIC} is {topic_id}; "
                    "the directory is not this topic's partition (Kafka would set it aside "
                    "as stray): move it away to start")

    def last_epochs(self) -> dict[int, int]:
        """Each partition's last leader epoch on disk (its leader-epoch-checkpoint)."""
        return {i: p.leader_epochs[-1][0] for i, p in self.partitions.items()
                if p.leader_epochs}

    def read(self) -> Iterator[TxnLogRecord]:
        """Every record, partition by partition, each in offset order."""
        self._seal()
        for index in sorted(self.partitions):
            for batch in self.partitions[index].read(0):
                if batch.is_control:
                    continue
                for record in batch.records():
                    yield TxnLogRecord(index, record.offset, record.key, record.value)

    def set_end(self, count: int) -> None:
        """After recovery: `count` records were replayed, all of them durable."""
        self.log_end_offset = self.durable = count

    def _partition(self, index: int, topic_id: Any) -> PartitionLog:
        text = kafka_uuid_str(topic_id)
        part = self.partitions.get(index)
        if part is None:
            part = PartitionLog.open(self.log_dir / f"{TOPIC}-{index}", topic_id=text,
                                     segment_bytes=self.segment_bytes, contiguous=False)
            self.partitions[index] = part
            self.topic_ids[index] = text
            log.info("created %s-%d (topic id %s)", TOPIC, index, text)
        elif self.topic_ids.get(index) is None:
            files.write_partition_metadata(part.directory, text)
            self.topic_ids[index] = text
        elif self.topic_ids[index] != text:
            raise files.LogDirError(
                f"{part.directory / files.PARTITION_METADATA}: topic id "
                f"{self.topic_ids[index]}, but a record of topic {text} goes there")
        return part

    def accumulate(self, records: Sequence[Any], now_ms: int) -> int:
        """A result's TxnRecords, each partition's in one batch (later results may share it
        until the next flush); the count of the first."""
        first = self.log_end_offset
        by_partition: dict[int, list[Any]] = {}
        for record in records:
            by_partition.setdefault(record.partition.index, []).append(record)
        for index, group in by_partition.items():
            part = self._partition(index, group[0].partition.topic_id)
            epoch = max(group[0].partition.leader_epoch,
                        part.leader_epochs[-1][0] if part.leader_epochs else 0)
            accumulator = self._open.get(index)
            if accumulator is None:
                accumulator = self._open[index] = BatchAccumulator(part)
            accumulator.add(
                [None if r.value is None else encode_value(r.value, r.value_version)
                 for r in group],
                keys=[encode_key(r.key) for r in group], leader_epoch=epoch, timestamp=now_ms)
            self._dirty.add(index)
        self.log_end_offset = first + len(records)
        return first

    def _seal(self) -> None:
        for accumulator in self._open.values():
            accumulator.seal()

    def begin_flush(self) -> TxnFlush:
        self._seal()
        dirty, self._dirty = sorted(self._dirty), set()
        return TxnFlush(self.log_end_offset,
                        [(i, self.partitions[i].begin_flush()) for i in dirty])

    def complete_flush(self, flush: TxnFlush) -> int:
        for index, ticket in flush.tickets:
            self.partitions[index].complete_flush(ticket)
        self.durable = max(self.durable, flush.end)
        return self.durable

    def flush(self) -> int:
        flush = self.begin_flush()
        try:
            flush.fsync()
        finally:
            flush.release()
        return self.complete_flush(flush)

    def close(self) -> None:
        self._seal()
        for part in self.partitions.values():
            part.close()
