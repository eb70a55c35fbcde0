"""The one replay: a snapshot and a log suffix into anything that `replay`s metadata records.

Every state kraftpy holds is built here and nowhere else: a node's controller at startup, a
follower's as the quorum commits records, the controller rebuilt after an installed snapshot
or a lost leadership, the committed image snapshots are taken from, and the state
`kraftpy metadata-state` prints. So none of them can disagree about what a log means.

Kafka's rules: a snapshot's records stand at its last contained offset (end offset - 1); a
log record at its own offset; control batches (LeaderChange, voters, snapshot markers) hold
no metadata records and are skipped. A target is anything with
`replay(record, version, offset)`; several targets get the same decoded record, decoded once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from kraftpy.protocol.metadata_frame import decode_metadata_record


class ReplayTarget(Protocol):
    def replay(self, record: Any, version: int, offset: int) -> None: ...


def snapshot_records(values: Iterable[bytes], end_offset: int
                     ) -> Iterator[tuple[Any, int, int]]:
    """(record, version, offset) of a snapshot's record values: all at `end_offset - 1`."""
    last = end_offset - 1
    for value in values:
        record, version = decode_metadata_record(value)
        yield record, version, last


def log_records(batches: Iterable[Any], start: int, end: int | None
                ) -> Iterator[tuple[Any, int, int]]:
    """(record, version, offset) of the metadata records of `batches` (RecordBatch, in
    order) at offsets in [start, end); `end` None: to the last batch."""
    for batch in batches:
        if end is not None and batch.base_offset >= end:
            return
        if batch.is_control:
            continue
        offset = batch.base_offset
        for value in batch.values():
            if offset >= start and (end is None or offset < end):
                record, version = decode_metadata_record(value)  # type: ignore[arg-type]
                yield record, version, offset
            offset += 1


def apply(targets: Sequence[ReplayTarget], records: Iterable[tuple[Any, int, int]]) -> int:
    """Replay each record into every target, in order; how many records."""
    count = 0
    if len(targets) == 1:
        replay = targets[0].replay
        for record, version, offset in records:
            replay(record, version, offset)
            count += 1
        return count
    for record, version, offset in records:
        for target in targets:
            target.replay(record, version, offset)
        count += 1
    return count


def replay_snapshot_and_log(targets: Sequence[ReplayTarget], snapshot: Any, log: Any,
                            end: int | None) -> tuple[int, int, int]:
    """The newest whole `snapshot` (a `Snapshot`, or None) then `log` (a `PartitionLog`)
    from the snapshot's end (or the log's start) up to `end` (None: the log's end):
    (the offset the targets now stand at, snapshot records, log records)."""
    start = log.log_start_offset
    snapshot_count = 0
    if snapshot is not None and snapshot.snapshot_id is not None:
        sid_end = snapshot.snapshot_id.end_offset
        snapshot_count = apply(targets, snapshot_records(snapshot.iter_values(), sid_end))
        start = max(start, sid_end)
    stop = log.log_end_offset if end is None else end
    log_count = 0
    if stop > start:
        log_count = apply(targets, log_records(log.read(start), start, stop))
    return max(start, stop), snapshot_count, log_count


def replay_transaction_log(controller: Any, files: Any, *, recovered: bool = True) -> int:
    """A lone voter's `__transaction_state` partitions (`log/txn_state.TransactionStateLog`),
    once the metadata log is replayed: each directory must be the metadata log's
    `__transaction_state` (by the topic id in its partition.metadata); with no such topic yet
    (kraftpy's former one-partition layout) the controller adopts the directories' topic id.
    Records count from 0 over all partitions; every one is durable when `recovered` (at
    open). How many records."""
    from kraftpy.protocol.txn_log import decode_key, decode_value
    from kraftpy.protocol.uuid import kafka_uuid_str, parse_kafka_uuid

    txns = controller.transactions
    if txns.topic_id is not None:
        files.check_topic(kafka_uuid_str(txns.topic_id))
    elif (disk := files.disk_topic_id()) is not None:
        txns.adopt(parse_kafka_uuid(disk), files.last_epochs())
    count = 0
    for record in files.read():
        key, _kv = decode_key(record.key)  # type: ignore[arg-type]
        value, _vv = decode_value(record.value)
        controller.replay_txn(key, value, count, record.partition)
        count += 1
    if recovered:
        files.set_end(count)
    return count


class LogMovedOn(FileNotFoundError):
    """The log no longer holds the records after the snapshot a rebuild started from: a
    newer snapshot trimmed it meanwhile (a rebuild starts anew from the newest one)."""


@dataclass
class Rebuild:
    """A controller (and, with `image`, a second one for the committed image) built from the
    newest whole snapshot and the log below `end`: what a node holds when it holds only
    committed records. `run` may go in a worker thread (a large image takes seconds); the
    objects are new, so nothing else touches them meanwhile; the log below `end` is committed,
    so nothing truncates it, but a snapshot written meanwhile may trim its start past the
    snapshot the rebuild reads (`LogMovedOn`), or delete that snapshot (FileNotFoundError)."""

    make_controller: Callable[[], Any]
    snapshot: Any
    log: Any
    end: int
    kraft_version: int
    image: bool
    txn_files: Any = None  # a lone voter's transaction log, replayed too
    txn_durable: int = 0
    controller: Any = None
    image_controller: Any = None
    at: int = 0  # where they stand once built
    written: bool = field(default=False, repr=False)  # (a job's field; a rebuild writes none)
    trimmed_to: Any = field(default=None, repr=False)

    def run(self) -> None:
        controller = self.make_controller()
        controller.features.kraft_version = self.kraft_version
        targets = [controller]
        if self.image:
            image = self.make_controller()
            image.features.kraft_version = self.kraft_version
            targets.append(image)
            self.image_controller = image
        self.at, _, _ = replay_snapshot_and_log(targets, self.snapshot, self.log, self.end)
        needed = (self.snapshot.snapshot_id.end_offset if self.snapshot is not None
                  and self.snapshot.snapshot_id is not None else 0)
        if self.end > needed and self.log.log_start_offset > needed:  # read past a gap
            raise LogMovedOn(f"the log now starts at {self.log.log_start_offset}, past the "
                             f"snapshot ending at {needed} this state was built from")
        if self.txn_files is not None:
            replay_transaction_log(controller, self.txn_files, recovered=False)
        controller.on_committed(self.at, self.txn_durable)
        self.controller = controller
