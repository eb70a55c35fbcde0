"""Raft Fetch and FetchSnapshot against a running `kraftpy serve`, over the CONTROLLER listener.

A fetcher finds the leader, reads the log's batches as they are on disk, is parked while
nothing is new and woken by the next commit, and is sent to a snapshot once the log was
trimmed; FetchSnapshot then hands over the snapshot file's bytes.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from kraftpy.protocol.messages.fetch_snapshot_request import (
    FetchSnapshotRequest,
    PartitionSnapshot,
    SnapshotId,
    TopicSnapshot,
)
from kraftpy.protocol.record_batch import iter_record_batches
from kraftpy.tools.broker_sim import BrokerSim
from kraftpy.tools.kafka_connection import KafkaConnection
from support.raft import fetch
from support.server import running_server

pytestmark = pytest.mark.slow


def _leader(conn: KafkaConnection, cluster: str) -> int:
    response = conn.request(fetch(0, epoch=0, last_epoch=0, cluster=cluster), 18)
    part = response.responses[0].partitions[0]
    assert part.error_code == 74  # FENCED_LEADER_EPOCH, with the leader
    assert part.current_leader.leader_id == 1
    return part.current_leader.leader_epoch


def test_fetch_reads_the_log_and_parks_until_the_next_commit(tmp_path: Path) -> None:
    # No periodic NoOpRecord here: the only commit after the first records is the broker's.
    with running_server(tmp_path / "kraftpy", {"metadata.max.idle.interval.ms": "0"}) as srv:
        cluster = srv.cluster_id()
        host, port = srv.controller.split(":")
        with KafkaConnection(srv.controller, timeout=30) as conn:
            epoch = _leader(conn, cluster)
            first = conn.request(fetch(0, epoch=epoch, last_epoch=0, cluster=cluster), 18)
            part = first.responses[0].partitions[0]
            batches = list(iter_record_batches(part.records))
            assert batches and batches[0].base_offset == 0
            end = batches[-1].last_offset + 1
            # A leader serves what it has written, its high watermark perhaps still behind
            # (Kafka's does too): the high watermark reaches the records' end soon after.
            hwm = part.high_watermark
            for _ in range(100):
                if hwm >= end:
                    break
                again = conn.request(fetch(end, epoch=epoch, last_epoch=batches[-1]
                                           .partition_leader_epoch, cluster=cluster,
                                           max_wait=100, hwm=max(hwm, 0)), 18)
                hwm = again.responses[0].partitions[0].high_watermark
            assert hwm >= end
            on_disk = (srv.data_dir / "__cluster_metadata-0" / "00000000000000000000.log")
            assert part.records == on_disk.read_bytes()[:len(part.records)]
            # Caught up (the node's own first records may still be committing): then, with
            # nothing new, an empty answer after MaxWaitMs.
            fetched = part.records
            for _ in range(20):
                idle = conn.request(fetch(end, epoch=epoch, last_epoch=epoch, cluster=cluster,
                                          max_wait=200, hwm=end), 18)
                more = idle.responses[0].partitions[0].records
                if not more:
                    break
                fetched += more
                end = list(iter_record_batches(more))[-1].last_offset + 1
            assert more == b"" and fetched == on_disk.read_bytes()[:len(fetched)]
            # Parked for up to a minute, woken by a broker's registration (a commit).
            registration = threading.Timer(
                0.5, lambda: BrokerSim((host, int(port)), broker_id=9).register())
            registration.start()
            woken = conn.request(fetch(end, epoch=epoch, last_epoch=epoch, cluster=cluster,
                                       max_wait=60_000, hwm=end), 18)
            registration.join(30)
            records = list(iter_record_batches(woken.responses[0].partitions[0].records))
            assert records and records[0].base_offset == end


def test_a_fetcher_below_the_log_start_is_sent_to_the_snapshot(tmp_path: Path) -> None:
    # No periodic NoOpRecord: once the broker stops, no commit brings a newer snapshot.
    with running_server(tmp_path / "kraftpy",
                        {"metadata.log.max.record.bytes.between.snapshots": "500",
                         "metadata.max.idle.interval.ms": "0"}) as srv:
        cluster = srv.cluster_id()
        host, port = srv.controller.split(":")
        broker = BrokerSim((host, int(port)), broker_id=9)
        broker.register()
        broker.wait_unfenced()
        mdir = srv.data_dir / "__cluster_metadata-0"
        deadline = time.monotonic() + 30
        while not (mdir / "00000000000000000000.log").exists() or \
                not list(mdir.glob("*.checkpoint")):
            assert time.monotonic() < deadline, "no snapshot was taken"
            broker.allocate()
        with KafkaConnection(srv.controller, timeout=30) as conn:
            epoch = _leader(conn, cluster)

            def chunk(position: int, end: int, ep: int) -> PartitionSnapshot:
                return conn.request(FetchSnapshotRequest(
                    cluster_id=cluster, replica_id=-1, max_bytes=64, topics=[TopicSnapshot(
                        name="__cluster_metadata", partitions=[PartitionSnapshot(
                            partition=0, current_leader_epoch=epoch,
                            snapshot_id=SnapshotId(end_offset=end, epoch=ep),
                            position=position)])]), 1).topics[0].partitions[0]

            # As a follower does: a snapshot the leader replaces with a newer one meanwhile
            # answers SNAPSHOT_NOT_FOUND; then fetch again and download the newer one. (The
            # node's own commits, its producer-id claims, may bring a newer one at any time.)
            for _ in range(20):
                answer = conn.request(fetch(0, epoch=epoch, last_epoch=0, cluster=cluster), 18)
                sid = answer.responses[0].partitions[0].snapshot_id
                assert sid.end_offset > 0
                path = mdir / f"{sid.end_offset:020d}-{sid.epoch:010d}.checkpoint"
                got, position, size = b"", 0, None
                while size is None or position < size:
                    part = chunk(position, sid.end_offset, sid.epoch)
                    if part.error_code == 98:
                        break
                    assert part.error_code == 0 and part.size == (size or part.size)
                    size = part.size
                    got += part.unaligned_records
                    position += len(part.unaligned_records)
                else:
                    try:
                        whole = path.read_bytes()
                    except FileNotFoundError:  # replaced since its last chunk
                        continue
                    past_end = chunk(len(whole), sid.end_offset, sid.epoch).error_code
                    if past_end == 98:  # replaced since its last chunk
                        continue
                    break
            else:
                raise AssertionError("no snapshot stayed long enough to be downloaded")
            assert got == whole
            assert past_end == 99  # out of range
            assert chunk(0, end=0, ep=0).error_code == 98  # the bootstrap: SNAPSHOT_NOT_FOUND
