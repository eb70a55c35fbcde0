"""Which file is which: Kafka names its log files by role and its partition directories by
topic, and the decoder dispatches on both.

Only `__cluster_metadata-*` (with snapshots and `bootstrap.checkpoint`) holds metadata records.
`__transaction_state-*` and `__consumer_offsets-*` hold the coordinators' records; any other
partition holds application data, which only the text dump shows (as Kafka's default decoder).
A segment outside any partition directory (a copied file) is read as metadata.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path


class FileKind(enum.Enum):
    SEGMENT = "segment"
    SNAPSHOT = "snapshot"
    BOOTSTRAP = "bootstrap"
    QUORUM_STATE = "quorum-state"
    META_PROPERTIES = "meta.properties"
    LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
    PARTITION_METADATA = "partition.metadata"
    OFFSET_INDEX = "index"
    TIME_INDEX = "timeindex"
    PRODUCER_STATE = "producer-state"
    TXN_INDEX = "txnindex"
    UNKNOWN = "unknown"

    @property
    def has_batches(self) -> bool:
        return self in (FileKind.SEGMENT, FileKind.SNAPSHOT, FileKind.BOOTSTRAP)


_SEGMENT = re.compile(r"^(\d{20})\.log$")
_SNAPSHOT = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_BASE_NAMED = re.compile(r"^(\d{20})\.(index|timeindex|snapshot|txnindex)$")
_FIXED = {
    "bootstrap.checkpoint": FileKind.BOOTSTRAP,
    "quorum-state": FileKind.QUORUM_STATE,
    "meta.properties": FileKind.META_PROPERTIES,
    "leader-epoch-checkpoint": FileKind.LEADER_EPOCH_CHECKPOINT,
    "partition.metadata": FileKind.PARTITION_METADATA,
}
_SUFFIX_KINDS = {
    "index": FileKind.OFFSET_INDEX,
    "timeindex": FileKind.TIME_INDEX,
    "snapshot": FileKind.PRODUCER_STATE,
    "txnindex": FileKind.TXN_INDEX,
}


class LogKind(enum.Enum):
    """What the records of a file's partition are."""

    METADATA = "metadata"
    TRANSACTION = "transaction"  # __transaction_state
    OFFSETS = "offsets"  # __consumer_offsets
    DATA = "data"  # any other topic

    @property
    def is_coordinator(self) -> bool:
        return self in (LogKind.TRANSACTION, LogKind.OFFSETS)


_TOPIC_KINDS = {
    "__cluster_metadata": LogKind.METADATA,
    "__transaction_state": LogKind.TRANSACTION,
    "__consumer_offsets": LogKind.OFFSETS,
}
# <topic>-<partition>, or what Kafka renames one to: a log being deleted, a stray one, or the
# future copy of an alter-log-dirs move (<topic>-<partition>.<id>-delete|-stray|-future).
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)(?:\.[0-9A-Za-z]+-(?:delete|stray|future))?$")


@dataclass(frozen=True)
class LogFile:
    """A file and what its name says about it."""

    path: Path
    kind: FileKind
    base_offset: int = 0  # segment base offset; snapshot end offset (exclusive)
    snapshot_epoch: int = -1
    partition: str = ""  # the partition directory name, e.g. "__cluster_metadata-0"

    @property
    def log(self) -> LogKind:
        if not self.partition or self.kind in (FileKind.SNAPSHOT, FileKind.BOOTSTRAP):
            return LogKind.METADATA
        return _TOPIC_KINDS.get(self.partition.rsplit("-", 1)[0], LogKind.DATA)

    @property
    def is_transaction_log(self) -> bool:
        return self.log is LogKind.TRANSACTION

    @property
    def holds_metadata(self) -> bool:
        return self.log is LogKind.METADATA


def partition_of(directory: str) -> str:
    """The partition a directory holds ("plain-0" for plain-0 and plain-0.4f2a-delete), or ""."""
    m = _PARTITION_DIR.match(directory)
    return f"{m[1]}-{m[2]}" if m else ""


def classify(path: str | Path) -> LogFile:
    path = Path(path)
    name = path.name
    partition = partition_of(path.parent.name)
    if m := _SEGMENT.match(name):
        return LogFile(path, FileKind.SEGMENT, int(m[1]), partition=partition)
    if m := _SNAPSHOT.match(name):
        return LogFile(path, FileKind.SNAPSHOT, int(m[1]), int(m[2]), partition=partition)
    if m := _BASE_NAMED.match(name):
        return LogFile(path, _SUFFIX_KINDS[m[2]], int(m[1]), partition=partition)
    if name in _FIXED:
        return LogFile(path, _FIXED[name], partition=partition)
    return LogFile(path, FileKind.UNKNOWN, partition=partition)


def expand(paths: Iterable[str | Path], *, all_files: bool = False) -> Iterator[LogFile]:
    """Files named on the command line as they are; directories walked in name order.

    A directory yields its segments and snapshots (the `--files` list Kafka's dump tool would
    get), plus the small files when `all_files`. Named files are always yielded, even
    unknown ones, so the caller can say why it skipped them.
    """
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            yield classify(path)
            continue
        for child in sorted(p for p in path.rglob("*") if p.is_file()):
            found = classify(child)
            if found.kind.has_batches or (all_files and found.kind is not FileKind.UNKNOWN):
                yield found


def cluster_of(path: str | Path, default: str = "") -> str:
    """The cluster a file belongs to: a `cluster=<id>` folder, else the folder holding the
    log directory (`<cluster>/data/__cluster_metadata-0/x.log` gives `<cluster>`)."""
    parts = Path(path).parts
    for part in reversed(parts):
        if part.startswith("cluster="):
            return part.split("=", 1)[1]
    if default:
        return default
    for i in range(len(parts) - 1, 0, -1):
        if parts[i].startswith(("__cluster_metadata-", "__transaction_state-", "__consumer_offsets-")) \
                or (i == len(parts) - 2 and partition_of(parts[i])):
            above = [p for p in parts[: i] if p not in ("data", "kraft", "logs", "metadata")]
            return above[-1] if above else ""
    return ""
