"""A lone voter's quorum in-process: what `kraftpy serve` runs when it is the only voter.

`open_lone` formats (if new) and opens a data dir as `kraftpy serve` does for a node with
neither `controller.quorum.voters` nor `.bootstrap.servers` (`quorum.lone_voter`), with
`controller.quorum.append.linger.ms` 0 so that tests run at fsync speed. `running_lone`
starts its tasks and waits until it answers with the bootstrap committed. `GatedFsync`
holds each fsync round of the metadata log until the test lets it go; `without_fsync_ring`
keeps every round the runner's own, `split_writers` splits them into overlapped rounds as
soon as 16 writers are in play, and `record_durable` notes each fsync's end as it completes
(however it ran); `settle` runs the
node's own steps (the driver's poll, the runner's fsync rounds) synchronously, for tests
that need an exact order of commits and requests.

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
from kraftpy.controller import quorum as node_quorum
from kraftpy.controller.config import ServerConfig, build_config
from kraftpy.controller.feature_control import SUPPORTED_FEATURES
from kraftpy.controller.host import Deferred, HostState
from kraftpy.controller.log.fsync_ring import FsyncRing
from kraftpy.controller.log.partition_log import FlushTicket
from kraftpy.controller.quorum import Quorum
from kraftpy.controller.raft import overlapped_rounds, runner
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


def open_lone(data: Path, overrides: Mapping[str, str] | None = None,
              clock: list[int] | None = None) -> Quorum:
    """The lone voter's quorum over `data` (formatted if new), recovered, not yet running;
    with `clock` (a one-item list of ms) time is the test's."""
    config = lone_config(data, overrides)
    return node_quorum.open_quorum(
        config, node_quorum.lone_voter(config),
        clock_ms=runner.wall_clock_ms if clock is None else (lambda: clock[0]))


async def running_lone(quorum: Quorum, nursery: trio.Nursery) -> None:
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


async def broker(quorum: Quorum, broker_id: int) -> AllocateProducerIdsRequest:
    """Register and unfence broker `broker_id`; its producer-id block request."""
    registered = await quorum.submit(registration(broker_id), 4)
    assert registered.error_code == 0, registered
    beat = await quorum.submit(BrokerHeartbeatRequest(
        broker_id=broker_id, broker_epoch=registered.broker_epoch,
        current_metadata_offset=quorum.storage.metadata.log_end_offset,
        want_fence=False, want_shut_down=False), 1)
    assert not beat.is_fenced, beat
    return AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=registered.broker_epoch)


async def wait_for(condition: Any, what: str, seconds: float = 10) -> None:
    """Poll `condition` until it holds; fail naming `what` after `seconds`."""
    with trio.move_on_after(seconds):
        while not condition():
            await trio.sleep(0.001)
    assert condition(), f"timed out waiting for {what}"


def without_fsync_ring(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every fsync round is the runner's own (on the loop or in a worker thread)."""
    monkeypatch.setattr(overlapped_rounds.OverlappedRounds, "open",
                        classmethod(lambda cls, run: None))


def split_writers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Overlapped rounds (two halves of the writers, fsynced by io_uring) as soon as 16
    writers are in play, however quick this machine's fsync is."""
    monkeypatch.setattr(overlapped_rounds, "SPLIT_MIN_FSYNC_S", 0.0)
    monkeypatch.setattr(overlapped_rounds, "SPLIT_MIN_WRITERS", 16)
    monkeypatch.setattr(overlapped_rounds, "SPLIT_ABOVE_FSYNCS", 0.0)
    monkeypatch.setattr(overlapped_rounds, "JOIN_BELOW_FSYNCS", 0.0)


def record_durable(monkeypatch: pytest.MonkeyPatch, quorum: Quorum, durable: list[int]
                   ) -> None:
    """Append the metadata log end each fsync covered, once it has completed: the runner's
    own (`FlushTicket.fsync` returned) and io_uring's (its completion reaped, success; the
    round covers the log's end when it was submitted, everything being written by then)."""
    real_fsync, real_reap = FlushTicket.fsync, FsyncRing.reap

    def fsync(ticket: FlushTicket) -> None:
        real_fsync(ticket)
        if ticket.directory is not None and ticket.directory.name == "__cluster_metadata-0":
            durable.append(ticket.end_offset)

    rounds: dict[int, list[int]] = {}  # the ring's tag -> [the end it covers, fsyncs left]
    real_submit = FsyncRing.submit

    def submit(ring: FsyncRing, fds: list[int], user_data: int) -> None:
        rounds[user_data] = [quorum.runner.log.log_end_offset, len(fds)]
        real_submit(ring, fds, user_data)

    def reap(ring: FsyncRing) -> list[tuple[int, int]]:
        done = real_reap(ring)
        for tag, result in done:
            entry = rounds.get(tag)
            if entry is not None and result == 0:
                entry[1] -= 1
                if entry[1] == 0:
                    durable.append(rounds.pop(tag)[0])
        return done

    monkeypatch.setattr(FlushTicket, "fsync", fsync)
    monkeypatch.setattr(FsyncRing, "submit", submit)
    monkeypatch.setattr(FsyncRing, "reap", reap)


class GatedFsync:
    """The metadata log's fsync rounds parked until the test opens each (by index, from
    when this is made) or `release`s them all, recording the log end offset each round
    covered when its fsync began; a round listed in `fail_rounds` fails with EIO instead."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.began: list[int] = []
        self.fail_rounds: set[int] = set()
        self._gates: list[threading.Event] = []
        self._lock = threading.Lock()
        self._released = False
        gated = self
        real_begin = runner.RaftRunner._begin_round

        def begin_round(run: runner.RaftRunner) -> tuple[list[int], FlushTicket]:
            offsets, ticket = real_begin(run)
            real = ticket.fsync

            def fsync() -> None:
                with gated._lock:
                    index = len(gated.began)
                    gated.began.append(ticket.end_offset)
                    gate = gated._gate(index)
                assert gate.wait(10), "the test never opened this round"
                if index in gated.fail_rounds:
                    raise OSError(5, "Input/output error")
                real()

            ticket.fsync = fsync  # type: ignore[method-assign]
            return offsets, ticket

        monkeypatch.setattr(runner.RaftRunner, "_begin_round", begin_round)
        without_fsync_ring(monkeypatch)  # what it holds is the runner's own fsync
        # A held fsync must wait in a worker thread: on the event loop (the runner's inline
        # fsync) it would block the very test that is to open it.
        monkeypatch.setattr(runner, "INLINE_FSYNC_MAX_S", -1.0)

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


def stepped_lone(data: Path, overrides: Mapping[str, str] | None = None,
                 clock: list[int] | None = None) -> Quorum:
    """A lone voter that only the test moves (`settle`, `ask`): elected, its bootstrap
    committed, no task running; with `clock` (a one-item list of ms) time is the test's."""
    quorum = open_lone(data, overrides, clock)
    return start_stepped(quorum)


def start_stepped(quorum: Quorum) -> Quorum:
    """`stepped_lone` of a quorum already opened."""
    try:
        quorum.runner.step(quorum.runner.driver.start)
        settle(quorum)
        while quorum.host.state is HostState.MIGRATING:  # each step committed before the next
            quorum.runner.step(quorum.host.migration_step)
            settle(quorum)
        settle(quorum, tick=True)
        settle(quorum)
    except BaseException:
        quorum.storage.lock.release()  # as a crash leaves it: not closed cleanly
        raise
    assert quorum.running and quorum.controller.features.metadata_version
    return quorum


def ask(quorum: Quorum, request: Any, version: int) -> Any:
    """A request through the node's own road, committed by the test's `settle`."""
    answer = quorum.host.handle(request, version)
    if isinstance(answer, Deferred):
        settle(quorum)
        assert answer.done, "not committed"
        return answer.response
    return answer


def settle(quorum: Quorum, *, tick: bool = False) -> None:
    """Without the node's tasks: poll the core, then run the fsync rounds it asks for (and
    the transaction log's) until it asks for none, and with `tick` run the controller's
    timers once (their records left to the next `settle`). The order of commits and
    requests is then the test's alone."""
    run = quorum.runner
    run.step(run.driver.poll)
    while run.flushes_asked or (quorum.txn is not None and quorum.txn.durable < quorum.txn.end):
        if run.flushes_asked:
            run.flush_now()
        if quorum.txn is not None and quorum.txn.durable < quorum.txn.end:
            quorum.txn.flush()
        run.step(run.driver.poll)
    if tick:
        run.step(quorum.host.tick)
    assert run.failure is None, run.failure


def allocate_blocks(quorum: Quorum, count: int, broker_id: int = 2) -> None:
    """`count` producer-id blocks for a broker (registered and unfenced on first use), each
    committed: one ProducerIdsRecord each, through the node's road."""
    registered = quorum.controller.cluster.brokers.get(broker_id)
    if registered is None or registered.fenced:
        answer = ask(quorum, registration(broker_id), 4)
        beat = ask(quorum, BrokerHeartbeatRequest(
            broker_id=broker_id, broker_epoch=answer.broker_epoch,
            current_metadata_offset=quorum.storage.metadata.log_end_offset,
            want_fence=False, want_shut_down=False), 1)
        assert not beat.is_fenced, beat
        epoch = answer.broker_epoch
    else:
        epoch = registered.epoch
    request = AllocateProducerIdsRequest(broker_id=broker_id, broker_epoch=epoch)
    for _ in range(count):
        assert ask(quorum, request, 0).error_code == 0


def snapshot_now(data: Path, overrides: Mapping[str, str] | None = None) -> int:
    """Start the node on `data` (stopped) with a policy that asks for a snapshot at its first
    commit, its new epoch's LeaderChange: a snapshot at the log end, written and trimming the
    log as every snapshot of the node does; then a clean stop. Its end offset. A controller
    only: no producer-id block of its own for its timers to claim."""
    from kraftpy.controller.log.files import read_meta_properties
    from kraftpy.controller.log.snapshots import list_snapshots

    node = stepped_lone(data, {**(overrides or {}),
                               "cluster.id": read_meta_properties(data)["cluster.id"],
                               "process.roles": "controller",
                               "listeners": "CONTROLLER://127.0.0.1:0",
                               "metadata.max.idle.interval.ms": "0",
                               "metadata.log.max.record.bytes.between.snapshots": "1"})
    node.storage.close()
    return list_snapshots(data / "__cluster_metadata-0")[-1][0].end_offset
