"""Faults planted in a copy of a partition replica's folder, as real damage would leave them:
a batch appended twice, a batch cut out, a marker removed, a batch's epoch or producer id
rewritten (its CRC made whole again, as a broker would have written it).

    batches = replica_batches(folder)                  # [(segment, Batch)] in offset order
    splice_twice(folder, *batches[5])                  # the same batch again at the log end
    expected = plant_duplicate(root / "broker-3")      # a fault placed where only it shows,
                                                       # and the finding the audit must report
"""

from __future__ import annotations

import struct
from collections import Counter
from pathlib import Path

import crc32c
from kraftpy.tools.logdecode.batches import ABORT, COMMIT, NO_CONTROL, Batch, scan_batches
from kraftpy.tools.logdecode.paths import FileKind, classify

from support.eos_logs import with_crc

_PRODUCER_ID = slice(43, 51)
_PRODUCER_EPOCH = slice(51, 53)


def replica_batches(folder: Path) -> list[tuple[Path, Batch]]:
    out = []
    for segment in sorted(folder.glob("*.log")):
        out += [(segment, b) for b in scan_batches(classify(segment)) if type(b) is Batch]
    return out


def _cut(segment: Path, batch: Batch) -> bytes:
    data = segment.read_bytes()
    segment.write_bytes(data[:batch.position] + data[batch.position + batch.size:])
    return data[batch.position:batch.position + batch.size]


def _replace(segment: Path, batch: Batch, new: bytes) -> None:
    data = segment.read_bytes()
    assert len(new) == batch.size
    segment.write_bytes(data[:batch.position] + new + data[batch.position + batch.size:])


def _raw(segment: Path, batch: Batch) -> bytes:
    return segment.read_bytes()[batch.position:batch.position + batch.size]


def splice_twice(folder: Path, segment: Path, batch: Batch) -> tuple[int, int]:
    """The batch appended again at the end of the log, at the next offsets (the base offset is
    outside the CRC); its (first, last) offsets there."""
    last_segment, last = replica_batches(folder)[-1]
    start = last.last_offset + 1
    copy = struct.pack(">q", start) + _raw(segment, batch)[8:]
    with last_segment.open("ab") as f:
        f.write(copy)
    return start, start + batch.last_offset - batch.base_offset


def cut_out(segment: Path, batch: Batch) -> None:
    """The batch's bytes removed from its segment."""
    _cut(segment, batch)


def rewrite_epoch(segment: Path, batch: Batch, epoch: int) -> None:
    raw = bytearray(_raw(segment, batch))
    raw[_PRODUCER_EPOCH] = struct.pack(">h", epoch)
    _replace(segment, batch, with_crc(bytes(raw)))


def rewrite_producer(folder: Path, old: int, new: int) -> int:
    """Every batch of producer `old` in the folder moved to producer id `new`, and the
    producer-state snapshots with it; how many batches."""
    moved = 0
    for segment, batch in replica_batches(folder):
        if batch.producer_id == old:
            raw = bytearray(_raw(segment, batch))
            raw[_PRODUCER_ID] = struct.pack(">q", new)
            _replace(segment, batch, with_crc(bytes(raw)))
            moved += 1
    for path in folder.glob("*.snapshot"):
        if classify(path).kind is not FileKind.PRODUCER_STATE:
            continue
        data = bytearray(path.read_bytes())
        count = struct.unpack_from(">i", data, 6)[0]
        for i in range(count):
            at = 10 + 46 * i
            if struct.unpack_from(">q", data, at)[0] == old:
                data[at:at + 8] = struct.pack(">q", new)
        data[2:6] = struct.pack(">I", crc32c.crc32c(bytes(data[6:])))
        path.write_bytes(bytes(data))
    return moved


# --- each fault placed where it alone shows, and the finding it must give ------------------------
# (kind, broker, topic, partition, producer id, first offset, last offset), and the related
# offset where the finding has one.

Expected = tuple[tuple[str, str, str, int, int, int, int], int | None]


def _snapshots(folder: Path) -> list[int]:
    return [int(p.name.split(".")[0]) for p in folder.glob("*.snapshot")]


def _between(snapshots: list[int], low: int, high: int) -> bool:
    return any(low < s <= high for s in snapshots)


def plant_duplicate(log_dir: Path, topic: str = "input", partition: int = 0) -> Expected:
    """An idempotent producer's batch from the middle of the log appended again at its end."""
    folder = log_dir / f"{topic}-{partition}"
    data = [(s, b) for s, b in replica_batches(folder) if b.producer_id >= 0]
    segment, batch = data[len(data) // 2]
    first, last = splice_twice(folder, segment, batch)
    return ("duplicate", _broker(log_dir), topic, partition, batch.producer_id, first,
            last), batch.base_offset


def plant_sequence_cut(log_dir: Path, topic: str = "input", partition: int = 1) -> Expected:
    """A batch cut out between two of the same producer and epoch (no snapshot between them,
    which would show it too): the next batch's sequences skip."""
    folder = log_dir / f"{topic}-{partition}"
    batches = replica_batches(folder)
    snapshots = _snapshots(folder)
    i = next(i for i in range(len(batches) // 2, len(batches) - 1)
             if batches[i][1].producer_id == batches[i + 1][1].producer_id >= 0
             and batches[i][1].producer_epoch == batches[i + 1][1].producer_epoch
             and not _between(snapshots, batches[i][1].base_offset, batches[i + 1][1].base_offset))
    segment, cut = batches[i]
    after = batches[i + 1][1]
    cut_out(segment, cut)
    return ("sequence-gap", _broker(log_dir), topic, partition, cut.producer_id,
            after.base_offset, after.last_offset), None


def plant_lost_commit(log_dir: Path, topic: str = "output", partition: int = 1) -> Expected:
    """A COMMIT removed where the next marker is a COMMIT too and no snapshot lies between (so
    the loss shows only as the transaction left open when the producer's next epoch began)."""
    folder = log_dir / f"{topic}-{partition}"
    pairs = replica_batches(folder)
    batches = [b for _, b in pairs]
    snapshots = _snapshots(folder)
    markers = [i for i, b in enumerate(batches) if b.control_type != NO_CONTROL]
    m = next(m for m, n in zip(markers[1:], markers[2:], strict=False)
             if batches[m].control_type == COMMIT == batches[n].control_type
             and batches[m - 1].control_type == NO_CONTROL
             and batches[m + 1].control_type == NO_CONTROL
             and not _between(snapshots, batches[m].base_offset, batches[n].base_offset))
    marker = batches[m]
    previous = max(i for i in markers if i < m)
    opened, closed, resumed = batches[previous + 1], batches[m - 1], batches[m + 1]
    assert resumed.producer_epoch > opened.producer_epoch  # transactions v2: a bump per marker
    cut_out(pairs[m][0], marker)
    return ("missing-marker", _broker(log_dir), topic, partition, marker.producer_id,
            opened.base_offset, closed.last_offset), resumed.base_offset


def plant_epoch_rewind(log_dir: Path, topic: str = "output", partition: int = 0) -> Expected:
    """The last data batch of a transaction of several batches rewritten one epoch down."""
    folder = log_dir / f"{topic}-{partition}"
    batches = replica_batches(folder)
    snapshots = _snapshots(folder)
    i = next(i for i in range(len(batches) // 2, len(batches) - 1)
             if batches[i + 1][1].control_type in (ABORT, COMMIT)
             and batches[i - 1][1].control_type == NO_CONTROL
             and batches[i][1].control_type == NO_CONTROL
             and batches[i][1].producer_epoch > 0
             and not _between(snapshots, batches[i][1].base_offset, batches[i + 1][1].base_offset))
    segment, batch = batches[i]
    rewrite_epoch(segment, batch, batch.producer_epoch - 1)
    return ("epoch-rewound", _broker(log_dir), topic, partition, batch.producer_id,
            batch.base_offset, batch.last_offset), None


STRAY_ID = 10**12


def plant_stray_id(log_dir: Path, topic: str = "input", partition: int = 1) -> Expected:
    """The partition's busiest producer moved to an id no block granted (its snapshots too)."""
    folder = log_dir / f"{topic}-{partition}"
    batches = [b for _, b in replica_batches(folder) if b.producer_id >= 0]
    pid = Counter(b.producer_id for b in batches).most_common(1)[0][0]
    mine = [b for b in batches if b.producer_id == pid]
    assert rewrite_producer(folder, pid, STRAY_ID) > 1
    return ("ungranted-producer-id", _broker(log_dir), topic, partition, STRAY_ID,
            mine[0].base_offset, mine[-1].last_offset), None


def _broker(log_dir: Path) -> str:
    from kraftpy.tools.logdecode.logdirs import log_dir as owner

    return owner(log_dir).broker
