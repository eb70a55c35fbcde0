"""The small files beside a log: each decoded to a dict, damage reported in it.

Layouts (Kafka's `FileQuorumStateStore`, `MetaProperties`, `LeaderEpochCheckpointFile`,
`PartitionMetadataFile`, `OffsetIndex`, `TimeIndex`, `ProducerStateManager`'s snapshots,
`TransactionIndex`) are small enough to read by hand; none of them is a record batch.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import crc32c

from .paths import FileKind, LogFile


class SmallFileError(ValueError):
    """The file is not in the layout its name promises."""


def read_quorum_state(data: bytes) -> dict[str, Any]:
    try:
        state = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SmallFileError(f"quorum-state is not JSON: {e}") from None
    if not isinstance(state, dict) or "data_version" not in state:
        raise SmallFileError("quorum-state has no data_version")
    return state


def read_properties(data: bytes) -> dict[str, Any]:
    """Java `Properties.store` text: `#` comments, then `key=value` lines in any order."""
    try:
        text = data.decode("iso-8859-1")
    except UnicodeDecodeError as e:  # pragma: no cover - latin-1 decodes every byte
        raise SmallFileError(str(e)) from None
    props: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise SmallFileError(f"line {number} is not key=value: {line[:60]!r}")
        props[key.strip()] = value.strip()
    if "version" not in props:
        raise SmallFileError("meta.properties has no version")
    return props


def read_leader_epoch_checkpoint(data: bytes) -> dict[str, Any]:
    lines = _text_lines(data)
    if len(lines) < 2:
        raise SmallFileError("leader-epoch-checkpoint is shorter than its two header lines")
    version, count = _int(lines[0], 1), _int(lines[1], 2)
    entries = []
    for number, line in enumerate(lines[2:], 3):
        fields = line.split()
        if len(fields) != 2:
            raise SmallFileError(f"line {number} is not '<epoch> <start offset>': {line[:60]!r}")
        entries.append({"epoch": _int(fields[0], number), "startOffset": _int(fields[1], number)})
    if len(entries) != count:
        raise SmallFileError(f"leader-epoch-checkpoint says {count} entries but has {len(entries)}")
    return {"version": version, "entries": entries}


def read_partition_metadata(data: bytes) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for number, line in enumerate(_text_lines(data), 1):
        key, sep, value = line.partition(":")
        if not sep:
            raise SmallFileError(f"line {number} is not 'key: value': {line[:60]!r}")
        fields[key.strip()] = value.strip()
    if "version" not in fields or "topic_id" not in fields:
        raise SmallFileError("partition.metadata needs version and topic_id")
    fields["version"] = _int(fields["version"], 1)
    return fields


def read_offset_index(data: bytes, base_offset: int) -> dict[str, Any]:
    """Entries of (int32 relative offset, int32 position); zero padding ends the list."""
    if len(data) % 8:
        raise SmallFileError(f"offset index size {len(data)} is not a multiple of 8")
    entries = []
    for i, (relative, position) in enumerate(struct.iter_unpack(">ii", data)):
        if i and relative == 0 and position == 0:
            break
        entries.append({"offset": base_offset + relative, "position": position})
    return {"baseOffset": base_offset, "entries": entries}


def read_time_index(data: bytes, base_offset: int) -> dict[str, Any]:
    """Entries of (int64 timestamp, int32 relative offset); zero padding ends the list."""
    if len(data) % 12:
        raise SmallFileError(f"time index size {len(data)} is not a multiple of 12")
    entries = []
    for i, (timestamp, relative) in enumerate(struct.iter_unpack(">qi", data)):
        if i and timestamp == 0 and relative == 0:
            break
        entries.append({"timestamp": timestamp, "offset": base_offset + relative})
    return {"baseOffset": base_offset, "entries": entries}


_PRODUCER_ENTRY = struct.Struct(">qhiqiqiq")
# ProducerSnapshot v1's entry fields, by the names of Kafka's schema (ProducerSnapshot.json).
PRODUCER_FIELDS = ("producerId", "epoch", "lastSequence", "lastOffset", "offsetDelta",
                   "timestamp", "coordinatorEpoch", "currentTxnFirstOffset")


def read_producer_state(data: bytes, base_offset: int) -> dict[str, Any]:
    """A producer-state snapshot (ProducerStateManager's `<offset>.snapshot`): int16 version
    (1), uint32 CRC-32C of everything after it, int32 count, then fixed 46-byte entries.
    `offset` is the log offset the snapshot was taken at: the state after every batch below."""
    if len(data) < 10:
        raise SmallFileError(f"producer-state snapshot of {len(data)} bytes is shorter than 10")
    version, crc, count = struct.unpack_from(">hIi", data)
    if version != 1:
        raise SmallFileError(f"producer-state snapshot version {version} is not 1")
    actual = crc32c.crc32c(data[6:])
    if actual != crc:
        raise SmallFileError(f"producer-state snapshot CRC {crc} does not match {actual}")
    if count < 0 or 10 + count * _PRODUCER_ENTRY.size != len(data):
        raise SmallFileError(f"producer-state snapshot says {count} entries in {len(data)} bytes")
    entries = [dict(zip(PRODUCER_FIELDS, _PRODUCER_ENTRY.unpack_from(data, 10 + i * 46), strict=True))
               for i in range(count)]
    return {"offset": base_offset, "version": version, "entries": entries}


def first_sequence(last_sequence: int, offset_delta: int) -> int:
    """Kafka's DefaultRecordBatch.decrementSequence: sequences wrap at Integer.MAX_VALUE."""
    if last_sequence < offset_delta:
        return 0x7FFFFFFF - (offset_delta - last_sequence) + 1
    return last_sequence - offset_delta


def producer_state_line(entry: dict[str, Any]) -> str:
    """One entry as Kafka 4.1's DumpLogSegments prints it (ProducerStateEntry's fields; the
    batch part only when the entry has a batch, i.e. a last offset)."""
    txn = entry["currentTxnFirstOffset"]
    line = (f"producerId: {entry['producerId']} producerEpoch: {entry['epoch']} "
            f"coordinatorEpoch: {entry['coordinatorEpoch']} currentTxnFirstOffset: "
            f"{'OptionalLong.empty' if txn < 0 else f'OptionalLong[{txn}]'} "
            f"lastTimestamp: {entry['timestamp']} ")
    if entry["lastOffset"] >= 0:
        line += (f"firstSequence: {first_sequence(entry['lastSequence'], entry['offsetDelta'])} "
                 f"lastSequence: {entry['lastSequence']} lastOffset: {entry['lastOffset']} "
                 f"offsetDelta: {entry['offsetDelta']} timestamp: {entry['timestamp']}")
    return line


_ABORTED_TXN = struct.Struct(">hqqqq")
ABORTED_TXN_FIELDS = ("version", "producerId", "firstOffset", "lastOffset", "lastStableOffset")


def read_txn_index(data: bytes, base_offset: int) -> dict[str, Any]:
    """A transaction index (`<offset>.txnindex`): the aborted transactions whose ABORT marker
    is in that segment, 34 bytes each (AbortedTxn v0). Kafka reads whole entries and ignores
    a partial one at the end; so do we, and say so."""
    whole = len(data) - len(data) % _ABORTED_TXN.size
    entries = [dict(zip(ABORTED_TXN_FIELDS, fields, strict=True))
               for fields in _ABORTED_TXN.iter_unpack(data[:whole])]
    for i, entry in enumerate(entries):
        if entry["version"] != 0:
            raise SmallFileError(f"transaction index entry {i} has version {entry['version']}, "
                                 "not 0")
    out: dict[str, Any] = {"baseOffset": base_offset, "entries": entries}
    if whole != len(data):
        out["partialEntryBytes"] = len(data) - whole
    return out


def read_small_file(file: LogFile, data: bytes | None = None) -> dict[str, Any]:
    """Decode one small file; raises SmallFileError for damage, OSError for a missing file."""
    if data is None:
        data = Path(file.path).read_bytes()
    reader = _READERS.get(file.kind)
    if reader is None:
        raise SmallFileError(f"not a small file kind: {file.kind.value}")
    return reader(data, file.base_offset)


def render_small_file(file: LogFile, decoded: dict[str, Any]) -> list[str]:
    """Text lines; index lines in Kafka's dump layout, the rest as key: value."""
    if file.kind is FileKind.OFFSET_INDEX:
        return [f"offset: {e['offset']} position: {e['position']}" for e in decoded["entries"]]
    if file.kind is FileKind.TIME_INDEX:
        return [f"timestamp: {e['timestamp']} offset: {e['offset']}" for e in decoded["entries"]]
    if file.kind is FileKind.LEADER_EPOCH_CHECKPOINT:
        return [f"version: {decoded['version']}"] + [
            f"epoch: {e['epoch']} startOffset: {e['startOffset']}" for e in decoded["entries"]]
    if file.kind is FileKind.PRODUCER_STATE:
        return [producer_state_line(e) for e in decoded["entries"]]
    if file.kind is FileKind.TXN_INDEX:
        return [" ".join(f"{k}: {e[k]}" for k in ABORTED_TXN_FIELDS) for e in decoded["entries"]]
    if file.kind is FileKind.QUORUM_STATE:
        return [json.dumps(decoded, separators=(",", ":"))]
    return [f"{k}: {v}" for k, v in decoded.items()]


def _text_lines(data: bytes) -> list[str]:
    try:
        return [line.strip() for line in data.decode("utf-8").splitlines() if line.strip()]
    except UnicodeDecodeError as e:
        raise SmallFileError(f"not text: {e}") from None


def _int(text: str, line: int) -> int:
    try:
        return int(text)
    except ValueError:
        raise SmallFileError(f"line {line}: {text[:40]!r} is not a number") from None


_READERS: dict[FileKind, Callable[[bytes, int], dict[str, Any]]] = {
    FileKind.QUORUM_STATE: lambda data, _base: read_quorum_state(data),
    FileKind.META_PROPERTIES: lambda data, _base: read_properties(data),
    FileKind.LEADER_EPOCH_CHECKPOINT: lambda data, _base: read_leader_epoch_checkpoint(data),
    FileKind.PARTITION_METADATA: lambda data, _base: read_partition_metadata(data),
    FileKind.OFFSET_INDEX: read_offset_index,
    FileKind.TIME_INDEX: read_time_index,
    FileKind.PRODUCER_STATE: read_producer_state,
    FileKind.TXN_INDEX: read_txn_index,
}
