"""KRaft snapshots: `<20-digit end offset>-<10-digit epoch>.checkpoint` files.

A snapshot is ordinary v2 batches with offsets from 0: a SnapshotHeader control batch, data
batches of metadata records that rebuild the whole state, a SnapshotFooter control batch. The
end offset (exclusive) and epoch live only in the file name. It is written to
`<id>-<random>.checkpoint.part`, fsynced, renamed into place and the directory fsynced, so a
crash leaves either no snapshot or a whole one. `bootstrap.checkpoint` has the same layout.

Loading takes the newest snapshot that reads back whole (header, footer, every CRC); a damaged
one is skipped and the next older one is tried. Whether that older one may be used is the
caller's decision (`consistency.py`: it must still reach the first offset left in the log).
"""

from __future__ import annotations

import errno
import logging
import os
import queue
import re
import secrets
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from kraftpy.controller.log.files import fsync_dir
from kraftpy.protocol.control_records import (
    ControlType,
    parse_control_key,
    snapshot_footer,
    snapshot_header,
)
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.kraft_batches import KraftBatches, RecordRun
from kraftpy.protocol.record_batch import build_record_batch, iter_record_batches

log = logging.getLogger("kraftpy.log")

SUFFIX = ".checkpoint"
PART_SUFFIX = ".checkpoint.part"
DELETED_SUFFIX = ".checkpoint.deleted"
MAX_BATCH_BYTES = 8 * 1024 * 1024  # Kafka's KafkaRaftClient.MAX_BATCH_SIZE_BYTES
# A snapshot's record values, in order; a run of them may append its records to the batches
# itself (a topic's partitions: `controller/partition_values.py`).
SnapshotValues = Iterable[bytes | RecordRun]
_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")


class SnapshotError(ValueError):
    """A snapshot file that does not read back whole; the message names file and reason."""


@dataclass(frozen=True, order=True)
class SnapshotId:
    end_offset: int  # exclusive: the snapshot holds offsets < end_offset
    epoch: int

    @property
    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}{SUFFIX}"


@dataclass
class Snapshot:
    """A checked snapshot: its id (None for bootstrap.checkpoint) and its record values, held
    in memory (`read_snapshot`) or read again from the file batch by batch when iterated
    (`check_snapshot`: a large one is never held whole)."""

    path: Path
    snapshot_id: SnapshotId | None
    last_contained_log_timestamp: int
    values: list[bytes]
    control: list[tuple[int, bytes | None]]  # (control type, value) besides header/footer
    streamed: bool = False  # values not held: `iter_values` reads them from `path`

    def iter_values(self) -> Iterator[bytes]:
        """The record values in order, from memory or from the file (one batch at a time)."""
        if not self.streamed:
            yield from self.values
            return
        for batch in _file_batches(self.path):
            if not batch.is_control:
                values = batch.values()
                if None in values:
                    raise SnapshotError(
                        f"{self.path}: null record value in batch at {batch.position}")
                yield from values  # type: ignore[misc]


def parse_snapshot_name(name: str) -> SnapshotId | None:
    m = _NAME.match(name)
    return SnapshotId(int(m[1]), int(m[2])) if m else None


def list_snapshots(directory: Path) -> list[tuple[SnapshotId, Path]]:
    """Every `<offset>-<epoch>.checkpoint` in `directory`, oldest first."""
    found = []
    for path in directory.iterdir():
        sid = parse_snapshot_name(path.name)
        if sid is not None:
            found.append((sid, path))
    return sorted(found)


def clean_partial_snapshots(directory: Path) -> list[Path]:
    """Delete `.checkpoint.part` and `.checkpoint.deleted` leftovers (at startup)."""
    removed = []
    for path in directory.iterdir():
        if path.name.endswith((PART_SUFFIX, DELETED_SUFFIX)):
            log.info("deleting leftover snapshot file %s", path)
            path.unlink()
            removed.append(path)
    if removed:
        fsync_dir(directory)
    return removed


def encode_snapshot(
    values: SnapshotValues,
    *,
    epoch: int,
    last_contained_log_timestamp: int,
    timestamp: int,
    control: Iterable[tuple[bytes, bytes]] = (),
    max_batch_bytes: int = MAX_BATCH_BYTES,
) -> Iterator[bytes]:
    """The batches of a snapshot file, offsets from 0, each at most ~`max_batch_bytes`.

    `control` adds records to the header batch (KRaftVersion and Voters, as Kafka does when
    kraft.version >= 1).
    """
    return encode_snapshot_part(values, epoch=epoch, timestamp=timestamp,
                                header=(last_contained_log_timestamp, list(control)),
                                footer=True, max_batch_bytes=max_batch_bytes)


def header_records(header: tuple[int, list[tuple[bytes, bytes]]]) -> int:
    """How many records the header batch of `encode_snapshot_part` holds."""
    return 1 + len(header[1])


def encode_snapshot_part(
    values: SnapshotValues,
    *,
    epoch: int,
    timestamp: int,
    base_offset: int = 0,
    header: tuple[int, list[tuple[bytes, bytes]]] | None = None,
    footer: bool = False,
    max_batch_bytes: int = MAX_BATCH_BYTES,
) -> Iterator[bytes]:
    """The batches of a run of a snapshot's records from `base_offset`: the file's first run
    has the `header` (last contained log timestamp, control records), its last the footer.
    Runs encoded apart and joined in order are a whole snapshot file."""
    offset = base_offset
    if header is not None:
        header_key, header_value = snapshot_header(header[0])
        keys = [header_key, *(k for k, _ in header[1])]
        yield build_record_batch(
            [header_value, *(v for _, v in header[1])],
            keys=keys,
            control=True,
            base_offset=offset,
            partition_leader_epoch=epoch,
            timestamp=timestamp,
        )
        offset += len(keys)
    # A batch stays within Kafka's 8 MiB (a broker reading the snapshot allocates past it
    # otherwise): the batch overhead plus each record's value and its bounded framing.
    batches = KraftBatches(base_offset=offset, partition_leader_epoch=epoch,
                           timestamp=timestamp, max_batch_bytes=max_batch_bytes)
    for value in values:
        if isinstance(value, bytes):
            closed = batches.append(value)
            if closed is not None:
                yield closed
        else:
            yield from value.append_to(batches)
    last = batches.close()
    if last is not None:
        yield last
    offset = batches.next_offset
    if footer:
        footer_key, footer_value = snapshot_footer()
        yield build_record_batch(
            [footer_value],
            keys=[footer_key],
            control=True,
            base_offset=offset,
            partition_leader_epoch=epoch,
            timestamp=timestamp,
        )


def write_checkpoint_file(path: Path, batches: Iterable[bytes]) -> None:
    """Write via `<name>-<random>.part`, fsync, rename, fsync the directory."""
    stem = path.name[: -len(SUFFIX)] if path.name.endswith(SUFFIX) else path.name
    tmp = path.with_name(f"{stem}-{secrets.randbelow(10**18)}{PART_SUFFIX}")
    try:
        with open(tmp, "wb") as f:
            _write_behind(f, batches)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def _write_behind(f: BinaryIO, batches: Iterable[bytes]) -> None:
    """Write `batches` to `f`, each from a second thread while the next is encoded: a write
    leaves the GIL, and the pages a new file takes can cost as long as encoding the batch
    (writing 8 MiB to a new file took 3 to 35 ms on a quiet machine). At most one batch
    waits; what either side raises is raised here, once the writer has stopped."""
    handoff: queue.Queue[bytes | None] = queue.Queue(maxsize=1)
    failed: list[BaseException] = []

    def write() -> None:
        try:
            while (batch := handoff.get()) is not None:
                f.write(batch)
        except BaseException as exc:  # noqa: BLE001 - handed to the encoding thread
            failed.append(exc)
            while handoff.get() is not None:  # let the encoding side finish its puts
                pass

    writer = threading.Thread(target=write, name="snapshot-writer", daemon=True)
    writer.start()
    try:
        for batch in batches:
            if failed:
                break
            handoff.put(batch)
    finally:
        handoff.put(None)
        writer.join()
    if failed:
        raise failed[0]


def write_snapshot(
    directory: Path,
    snapshot_id: SnapshotId,
    values: SnapshotValues,
    *,
    last_contained_log_timestamp: int,
    timestamp: int,
    control: Iterable[tuple[bytes, bytes]] = (),
) -> Path:
    """Write a whole snapshot atomically; returns its path. `control`: the KRaftVersion and
    Voters records a kraft.version 1 snapshot carries after its header."""
    path = directory / snapshot_id.file_name
    batches = encode_snapshot(
        values,
        epoch=snapshot_id.epoch,
        last_contained_log_timestamp=last_contained_log_timestamp,
        timestamp=timestamp,
        control=control,
    )
    write_checkpoint_file(path, batches)
    return path


def write_snapshot_in_parts(
    directory: Path,
    snapshot_id: SnapshotId,
    parts: Sequence[tuple[int, SnapshotValues]],
    *,
    last_contained_log_timestamp: int,
    timestamp: int,
    control: Iterable[tuple[bytes, bytes]] = (),
    run: Callable[[Sequence[Callable[[], object]]], None],
) -> Path:
    """`write_snapshot` of the values of `parts` ((record count, values) in order), each run
    encoded into a file of its own by one of the callables `run` calls (forked children: one
    core each), then joined in order into the `.part` file the snapshot is renamed from.
    The batches differ from `write_snapshot`'s only where one part ends and the next begins."""
    path = directory / snapshot_id.file_name
    stem = path.name[: -len(SUFFIX)]
    tag = secrets.randbelow(10**18)
    files = [path.with_name(f"{stem}-{tag}{'' if i == 0 else f'-{i}'}{PART_SUFFIX}")
             for i in range(len(parts))]
    header = (last_contained_log_timestamp, list(control))
    offsets, next_offset = [], header_records(header)
    for count, _ in parts:
        offsets.append(next_offset)
        next_offset += count
    offsets[0] = 0  # the first part begins with the header batch

    def writer(i: int) -> Callable[[], None]:
        def write() -> None:
            with open(files[i], "wb") as f:
                for raw in encode_snapshot_part(
                        parts[i][1], epoch=snapshot_id.epoch, timestamp=timestamp,
                        base_offset=offsets[i], header=header if i == 0 else None,
                        footer=i == len(parts) - 1):
                    f.write(raw)
        return write

    try:
        files[0].touch()  # the snapshot is under way from now (as `write_snapshot`'s is)
        run([writer(i) for i in range(len(parts))])
        with open(files[0], "r+b") as out:  # not "ab": sendfile refuses an O_APPEND file
            out.seek(0, os.SEEK_END)
            for extra in files[1:]:
                with open(extra, "rb") as f:
                    size, sent = os.fstat(f.fileno()).st_size, 0
                    while sent < size:
                        moved = os.sendfile(out.fileno(), f.fileno(), sent, size - sent)
                        if not moved:
                            raise OSError(errno.EIO, f"{extra} ended early")
                        sent += moved
            out.flush()
            os.fsync(out.fileno())
        os.replace(files[0], path)
    finally:
        for name in files:
            name.unlink(missing_ok=True)
    fsync_dir(directory)
    return path


# Read from a file at a time: batches of a snapshot are at most 8 MiB (a larger one is read
# whole, as it comes).
_READ_AHEAD = 8 * 1024 * 1024


def _file_batches(path: Path) -> Iterator[Any]:
    """The batches of a file, read a few MiB at a time (CRC checked), not the whole file."""
    with open(path, "rb") as f:
        buffer = b""
        position = 0  # the file position of buffer[0]
        while True:
            more = f.read(_READ_AHEAD)
            if not more:
                if buffer:
                    yield from iter_record_batches(buffer, position=position)
                return
            buffer += more
            end = _whole_batches_end(buffer)
            if end:
                yield from iter_record_batches(buffer, end=end, position=position)
                buffer, position = buffer[end:], position + end


def _whole_batches_end(buffer: bytes) -> int:
    """Where the last whole batch in `buffer` ends (by the length fields alone)."""
    pos = 0
    while len(buffer) - pos >= 12:
        length = int.from_bytes(buffer[pos + 8:pos + 12], "big", signed=True)
        if length < 0 or pos + 12 + length > len(buffer):
            break
        pos += 12 + length
    return pos


def check_snapshot(path: Path, snapshot_id: SnapshotId | None = None) -> Snapshot:
    """`read_snapshot` without holding the values: the whole file checked batch by batch
    (framing, offsets, every CRC, header and footer; its records are not parsed, which for a
    million partitions took seconds), its values read and checked when iterated
    (`Snapshot.iter_values`)."""
    return read_snapshot(path, snapshot_id, keep_values=False)


def read_snapshot(path: Path, snapshot_id: SnapshotId | None = None, *,
                  keep_values: bool = True) -> Snapshot:
    """Read and check a snapshot (or bootstrap.checkpoint); `SnapshotError` if not whole."""
    try:
        batches = _file_batches(path)
        return _checked(path, snapshot_id, batches, keep_values)
    except OSError as exc:
        raise SnapshotError(f"{path}: cannot read ({exc})") from None


def _checked(path: Path, snapshot_id: SnapshotId | None, batches: Iterator[Any],
             keep_values: bool) -> Snapshot:
    values: list[bytes] = []
    control: list[tuple[int, bytes | None]] = []
    header_ts: int | None = None
    footer = False
    expected = 0
    try:
        for batch in batches:
            if footer:
                raise SnapshotError(f"{path}: batch after the footer at position {batch.position}")
            if batch.base_offset != expected:
                raise SnapshotError(
                    f"{path}: base offset {batch.base_offset} where {expected} was expected "
                    f"(position {batch.position})"
                )
            expected = batch.next_offset
            if batch.is_control:
                for record in batch.records():
                    ctype = parse_control_key(record.key)
                    if ctype == ControlType.SNAPSHOT_HEADER:
                        if header_ts is not None or batch.base_offset != 0:
                            raise SnapshotError(f"{path}: SnapshotHeader not first")
                        header_ts = int.from_bytes((record.value or b"")[2:10], "big", signed=True)
                    elif ctype == ControlType.SNAPSHOT_FOOTER:
                        footer = True
                    else:
                        control.append((ctype, record.value))
            else:
                if header_ts is None:
                    raise SnapshotError(f"{path}: records before the SnapshotHeader")
                if keep_values:
                    batch_values = batch.values()
                    if None in batch_values:
                        raise SnapshotError(
                            f"{path}: null record value in batch at {batch.position}")
                    values.extend(batch_values)  # type: ignore[arg-type]
    except DecodeError as exc:
        raise SnapshotError(f"{path}: {exc}") from None
    if header_ts is None:
        raise SnapshotError(f"{path}: no SnapshotHeader")
    if not footer:
        raise SnapshotError(f"{path}: no SnapshotFooter (incomplete)")
    return Snapshot(path, snapshot_id, header_ts, values, control, streamed=not keep_values)


def read_snapshot_timestamp(path: Path) -> int | None:
    """The LastContainedLogTimestamp of a snapshot's header, reading its first batch only
    (retention by time); None when that batch does not read back."""
    try:
        with open(path, "rb") as f:
            head = f.read(12)
            if len(head) < 12:
                return None
            length = int.from_bytes(head[8:12], "big", signed=True)
            if not 0 < length <= MAX_BATCH_BYTES:
                return None
            data = head + f.read(length)
        for batch in iter_record_batches(data):
            if batch.base_offset == 0 and batch.is_control:
                for record in batch.records():
                    if parse_control_key(record.key) == ControlType.SNAPSHOT_HEADER:
                        return int.from_bytes((record.value or b"")[2:10], "big", signed=True)
            break
    except (OSError, DecodeError):
        return None
    return None


def newest_whole_snapshot(
    directory: Path,
) -> tuple[Snapshot | None, list[tuple[SnapshotId, str]]]:
    """The newest snapshot that reads back whole, and the newer ones that do not (newest
    first, each with why). Logs nothing: whether an older snapshot may stand in for a damaged
    one depends on where the log starts, which the caller decides."""
    damaged: list[tuple[SnapshotId, str]] = []
    for sid, path in reversed(list_snapshots(directory)):
        try:
            return check_snapshot(path, sid), damaged
        except SnapshotError as exc:
            damaged.append((sid, str(exc).removeprefix(f"{path}: ")))
    return None, damaged


def load_newest_snapshot(directory: Path, *, below_or_at: int | None = None) -> Snapshot | None:
    """The newest snapshot that reads back whole, skipping damaged ones with a warning."""
    for sid, path in reversed(list_snapshots(directory)):
        if below_or_at is not None and sid.end_offset > below_or_at:
            log.warning("%s ends past the log (offset %d); skipped", path, below_or_at)
            continue
        try:
            return read_snapshot(path, sid)
        except SnapshotError as exc:
            log.warning("skipping damaged snapshot: %s", exc)
    return None


def delete_snapshots_before(
    directory: Path, snapshot_id: SnapshotId, *, keep: int = 1
) -> list[Path]:
    """Delete snapshots older than `snapshot_id`, keeping the `keep` newest of them as fallback."""
    older = [(sid, p) for sid, p in list_snapshots(directory) if sid < snapshot_id]
    doomed = older[: max(0, len(older) - keep)]
    for _sid, path in doomed:
        gone = path.with_name(path.name + ".deleted")
        try:  # a follower's install may have deleted it meanwhile
            os.replace(path, gone)
        except FileNotFoundError:
            continue
        gone.unlink(missing_ok=True)
    if doomed:
        fsync_dir(directory)
    return [p for _, p in doomed]
