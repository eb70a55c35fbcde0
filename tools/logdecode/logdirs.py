"""Which broker wrote which partition: a Kafka node's `log.dirs` seen as replicas.

A log directory is a folder with `meta.properties` (Kafka writes one into every directory of
`log.dirs` and into `metadata.log.dir`): its `node.id` names the broker and its `cluster.id`
the cluster. The partition folders in it (`<topic>-<n>`) are that broker's replicas. Inputs may
be log directories, folders holding several (a copy of every node's), or partition folders.
A copy without `meta.properties` is still read: the folder that holds the partitions names
the broker, and the cluster is unnamed.

Partitions being moved or deleted (`-future`, `-delete`, `-stray` folders) are not the
broker's live replica and are left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .paths import FileKind, LogFile, classify
from .small_files import SmallFileError, read_properties

METADATA_TOPIC = "__cluster_metadata"
_LIVE_PARTITION = re.compile(r"^(.+)-(\d+)$")
_RENAMED = re.compile(r"^(.+)-(\d+)\.[0-9A-Za-z]+-(?:delete|stray|future)$")


class NoLogDirs(ValueError):
    """An input that holds no Kafka log directory."""


@dataclass(frozen=True)
class LogDir:
    path: Path
    cluster: str  # cluster.id, or "" for a copy without meta.properties
    broker: str  # node.id, or the folder's name for a copy without meta.properties


@dataclass
class Replica:
    """One broker's copy of one partition, and its files in offset order."""

    log_dir: LogDir
    topic: str
    partition: int
    path: Path
    segments: list[LogFile] = field(default_factory=list)
    producer_snapshots: list[LogFile] = field(default_factory=list)
    txn_indexes: list[LogFile] = field(default_factory=list)
    checkpoints: list[LogFile] = field(default_factory=list)  # KRaft snapshots (metadata only)
    has_indexes: bool = False  # the folder was copied with Kafka's index files

    @property
    def cluster(self) -> str:
        return self.log_dir.cluster

    @property
    def broker(self) -> str:
        return self.log_dir.broker

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"

    @property
    def size(self) -> int:
        return sum(f.path.stat().st_size for f in self.segments)


def find_log_dirs(inputs: Sequence[str | Path]) -> list[LogDir]:
    """Every log directory under the inputs, in path order; NoLogDirs names an input that
    has none (or does not exist)."""
    found: dict[Path, LogDir] = {}
    for raw in inputs:
        path = Path(raw)
        if not path.exists():
            raise NoLogDirs(f"{raw}: no such file or directory")
        if not path.is_dir():
            raise NoLogDirs(f"{raw}: not a directory (give a broker's log directory)")
        dirs = _log_dirs_under(path)
        if not dirs:
            raise NoLogDirs(f"{raw}: no Kafka log directory here (no meta.properties and no "
                            "<topic>-<partition> folders)")
        for d in dirs:
            found.setdefault(d.path.resolve(), d)
    return [found[p] for p in sorted(found)]


def selected_replicas(inputs: Sequence[str | Path]) -> list[Replica]:
    """The replicas the inputs name: a partition folder names itself, anything else every
    replica of the log directories under it (in `replicas` order, each once)."""
    chosen: dict[Path, Replica] = {}
    for raw in inputs:
        path = Path(raw)
        if _LIVE_PARTITION.match(path.name) and path.is_dir() and _holds_segments(path):
            replica = replica_at(log_dir(path.parent), path)
            chosen.setdefault(path.resolve(), replica)
        else:
            for replica in replicas(find_log_dirs([path])):
                chosen.setdefault(replica.path.resolve(), replica)
    return sorted(chosen.values(), key=lambda r: (r.cluster, _broker_order(r.broker), r.topic,
                                                  r.partition))


def _log_dirs_under(path: Path) -> list[LogDir]:
    if _LIVE_PARTITION.match(path.name) and _holds_segments(path):
        return [log_dir(path.parent)]  # a partition folder: its parent is the log directory
    metas = sorted(p.parent for p in path.rglob("meta.properties"))
    if metas:
        return [log_dir(p) for p in metas]
    parents = sorted({p.parent.parent for p in path.rglob("*.log")
                      if _LIVE_PARTITION.match(p.parent.name)})
    return [log_dir(p) for p in parents]


def _holds_segments(path: Path) -> bool:
    return any(p.suffix == ".log" for p in path.iterdir())


def log_dir(path: Path) -> LogDir:
    """The log directory at `path`, named by its meta.properties when it has one."""
    meta = path / "meta.properties"
    if meta.is_file():
        try:
            props = read_properties(meta.read_bytes())
        except (SmallFileError, OSError):
            props = {}
        if "node.id" in props:
            return LogDir(path, props.get("cluster.id", ""), props["node.id"])
    return LogDir(path, "", path.name)


def replicas(log_dirs: Iterable[LogDir], *, metadata: bool = False) -> list[Replica]:
    """Each log directory's partition replicas (`__cluster_metadata` only when `metadata`), in
    (cluster, broker, topic, partition) order."""
    out: list[Replica] = []
    for owner in log_dirs:
        for child in sorted(owner.path.iterdir()):
            m = _LIVE_PARTITION.match(child.name)
            if not child.is_dir() or m is None or _RENAMED.match(child.name):
                continue
            if (m[1] == METADATA_TOPIC) == metadata:
                out.append(replica_at(owner, child))
    out.sort(key=lambda r: (r.cluster, _broker_order(r.broker), r.topic, r.partition))
    return out


def replica_at(owner: LogDir, path: Path) -> Replica:
    """The replica in partition folder `path` of log directory `owner`, its files listed."""
    m = _LIVE_PARTITION.match(path.name)
    if m is None:
        raise NoLogDirs(f"{path}: not a partition folder (<topic>-<partition>)")
    replica = Replica(owner, m[1], int(m[2]), path)
    for child in sorted(path.iterdir()):
        file = classify(child)
        if file.kind is FileKind.SEGMENT:
            replica.segments.append(file)
        elif file.kind is FileKind.PRODUCER_STATE:
            replica.producer_snapshots.append(file)
        elif file.kind is FileKind.TXN_INDEX:
            replica.txn_indexes.append(file)
        elif file.kind is FileKind.SNAPSHOT:
            replica.checkpoints.append(file)
        elif file.kind is FileKind.OFFSET_INDEX:
            replica.has_indexes = True
    for files in (replica.segments, replica.producer_snapshots, replica.txn_indexes,
                  replica.checkpoints):
        files.sort(key=lambda f: f.base_offset)
    return replica


def _broker_order(broker: str) -> tuple[int, str]:
    return (int(broker), "") if broker.lstrip("-").isdigit() else (1 << 62, broker)
