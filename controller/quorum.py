"""A node's quorum, assembled: the raft runner, the controller host, the transaction log.

`open_quorum` opens and recovers the data dir and builds the rooms, each knowing only those
below it: the controller host (`host.py`) above the raft driver (`raft/driver.py`, run on
trio by `raft/runner.py`) above the log (`log/`). `Quorum` runs their tasks and is what
`RunningNode`, the handlers and the metrics use: `submit`, `running`, `controller`, `hwm`,
`raft_request`, `describe_quorum`, `describe_cluster`, `stop`.

Every node runs this, one path: the embedded default (no quorum setting: this node is the
lone voter at its CONTROLLER listener), one or several static voters, a dynamic quorum.
A lone voter's disk is the majority, so everything on it is committed: its snapshot, its
metadata log and its transaction log are replayed at open, and a level it cannot run, a
record it cannot read or a log that lost records refuses the start (exit 2) before anything
is written. A voter of several replays nothing past its newest snapshot at open: the log's
records are replayed as the quorum commits them.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from typing import Any

import trio
from kraftpy.controller import image
from kraftpy.controller.host import ControllerHost, Deferred, HostState, NodeStopped
from kraftpy.controller.raft.config import RaftConfig
from kraftpy.controller.raft.runner import RaftRunner, wall_clock_ms
from kraftpy.controller.raft.voters import VoterSet
from kraftpy.protocol.messages.describe_cluster_response import DescribeClusterBroker
from trio.lowlevel import Abort, current_task, reschedule, wait_task_rescheduled

log = logging.getLogger("kraftpy.raft")

TICK_INTERVAL_S = 0.1
NOT_CONTROLLER = 41

__all__ = ["NodeStopped", "Quorum", "QuorumError", "open_quorum"]


class QuorumError(RuntimeError):
    """The quorum cannot start or go on; with `exit_code` 2 a configuration value is wrong
    (the message names the key)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class Quorum:
    """The node's rooms and their tasks."""

    def __init__(self, *, storage: Any, runner: RaftRunner, host: ControllerHost,
                 txn: Any, node_id: int, controller_listeners: tuple[Any, ...] = (),
                 supported_features: dict[str, tuple[int, int]] | None = None) -> None:
        self.storage = storage
        self.runner = runner
        self.host = host
        self.txn = txn
        self.node_id = node_id
        self.cluster_id = storage.cluster_id
        self.clock_ms: Callable[[], int] = runner.clock_ms
        self.controller_listeners = controller_listeners
        self.supported_features = dict(supported_features or {})
        # What this process registers with the leader (KIP-919): a new incarnation per start.
        self.incarnation = uuid.uuid4()
        self._committed = trio.Event()
        self._tick_now = trio.Event()
        self._jobs: trio.Nursery | None = None
        host.on_commit = self._on_commit
        host.on_activated = lambda: self._tick_now.set()
        host.start_job = self._start_job
        runner.on_failure = self._failed
        if txn is not None:
            txn.on_durable = host.txn_durable_moved
        from kraftpy.controller.raft.dynamic import VoterChanges
        self.voter_changes = VoterChanges(runner, runner.core.config.request_timeout_ms)

    # --- what RunningNode, the handlers and the metrics use ------------------------------------
    @property
    def raft(self) -> Any:
        """The Raft core (its role, epoch, leader, voters, log offsets)."""
        return self.runner.core

    @property
    def controller(self) -> Any:
        return self.host.controller

    @property
    def running(self) -> bool:
        """Whether `submit` handles requests here: the active leader, not stopping."""
        return self.host.state is HostState.ACTIVE

    @property
    def hwm(self) -> tuple[int, int]:
        """The committed offsets: the metadata log's high watermark and the transaction
        log's durable count."""
        return self.host.hwm, self.host.txn_durable

    @property
    def fsyncs(self) -> int:
        return self.runner.fsyncs

    @property
    def fsync_timings(self) -> Any:
        return self.runner.fsync_timings

    @property
    def pass_timings(self) -> Any:
        return self.runner.pass_timings

    @property
    def queue_timings(self) -> Any:
        return self.runner.queue_timings

    @property
    def leader_id(self) -> int | None:
        return self.runner.core.leader_id

    @property
    def lone_voter(self) -> bool:
        """This node is the only voter: its own disk is the majority."""
        return self.runner.core.voters.ids == {self.node_id}

    @property
    def keeps_transactions(self) -> bool:
        return self.txn is not None

    @property
    def on_new_controller(self) -> Callable[[Any], None] | None:
        """Told of each controller rebuilt (the security layer's ACLs)."""
        return self.host.on_new_controller

    @on_new_controller.setter
    def on_new_controller(self, value: Callable[[Any], None] | None) -> None:
        self.host.on_new_controller = value

    async def submit(self, request: Any, api_version: int, listener: str | None = None) -> Any:
        answer = self.host.handle(request, api_version, listener)
        if type(answer) is not Deferred:
            return answer
        overlapped = self.runner.overlapped
        if overlapped is not None and not answer.done:
            overlapped.appended()  # split: half the writers in play may begin their round now
        if not answer.done:  # parked until the commit resolves it (no Event per request)
            answer.waiter, answer.wake = current_task(), reschedule

            def abort(_: Any) -> Abort:
                answer.wake = None  # the caller is gone: its answer is dropped, not sent
                return Abort.SUCCEEDED

            await wait_task_rescheduled(abort)
        if answer.response is None:
            raise NodeStopped("the quorum stopped before this request was committed")
        return answer.response

    def describe_quorum(self, request: Any, version: int) -> Any:
        """DescribeQuorum as the Raft core answers it (NOT_LEADER_OR_FOLLOWER off the
        leader), whether or not this node is active yet."""
        return self.runner.core.describe_quorum(request, version, self.clock_ms())

    def describe_cluster(self, request: Any, version: int, listener: str) -> Any:
        """DescribeCluster on a CONTROLLER listener, answered by any voter as Kafka's
        controllers answer it (ControllerApis.handleDescribeCluster): the controllers with an
        endpoint on that listener (the voter set's) and the Raft leader, -1 if none."""
        response = image.describe_cluster(self.controller, request, version, listener)
        if response.error_code == 0 and response.endpoint_type == image.CONTROLLER_ENDPOINT:
            core = self.runner.core
            response.controller_id = -1 if core.leader_id is None else core.leader_id
            found = [(i, node.endpoint(listener)) for i, node in sorted(core.voters.voters.items())]
            response.brokers = [DescribeClusterBroker(broker_id=i, host=e[0], port=e[1],
                                                      rack=None)
                                for i, e in found if e is not None]
        return response

    async def raft_request(self, request: Any, version: int) -> Any:
        return await self.runner.raft_request(request, version)

    async def wait_for_high_watermark(self, past: int) -> None:
        while self.host.hwm <= past and self.runner.failure is None \
                and not self.runner.stopping:
            await self._committed.wait()

    async def finish_writes(self, timeout_s: float) -> None:
        """Wait (at most `timeout_s`) until everything appended, what lingers in the core
        included, is committed: a lone voter stopping cleanly leaves no write behind."""
        with trio.move_on_after(timeout_s):
            while self.runner.failure is None and not self.host.written:
                self.runner.kick()
                await self._committed.wait()

    def stop(self) -> None:
        """Leave the quorum: a leader resigns (EndQuorumEpoch), the answers still waiting
        fail with NOT_CONTROLLER (the client asks the next leader), and every raft request
        still parked is answered once `run` ends. Called before the server drains, so that
        nothing waits for a commit the drained connections could no longer bring."""
        self.host.stop()
        self.runner.stop()

    # --- the tasks ----------------------------------------------------------------------------
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
                  ) -> None:
        """Until `stop` (or a failure): the raft runner, the transaction log's fsync rounds,
        the controller's timers, this controller's registration, snapshot jobs."""
        try:
            async with trio.open_nursery() as nursery:
                self._jobs = nursery
                if self.txn is not None:
                    nursery.start_soon(self.txn.run, self.runner.fail)
                nursery.start_soon(self._ticker)
                if self.controller_listeners:
                    from kraftpy.controller.registration import register_controller
                    nursery.start_soon(register_controller, self)
                await self.runner.run(task_status=task_status)
                nursery.cancel_scope.cancel()
        finally:
            self._jobs = None
            self._on_commit()
        if self.runner.failure is not None:
            raise QuorumError(str(self.runner.failure)) from self.runner.failure

    async def _ticker(self) -> None:
        """The controller's timers every 100 ms, at once when it becomes active, and again as
        soon as what waits has run while a timer's work comes in parts (a fence's leader
        moves: each part a bounded event, requests answered between them)."""
        host = self.host
        while True:
            if host.state is HostState.MIGRATING:
                await self._migrate()
            self.runner.step(host.tick)
            if host.state is HostState.ACTIVE and host.controller.has_pending_work():
                await trio.sleep(0)  # every task runnable now goes first
                continue
            self._tick_now = trio.Event()
            with trio.move_on_after(TICK_INTERVAL_S):
                await self._tick_now.wait()

    async def _migrate(self) -> None:
        """Move the transactional ids of kraftpy's former one-partition layout to where Kafka
        looks for them, as the active lone voter and before it answers anything: each step
        committed before the next is asked for, so a crash anywhere leaves every id readable
        and the next start goes on from there."""
        host = self.host
        activation = host.activations
        while host.state is HostState.MIGRATING and host.activations == activation:
            end = self.runner.step(host.migration_step)
            if end is None:
                return
            txn_end = host.txn.end if host.txn is not None else 0
            self.runner.kick()
            while (host.hwm < end or host.txn_durable < txn_end) \
                    and host.activations == activation and host.state is HostState.MIGRATING:
                await self._committed.wait()

    def _on_commit(self) -> None:
        self._committed.set()
        self._committed = trio.Event()

    def _failed(self, exc: BaseException) -> None:
        self.host.fail(exc)
        self._on_commit()

    def _start_job(self, job: Any) -> None:
        if self._jobs is None:  # not running (a test driving the node step by step): here
            self.host.run_job_here(job)
            return
        self._jobs.start_soon(self._run_job, job)

    async def _run_job(self, job: Any) -> None:
        """A snapshot written (or retention applied) in a worker thread, off the loop."""
        try:
            with self.runner.sharing_the_disk():
                await trio.to_thread.run_sync(job.run)
        except OSError as exc:
            if self.host.job_failed(job, exc):
                self.runner.fail(OSError(exc.errno, f"writing a snapshot of the metadata log "
                                                    f"failed: {exc}"))
        finally:
            self.runner.step(lambda: self.host.job_done(job))


def configured_voters(config: Any) -> dict[int, tuple[str, int]] | None:
    """The static voters of `controller.quorum.voters`; None when it is not set."""
    from kraftpy.controller.raft.config import RaftConfigError, parse_voters

    text = config.properties.get("controller.quorum.voters", "").strip()
    if not text:
        return None
    try:
        voters = parse_voters(text)
    except RaftConfigError as exc:
        raise QuorumError(str(exc), 2) from None
    if config.node_id not in voters:
        raise QuorumError(f"node.id {config.node_id} is not one of controller.quorum.voters "
                          f"({', '.join(map(str, sorted(voters)))}); kraftpy does not run "
                          "as an observer of a static quorum", 2)
    return voters


def lone_voter(config: Any) -> dict[int, tuple[str, int]]:
    """Neither `controller.quorum.voters` nor `.bootstrap.servers`: this node is the lone
    voter, at its first controller listener's advertised address."""
    advertised = config.advertised(config.controller_listener_names[0])
    return {config.node_id: (advertised.host, advertised.port)}


def open_quorum(config: Any, voters: dict[int, tuple[str, int]],
                bootstrap: dict[int, tuple[str, int]] | None = None,
                clock_ms: Callable[[], int] = wall_clock_ms) -> Quorum:
    """Format if new, open and recover the data dir, build the rooms. With `bootstrap`
    (`controller.quorum.bootstrap.servers`) the quorum is KIP-853's dynamic one: voters and
    kraft.version from the log (`dynamic.recorded_voters`); else the static `voters`."""
    from kraftpy.controller import recovery
    from kraftpy.controller.feature_control import SUPPORTED_FEATURES
    from kraftpy.controller.quorum_controller import QuorumController
    from kraftpy.controller.raft.config import RaftConfigError
    from kraftpy.controller.transaction_log import TransactionLog

    started = time.monotonic()
    try:
        raft_config = RaftConfig.from_properties(config.properties)
    except RaftConfigError as exc:
        raise QuorumError(str(exc), 2) from None
    static_lone = bootstrap is None and set(voters) == {config.node_id}
    storage = recovery.open_storage(config, downloads=not static_lone)
    try:
        directory_id = recovery.directory_id(storage)
        settings = recovery.node_settings(config, storage)
        listener = config.controller_listener_names[0]
        advertised = config.advertised(listener)
        voter_set, history = VoterSet.static(voters, listener), None
        if bootstrap is not None or (static_lone and storage.kraft_version):
            from kraftpy.controller.raft.dynamic import recorded_voters

            voter_set, history = recorded_voters(storage)
        elif storage.kraft_version:
            raise QuorumError("a quorum of several static voters runs at kraft.version 0 "
                              "(controller.quorum.voters); this data dir has kraft.version "
                              f"{storage.kraft_version}", 2)
        lone = voter_set.ids == {config.node_id} or static_lone
        state = None
        if lone:  # its disk is the majority: all of it is committed, replayed now
            state = recovery.recover_lone_voter(config, storage, settings)
            recovery.log_recovered(config, state.stats, storage, started)

        def make_controller() -> QuorumController:
            return QuorumController(settings)

        runner = RaftRunner(
            node_id=config.node_id, cluster_id=storage.cluster_id, log_=storage.metadata,
            snapshots=storage.snapshots,
            raft_config=raft_config, voters=voter_set, addresses=voters,
            directory_id=directory_id, endpoint=(listener, advertised.host, advertised.port),
            clock_ms=clock_ms, kraft_version=storage.kraft_version, voter_history=history,
            bootstrap=bootstrap, high_watermark=state.applied if state else 0)
        txn = TransactionLog(storage.txn) if lone and storage.txn is not None else None
        host = ControllerHost(driver=runner.driver, log_=storage.metadata,
                              snapshots=storage.snapshots, make_controller=make_controller,
                              clock_ms=clock_ms, txn=txn, lone=state)
        runner.driver.listener = host
        quorum = Quorum(storage=storage, runner=runner, host=host, txn=txn,
                        node_id=config.node_id,
                        controller_listeners=tuple(
                            (ep.name, ep.host, ep.port, ep.security_protocol)
                            for ep in settings.controller_endpoints()),
                        supported_features=dict(SUPPORTED_FEATURES))
    except RaftConfigError as exc:  # quorum-recovery.json unreadable: refuse the start
        storage.close()
        raise QuorumError(str(exc), 2) from None
    except BaseException:
        storage.close()
        raise
    core = quorum.raft
    log.info("opened %s as %s %d of %s: log %d-%d, epoch %d", config.metadata_log_dir,
             "voter" if core.is_voter else "observer", config.node_id, sorted(core.voters.ids),
             storage.metadata.log_start_offset, storage.metadata.log_end_offset, core.epoch)
    return quorum
