"""Kafka's small text files of a log directory, and the one safe way to replace a file.

Every file that is rewritten in place (quorum-state, leader-epoch-checkpoint, meta.properties)
goes through `atomic_write`: a temp file, fsync, rename, fsync of the directory, so a crash
leaves either the old content or the new one, never half of each.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
from pathlib import Path

METADATA_TOPIC = "__cluster_metadata"
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"  # Kafka's Uuid.METADATA_TOPIC_ID (0, 1)
LOCK_FILE = ".lock"
META_PROPERTIES = "meta.properties"
BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"
QUORUM_STATE = "quorum-state"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"


class LogDirError(RuntimeError):
    """A log directory that cannot be used as it is; the message says which file and why."""


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, tmp_suffix: str = ".tmp") -> None:
    """Replace `path` by `data` durably: write a temp file, fsync, rename, fsync the dir."""
    tmp = path.with_name(path.name + tmp_suffix)
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


class DirLock:
    """An exclusive lock on `<dir>/.lock`, as Kafka holds on each log dir.

    Two locks on one descriptor: a POSIX record lock (`fcntl.lockf`), the kind Java's
    FileChannel.tryLock takes, so a Kafka process and kraftpy refuse each other's directory;
    and `flock`, which also refuses a second open in this process (record locks do not). A
    second holder is refused with `LogDirError` instead of waiting or sharing the directory.
    """

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> DirLock:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # BlockingIOError, or EACCES from a record lock held elsewhere
            os.close(fd)
            raise LogDirError(
                f"{self.path.parent} is in use by another process (lock held on {self.path})"
            ) from None
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> DirLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


# --- partition.metadata ------------------------------------------------------------------


def write_partition_metadata(partition_dir: Path, topic_id: str) -> None:
    """`version: 0\\ntopic_id: <id>`, no trailing newline, as Kafka's PartitionMetadataFile."""
    atomic_write(partition_dir / PARTITION_METADATA, f"version: 0\ntopic_id: {topic_id}".encode())


def read_partition_metadata(partition_dir: Path) -> str | None:
    path = partition_dir / PARTITION_METADATA
    if not path.exists():
        return None
    fields = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            raise LogDirError(f"{path}: malformed line {line!r}")
        fields[key.strip()] = value.strip()
    if fields.get("version") != "0" or "topic_id" not in fields:
        raise LogDirError(f"{path}: expected version 0 and a topic_id, found {fields}")
    return fields["topic_id"]


# --- leader-epoch-checkpoint -------------------------------------------------------------


def write_leader_epochs(partition_dir: Path, epochs: list[tuple[int, int]]) -> None:
    """`0\\n<count>\\n<epoch> <start offset>\\n...`: Kafka's LeaderEpochCheckpointFile."""
    lines = ["0", str(len(epochs)), *(f"{e} {o}" for e, o in epochs)]
    atomic_write(partition_dir / LEADER_EPOCH_CHECKPOINT, ("\n".join(lines) + "\n").encode())


def read_leader_epochs(partition_dir: Path) -> list[tuple[int, int]]:
    path = partition_dir / LEADER_EPOCH_CHECKPOINT
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    try:
        if lines[0] != "0":
            raise ValueError(f"version {lines[0]!r}")
        count = int(lines[1])
        entries = [tuple(int(x) for x in line.split()) for line in lines[2 : 2 + count]]
        if len(entries) != count or any(len(e) != 2 for e in entries):
            raise ValueError(f"expected {count} '<epoch> <offset>' lines")
    except (IndexError, ValueError) as exc:
        raise LogDirError(f"{path}: malformed leader epoch checkpoint ({exc})") from None
    return [(e[0], e[1]) for e in entries]


# --- quorum-state ------------------------------------------------------------------------


def write_quorum_state(
    partition_dir: Path,
    *,
    leader_id: int,
    leader_epoch: int,
    voted_id: int = -1,
    voters: list[int] | None = None,
    data_version: int = 0,
) -> None:
    """One-line JSON of QuorumStateData plus data_version, as Kafka writes it: v0 with the
    voters (a static quorum, kraft.version 0), v1 without them and with the voted directory
    (kraft.version 1: the voters are in the log)."""
    if data_version >= 1:
        atomic_write(partition_dir / QUORUM_STATE, json.dumps({
            "leaderId": leader_id, "leaderEpoch": leader_epoch, "votedId": voted_id,
            "votedDirectoryId": "AAAAAAAAAAAAAAAAAAAAAA", "data_version": 1,
        }, separators=(",", ":")).encode())
        return
    state = {
        "clusterId": "",
        "leaderId": leader_id,
        "leaderEpoch": leader_epoch,
        "votedId": voted_id,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": v} for v in (voters if voters is not None else [leader_id])],
        "data_version": 0,
    }
    atomic_write(partition_dir / QUORUM_STATE, json.dumps(state, separators=(",", ":")).encode())


def read_quorum_state(partition_dir: Path) -> dict | None:
    path = partition_dir / QUORUM_STATE
    if not path.exists():
        return None
    try:
        state = json.loads(path.read_text())
    except ValueError as exc:
        raise LogDirError(f"{path}: not JSON ({exc})") from None
    if not isinstance(state, dict) or "leaderEpoch" not in state:
        raise LogDirError(f"{path}: no leaderEpoch in {state!r}")
    return state


# --- meta.properties ---------------------------------------------------------------------


def write_meta_properties(
    log_dir: Path, *, cluster_id: str, node_id: int, directory_id: str
) -> None:
    """Java `Properties.store` layout: a blank comment, a date comment, then key=value lines."""
    stamp = dt.datetime.now(dt.UTC).strftime("%a %b %d %H:%M:%S UTC %Y")
    text = (
        f"#\n#{stamp}\nnode.id={node_id}\ndirectory.id={directory_id}\nversion=1\n"
        f"cluster.id={cluster_id}\n"
    )
    atomic_write(log_dir / META_PROPERTIES, text.encode())


def read_meta_properties(log_dir: Path) -> dict[str, str]:
    """The properties of `meta.properties`; a missing or v0 file is a `LogDirError`."""
    path = log_dir / META_PROPERTIES
    if not path.exists():
        raise LogDirError(
            f"{log_dir} is not formatted: no {META_PROPERTIES}. Run `kraftpy storage format "
            "--config <server.properties>` first."
        )
    props: dict[str, str] = {}
    for raw in path.read_text(encoding="latin-1").splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        key, sep, value = line.partition("=")
        if not sep:
            raise LogDirError(f"{path}: malformed line {raw!r}")
        props[key.strip()] = value.strip()
    if props.get("version") != "1":
        raise LogDirError(f"{path}: version {props.get('version')!r}, kraftpy reads version 1")
    for key in ("cluster.id", "node.id"):
        if key not in props:
            raise LogDirError(f"{path}: {key} is missing")
    return props
