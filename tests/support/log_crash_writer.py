"""The writer that crash tests kill: append, fsync, acknowledge, in a loop, until killed.

Offset o always holds the value b"<o>", so a checker can verify order and completeness.
With `ops_per_flush` > 1, each round accumulates 1 to `ops_per_flush` operations of
`per_batch` records (they share one batch) before its flush and acknowledgement.
Every `snapshot_every` batches it writes a snapshot (one value: its last offset) and deletes
the segments below it, so kills also land inside snapshot writes and deletions. Runs as a
script (a fresh interpreter) or via `run` in a forked child.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

from kraftpy.controller.log.accumulator import BatchAccumulator
from kraftpy.controller.log.partition_log import PartitionLog
from kraftpy.controller.log.snapshots import (
    SnapshotId,
    clean_partial_snapshots,
    delete_snapshots_before,
    write_snapshot,
)

TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


def run(
    directory: Path,
    out_fd: int,
    *,
    per_batch: int = 5,
    segment_bytes: int = 16384,
    snapshot_every: int = 40,
    ops_per_flush: int = 1,
) -> None:
    directory.mkdir(exist_ok=True)
    clean_partial_snapshots(directory)
    plog = PartitionLog.open(directory, topic_id=TOPIC_ID, segment_bytes=segment_bytes)
    accumulator = BatchAccumulator(plog)
    os.write(out_fd, b"START %d\n" % plog.log_end_offset)
    batches = 0
    rng = random.Random(os.getpid())
    while True:
        base = plog.log_end_offset
        if ops_per_flush == 1:
            plog.append(
                [b"%d" % o for o in range(base, base + per_batch)], leader_epoch=1, timestamp=base
            )
        else:
            for _ in range(rng.randint(1, ops_per_flush)):
                base = accumulator.log_end_offset
                accumulator.add(
                    [b"%d" % o for o in range(base, base + per_batch)],
                    leader_epoch=1,
                    timestamp=base,
                )
        end = accumulator.flush()
        os.write(out_fd, b"ACK %d\n" % end)  # only after the fsync returned
        batches += 1
        if batches % snapshot_every == 0:
            sid = SnapshotId(end, 1)
            write_snapshot(
                directory, sid, [b"%d" % (end - 1)], last_contained_log_timestamp=end, timestamp=end
            )
            plog.delete_segments_below(end)
            delete_snapshots_before(directory, sid, keep=1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("directory", type=Path)
    parser.add_argument("--per-batch", type=int, default=5)
    parser.add_argument("--ops-per-flush", type=int, default=1)
    args = parser.parse_args()
    run(
        args.directory,
        sys.stdout.fileno(),
        per_batch=args.per_batch,
        ops_per_flush=args.ops_per_flush,
    )
