"""Control-logic speed: requests/s through QuorumController.handle (+ apply), in process.

The peer in the same run is the codec cost of the same exchange (decode the request frame,
encode the response frame), which every served request pays anyway: the ratio says how much
the decision itself adds on top of the bytes.

    python3 benchmarks/controller.py [--seconds 1.0]
"""

from __future__ import annotations

import argparse
import time
import uuid
from collections.abc import Callable

from kraftpy.controller.quorum_controller import QuorumController
from kraftpy.controller.settings import ControllerSettings
from kraftpy.protocol.framing import decode_request, encode_request, encode_response
from kraftpy.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraftpy.protocol.messages.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
)
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest


class Node:
    """The loop without I/O: handle, apply at the log end, commit at once."""

    def __init__(self, block_size: int = 1000) -> None:
        self.qc = QuorumController(ControllerSettings(cluster_id="bench-cluster",
                                                      producer_id_block_size=block_size))
        self.end = 0
        self.txn_end = 0
        self.now = 1_000
        self.qc.activate(leader_epoch=1, now_ms=self.now)
        self.tick()
        self.tick()

    def run(self, result) -> object:
        if result.records or result.txn_records:
            self.qc.apply(result, offset=self.end, txn_offset=self.txn_end)
            self.end += len(result.records)
            self.txn_end += len(result.txn_records)
            self.qc.on_committed(self.end, self.txn_end)
        return result.response

    def handle(self, request, version: int) -> object:
        return self.run(self.qc.handle(request, version, now_ms=self.now, next_offset=self.end))

    def tick(self) -> None:
        self.run(self.qc.tick(now_ms=self.now, next_offset=self.end))


def rate(fn: Callable[[], object], seconds: float) -> float:
    n, start = 0, time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(200):
            fn()
        n += 200
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start)


def codec(request, version: int, response) -> Callable[[], object]:
    frame = encode_request(request, version, 7, "bench")[4:]

    def once() -> object:
        header, _ = decode_request(frame)
        return encode_response(header.correlation_id, request.API_KEY, version, response)
    return once


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    seconds = parser.parse_args().seconds

    node = Node()
    node.handle(BrokerRegistrationRequest(
        broker_id=2, cluster_id="bench-cluster", incarnation_id=uuid.uuid4(),
        features=[Feature(name="metadata.version", min_supported_version=7,
                          max_supported_version=27)], log_dirs=[uuid.uuid4()]), 4)
    epoch = node.qc.cluster.brokers[2].epoch
    beat = BrokerHeartbeatRequest(broker_id=2, broker_epoch=epoch, current_metadata_offset=10**9)
    node.handle(beat, 1)
    txn_state = {"pid": -1, "epoch": -1}

    def idempotent() -> object:
        response = node.handle(InitProducerIdRequest(transactional_id=None,
                                                     transaction_timeout_ms=60000), 4)
        if response.error_code:  # a block claim is committed by the next tick, as the loop does
            node.tick()
        return response

    def transactional() -> object:
        response = node.handle(InitProducerIdRequest(
            transactional_id="bench-txn", transaction_timeout_ms=60000,
            producer_id=txn_state["pid"], producer_epoch=txn_state["epoch"]), 4)
        if response.error_code:
            node.tick()
        txn_state["pid"], txn_state["epoch"] = response.producer_id, response.producer_epoch
        if response.producer_epoch >= 30000:
            txn_state["pid"] = txn_state["epoch"] = -1
        return response

    cases = [
        ("InitProducerId idempotent", idempotent,
         InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 4),
        ("InitProducerId transactional bump", transactional,
         InitProducerIdRequest(transactional_id="bench-txn", transaction_timeout_ms=60000,
                               producer_id=5, producer_epoch=3), 4),
        ("AllocateProducerIds", lambda: node.handle(
            AllocateProducerIdsRequest(broker_id=2, broker_epoch=epoch), 0),
         AllocateProducerIdsRequest(broker_id=2, broker_epoch=epoch), 0),
        ("BrokerHeartbeat (no change)", lambda: node.handle(beat, 1), beat, 1),
    ]
    print(f"{'operation':36} {'controller/s':>13} {'codec peer/s':>13} {'ratio':>7}")
    for name, fn, request, version in cases:
        response = fn()
        ours = rate(fn, seconds)
        peer = rate(codec(request, version, response), seconds)
        print(f"{name:36} {ours:13,.0f} {peer:13,.0f} {ours / peer:7.2f}")


if __name__ == "__main__":
    main()
