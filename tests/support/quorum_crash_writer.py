"""The node's commit path under load until it is killed: brokers take producer-id blocks
through `Quorum.submit` on a real MetadataStorage, with arrivals spread so that commit rounds
overlap (records appended while the previous round's fsync runs).

Writes to stdout, one line each: `M ring` or `M thread` (what fsyncs the rounds), `R` once
every broker is registered, `A <start> <length>`
for every block acknowledged (after `submit` returned it), and every 20 ms
`O <appends during an fsync> <rounds>`. Run as a script:
`python quorum_crash_writer.py <data dir> <first broker id> <writers> <seed>`.
"""

from __future__ import annotations

import os
import random
import sys
import time
import uuid
from pathlib import Path

import trio
from kraftpy.controller.log.storage import MetadataStorage, format_storage
from kraftpy.controller.quorum import Quorum
from kraftpy.controller.quorum_controller import QuorumController
from kraftpy.controller.settings import ControllerSettings
from kraftpy.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraftpy.protocol.messages.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
    Listener,
)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def settings() -> ControllerSettings:
    return ControllerSettings(cluster_id=CLUSTER, node_id=1, allocate_producer_ids_quota=0.0)


def registration(broker_id: int) -> BrokerRegistrationRequest:
    """A broker that supports metadata.version 7-27, on a port of its own."""
    return BrokerRegistrationRequest(
        broker_id=broker_id, cluster_id=CLUSTER, incarnation_id=uuid.uuid4(),
        listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=9092 + broker_id,
                            security_protocol=0)],
        features=[Feature(name="metadata.version", min_supported_version=7,
                          max_supported_version=27)],
        rack=None, log_dirs=[uuid.uuid4()])


def open_node(data: Path) -> tuple[MetadataStorage, QuorumController]:
    """Format on first use, recover, replay and lead: what a node does before serving."""
    format_storage(data, cluster_id=CLUSTER, node_id=1, metadata_version=27,
                   ignore_formatted=True)
    storage = MetadataStorage.open(data, node_id=1)
    controller = QuorumController(settings())
    storage.replay_into(controller)
    controller.on_committed(storage.metadata_end_offset(), storage.txn_end_offset())
    now = int(time.time() * 1000)
    epoch = storage.begin_epoch(now_ms=now)
    controller.on_committed(storage.metadata_end_offset(), storage.txn_end_offset())
    controller.activate(leader_epoch=epoch, now_ms=now)
    return storage, controller


def _say(line: str) -> None:
    os.write(1, line.encode() + b"\n")


def run(data: Path, first_broker: int, writers: int, seed: int) -> None:
    storage, controller = open_node(data)
    # By seed: rounds fsynced through the io_uring where there is one, idle rounds on the
    # loop (0); only through the ring (1); only in a worker thread (2).
    quorum = Quorum(controller, storage, inline_fsync_s=0 if seed % 3 else 0.001,
                    fsync_ring=seed % 3 != 2)
    overlapped = 0
    apply = controller.apply

    def counting_apply(result, *, offset, txn_offset):  # type: ignore[no-untyped-def]
        # Every written operation is applied as it is appended (or prepared for the log).
        nonlocal overlapped
        overlapped += quorum._in_flight
        apply(result, offset=offset, txn_offset=txn_offset)

    controller.apply = counting_apply  # type: ignore[method-assign]
    ready = 0
    all_ready = trio.Event()

    async def writer(broker_id: int) -> None:
        nonlocal ready
        registered = await quorum.submit(registration(broker_id), 4)
        assert registered.error_code == 0, registered
        beat = await quorum.submit(BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=registered.broker_epoch,
            current_metadata_offset=storage.metadata_end_offset(),
            want_fence=False, want_shut_down=False), 1)
        assert not beat.is_fenced, beat
        request = AllocateProducerIdsRequest(broker_id=broker_id,
                                             broker_epoch=registered.broker_epoch)
        ready += 1
        if ready == writers:
            all_ready.set()
            _say("R")
        await all_ready.wait()
        rng = random.Random(seed * 1000 + broker_id)
        while True:
            reply = await quorum.submit(request, 0)
            assert reply.error_code == 0, reply
            _say(f"A {reply.producer_id_start} {reply.producer_id_len}")
            if rng.random() < 0.5:
                await trio.sleep(rng.random() * 0.0005)

    async def report() -> None:
        _say("M ring" if quorum._ring is not None else "M thread")
        while True:
            await trio.sleep(0.02)
            _say(f"O {overlapped} {quorum.fsyncs}")

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            await nursery.start(quorum.run)
            nursery.start_soon(report)
            for broker_id in range(first_broker, first_broker + writers):
                nursery.start_soon(writer, broker_id)

    trio.run(main)


if __name__ == "__main__":
    run(Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
