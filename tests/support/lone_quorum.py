"""A lone voter's quorum in-process: what `kraftpy serve` runs when it is the only voter.

`open_lone` formats (if new) and opens a data dir as `node.open_quorum` does for a node with
neither `controller.quorum.voters` nor `.bootstrap.servers` (`shell.lone_voter`), with
`controller.quorum.append.linger.ms` 0 so that tests run at fsync speed. `running_lone`
starts its tasks and waits until it answers with the bootstrap committed. `GatedFsync`
holds each fsync round until the test lets it go; `settle` carries out the shell's pending
steps synchronously, for tests that need an exact order of commits and requests.

    quorum = open_lone(tmp_path / "data")
    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        blocks = await broker(quorum, 2)
        reply = await quorum.submit(blocks, 0)
        quorum.stop()
    quorum.storage.close()
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio
from kraftpy.controller.config import ServerConfig, build_config
from kraftpy.controller.feature_control import SUPPORTED_FEATURES
from kraftpy.controller.log.storage import FlushRound
from kraftpy.controller.raft import shell
from kraftpy.controller.raft.shell import RaftQuorum
from kraftpy.protocol.messages.allocate_producer_ids_request import AllocateProducerIdsRequest
from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraftpy.protocol.messages.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
    Listener,
)

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"


def lone_config(data: Path, overrides: Mapping[str, str] | None = None) -> ServerConfig:
    """A combined node 1 whose metadata log is `data`, in cluster CLUSTER."""
    return build_config({
        "process.roles": "broker,controller", "node.id": "1",
        "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
        "controller.listener.names": "CONTROLLER", "metadata.log.dir": str(data),
        "cluster.id": CLUSTER, "controller.quorum.append.linger.ms": "0",
        **(overrides or {})})


def open_lone(data: Path, overrides: Mapping[str, str] | None = None) -> RaftQuorum:
    """The lone voter's quorum over `data` (formatted if new), recovered, not yet running."""
    config = lone_config(data, overrides)
    return shell.open_quorum(config, shell.lone_voter(config))


async def running_lone(quorum: RaftQuorum, nursery: trio.Nursery) -> None:
    """Run `quorum` in `nursery` until it is the active controller with its bootstrap (the
    metadata.version) committed: what a client may rely on once the node answers."""
    await nursery.start(quorum.run)
    with trio.fail_after(10):
        while not (quorum.running and quorum.controller.features.metadata_version
                   and quorum.hwm[0] == quorum.raft.log.end_offset):
            await trio.sleep(0.001)


def registration(broker_id: int, cluster_id: str = CLUSTER) -> BrokerRegistrationRequest:
    """A broker supporting every feature level kraftpy supports, on a port of its own."""
    return BrokerRegistrationRequest(
        broker_id=broker_id, cluster_id=cluster_id, incarnation_id=uuid.uuid4(),
        listeners=[Listener(name="PLAINTEXT", host="127.0.0.1", port=9092 + broker_id,
                            security_protocol=0)],
        features=[Feature(name=name, min_supported_version=low, max_supported_version=high)
                  for name, (low, high) in sorted(SUPPORTED_FEATURES.items())],
        rack=None, log_dirs=[uuid.uuid4()])


async def broker(quorum: RaftQuorum, broker_id: int) -> AllocateProducerIdsRequest:
    """Register and unfence broker `broker_id`; its producer-id block request."""
    registered = await quorum.submit(registration(broker_id), 4)
    assert registered.error_code == 0, registered
    beat = await quorum.submit(BrokerHeartbeatRequest(
        broker_id=broker_id, broker_epoch=registered.broker_epoch,
        current_metadata_offset=quorum.storage.metadata_end_offset(),
        want_fence=False, want_shut_down=False), 1)
    assert not beat.is_fenced, beat
    return AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=registered.broker_epoch)


async def wait_for(condition: Any, what: str, seconds: float = 10) -> None:
    """Poll `condition` until it holds; fail naming `what` after `seconds`."""
    with trio.move_on_after(seconds):
        while not condition():
            await trio.sleep(0.001)
    assert condition(), f"timed out waiting for {what}"


class GatedFsync:
    """FlushRound.fsync parked until the test opens its round (by index, from when this is
    made) or `release`d, recording the metadata end offset each round covered when its fsync
    began; a round listed in `fail_rounds` fails with EIO instead of fsyncing."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.began: list[int] = []
        self.fail_rounds: set[int] = set()
        self._gates: list[threading.Event] = []
        self._lock = threading.Lock()
        self._released = False
        real = FlushRound.fsync
        gated = self

        def fsync(flush: FlushRound) -> None:
            with gated._lock:
                index = len(gated.began)
                gated.began.append(flush.metadata.end_offset)
                gate = gated._gate(index)
            assert gate.wait(10), "the test never opened this round"
            if index in gated.fail_rounds:
                raise OSError(5, "Input/output error")
            real(flush)

        monkeypatch.setattr(FlushRound, "fsync", fsync)
        # A held fsync must wait in a worker thread: on the event loop (the shell's inline
        # fsync) it would block the very test that is to open it.
        monkeypatch.setattr(shell, "INLINE_FSYNC_MAX_S", -1.0)

    def _gate(self, index: int) -> threading.Event:
        while len(self._gates) <= index:
            self._gates.append(threading.Event())
            if self._released:
                self._gates[-1].set()
        return self._gates[index]

    def release(self) -> None:
        """Open every round, this one and those to come."""
        with self._lock:
            self._released = True
            for gate in self._gates:
                gate.set()

    def open(self, index: int) -> None:
        with self._lock:
            self._gate(index).set()


def settle(quorum: RaftQuorum, *, tick: bool = False) -> None:
    """Without its tasks: poll the core, then fsync and report every Flush it asked for, until
    it asks for none, and with `tick` run the controller's timers once (their records left to
    the next `settle`). The order of commits and requests is then the test's alone."""
    step = quorum._guard
    step(lambda: quorum._do(quorum.raft.poll(quorum.clock_ms())))
    while quorum._flushes:
        offsets = [o for o in quorum._flushes if o is not None]
        quorum._flushes.clear()
        flush = quorum.storage.begin_flush()
        flush.fsync()
        _, txn_hwm = quorum.storage.complete_flush(flush)
        if txn_hwm > quorum.hwm[1]:
            quorum.hwm = (quorum.hwm[0], txn_hwm)
            step(quorum._release)
        for offset in offsets:
            step(lambda o=offset: quorum._do(quorum.raft.on_flushed(o, quorum.clock_ms())))
        step(lambda: quorum._do(quorum.raft.poll(quorum.clock_ms())))
    if tick:
        step(quorum._tick)
    assert quorum._failed is None, quorum._failed
