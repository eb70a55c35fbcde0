"""Faults planted in a copy of a partition replica's folder, as real damage would leave them:
a batch appended twice, a batch cut out, a marker removed, a batch's epoch or producer id
rewritten (its CRC made whole again, as a broker would have written it).

    batches = replica_batches(folder)            # [(segment, Batch)] in offset order
    splice_twice(folder, batches[5])             # the same batch again at the log end
"""

from __future__ import annotations

import struct
from pathlib import Path

import crc32c
from kraftpy.tools.logdecode.batches import Batch, scan_batches
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
