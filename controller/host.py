"""The controller host: requests in, records to the quorum, answers out once committed.

Kafka's QuorumController event side, sans-IO: the trio node (`quorum.py`) and the
deterministic simulation call the same methods, so what the simulation checks is what the
server does.

- `handle`: the active controller handles a request (`QuorumController.handle`), appends the
  result's records through the raft driver (its transaction records to the transaction log
  first), applies them to its state at once, and defers the answer (`Deferred`) until the
  high watermark, and the transaction log's durable count, pass everything it wrote and
  everything written before it (Kafka's DeferredEventQueue). Elsewhere it answers
  NOT_CONTROLLER (NOT_COORDINATOR for InitProducerId, which a client answers by finding the
  coordinator again).
- As `RaftListener` it hears the driver: a commit releases deferred answers, replays what
  this controller has not applied (a follower's whole log, a new leader's predecessors'
  tail) and feeds the committed image its records; a leadership change moves between the
  states below; an installed snapshot rebuilds the state from it.
- States (`HostState`): FOLLOWER replays what the quorum commits; ELECTED leads but waits
  until its whole log is committed and replayed; MIGRATING is active but first moves
  kraftpy's former transaction-log layout; ACTIVE answers; STOPPED and FAILED answer nothing
  more. Losing the leadership fails every deferred answer with NOT_CONTROLLER; the committed
  image becomes the controller (what it applied ahead of the commit is dropped).
- A follower holds its state once: its controller is its committed image (`shared`), so a
  downloaded snapshot, a restart and every commit are replayed once. On activation the leader
  keeps that state as its controller and builds its committed image apart, off the loop
  (`image_job`; no snapshot until it is done), as Kafka's controller answers once its own
  state is loaded while its MetadataLoader's image is published apart. A node that keeps a
  transaction log (a lone voter) holds the two apart from the start.
"""

from __future__ import annotations

import enum
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kraftpy.controller import replay
from kraftpy.controller.committed_image import CommittedImage, SnapshotGenerator
from kraftpy.controller.raft.driver import RaftDriver
from kraftpy.protocol.metadata_frame import encode_metadata_record

log = logging.getLogger("kraftpy.controller")

NOT_CONTROLLER = 41
NOT_COORDINATOR = 16
COORDINATOR_NOT_AVAILABLE = 15
INIT_PRODUCER_ID = 22


class HostState(enum.Enum):
    FOLLOWER = "follower"
    ELECTED = "elected"
    MIGRATING = "migrating"
    ACTIVE = "active"
    STOPPED = "stopped"
    FAILED = "failed"


class NodeStopped(RuntimeError):
    """The controller stopped (or failed) before this request could be answered."""


@dataclass(eq=False, slots=True)
class Deferred:
    """An answer released once the metadata log has committed everything below `end` and
    the transaction log everything below `txn_end`; `response` None: the node stopped."""

    end: int
    txn_end: int
    request: Any
    version: int
    response: Any
    done: bool = False
    # Called with `waiter` once resolved: whoever parked on the answer (a trio task, given to
    # `trio.lowlevel.reschedule`): no callable is made per answer.
    wake: Callable[[Any], None] | None = None
    waiter: Any = None

    def resolve(self, response: Any) -> None:
        self.response = response
        self.done = True
        if self.wake is not None:
            self.wake(self.waiter)


def error_response(request: Any, version: int, code: int) -> Any:
    from kraftpy.controller.api.errors import error_response as build

    return build(request.API_KEY, request, version, code)


def log_events(events: list[Any]) -> None:
    """A result's event lines at INFO: a str, or a (format, *args) tuple."""
    for line in events:
        if type(line) is tuple:
            log.info(*line)
        else:
            log.info("%s", line)


class ControllerHost:
    """One node's controller, its committed image and the answers waiting for a commit."""

    def __init__(self, *, driver: RaftDriver, log_: Any, snapshots: Any,
                 make_controller: Callable[[], Any], clock_ms: Callable[[], int],
                 txn: Any = None, lone: Any = None) -> None:
        """`lone`: a lone voter's state, its whole disk replayed at open
        (`recovery.LoneVoterState`); otherwise the controller and the committed image are
        rebuilt from the newest snapshot and the log below the high watermark."""
        self.driver = driver
        self.log = log_
        self.snapshots = snapshots
        self.make_controller = make_controller
        self.clock_ms = clock_ms
        self.txn = txn  # TransactionLog: only a lone voter keeps one
        self.generator = SnapshotGenerator(snapshots)
        self.state = HostState.FOLLOWER
        self.activations = 0  # how many times this node became the active controller
        self.failure: BaseException | None = None
        self.on_activated: Callable[[], None] = lambda: None  # run the timers at once
        # Runs a job (a snapshot, retention, a rebuild): here and now unless the node's runner
        # hands it to a worker thread (`quorum.Quorum`); `job_done` follows either way.
        self.start_job: Callable[[Any], None] = self.run_job_here
        self.on_new_controller: Callable[[Any], None] | None = None
        self.on_commit: Callable[[], None] = lambda: None  # after each release
        self._deferred: deque[Deferred] = deque()
        self._own: deque[tuple[int, list[tuple[Any, int]]]] = deque()  # applied, uncommitted
        self.hwm = driver.high_watermark
        # The controller is the committed image's own (a follower's state, replayed once),
        # unless the node keeps a transaction log, which only its controller replays.
        self.shared = False
        self.image_job: replay.Rebuild | None = None  # a leader's committed image, being built
        if lone is not None:
            self.controller, self.image, self.applied = lone.controller, lone.image, lone.applied
        else:  # at open (in a worker thread already): built here and now
            built = self._rebuild_job(self.hwm)
            built.run()
            self._adopt(built)
        self.rebuilding: replay.Rebuild | None = None  # a state being built off the loop

    # --- requests ------------------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self.state is HostState.ACTIVE

    def handle(self, request: Any, version: int, listener: str | None = None) -> Any:
        """The answer, or a `Deferred` one (see the module docstring)."""
        state = self.state
        if state is not HostState.ACTIVE:
            if state is HostState.FAILED:
                raise NodeStopped("the controller stopped after a failure") from self.failure
            return self.not_leader(request, version)
        now = self.clock_ms()
        next_offset = self.driver.core.next_offset
        result = self.controller.handle(request, version, now_ms=now, next_offset=next_offset,
                                        listener=listener)
        if result.txn_records and self.txn is None:
            log.warning("%s would write transaction state, which a quorum of several voters "
                        "does not replicate: refused", type(request).__name__)
            return error_response(request, version, COORDINATOR_NOT_AVAILABLE)
        end = self.write(result, now, next_offset)
        if result.respond_before_commit:
            return result.response
        txn = self.txn
        txn_end = txn.files.log_end_offset if txn is not None else 0
        if self.hwm >= end and (txn is None or txn.durable >= txn_end):
            return result.response
        deferred = Deferred(end, txn_end, request, version, result.response)
        self._deferred.append(deferred)
        return deferred

    def not_leader(self, request: Any, version: int) -> Any:
        code = NOT_COORDINATOR if request.API_KEY == INIT_PRODUCER_ID else NOT_CONTROLLER
        return error_response(request, version, code)

    def tick(self) -> None:
        """The controller's timers (fencing, elections, NoOps, a bootstrap, id prefetch)."""
        if self.state is not HostState.ACTIVE:
            return
        now = self.clock_ms()
        next_offset = self.driver.core.next_offset
        result = self.controller.tick(now_ms=now, next_offset=next_offset)
        if result.txn_records and self.txn is None:
            log.warning("a timer would write transaction state, which a quorum of several "
                        "voters does not replicate: skipped")
            return
        self.write(result, now, next_offset)

    def write(self, result: Any, now: int, next_offset: int) -> int:
        """Append and apply a result's records; the log end its answer waits for."""
        if result.events and log.isEnabledFor(logging.INFO):
            log_events(result.events)
        # Encoded before anything is written: a record that cannot be fails its operation
        # alone, with none of its transaction records left in that log.
        records = result.records
        values = ([encode_metadata_record(*records[0])] if len(records) == 1
                  else [encode_metadata_record(r, v) for r, v in records])
        txn_offset = 0
        if result.txn_records and self.txn is not None:
            txn_offset = self.txn.append(result.txn_records, now)
        if not values:
            if result.txn_records:
                self.controller.apply(result, offset=next_offset, txn_offset=txn_offset)
            return next_offset
        base = self.driver.append(values, now)
        self.controller.apply(result, offset=base, txn_offset=txn_offset)
        self._own.append((base, result.records))
        end = base + len(values)
        if end > self.applied:
            self.applied = end
        return end

    @property
    def waiting(self) -> int:
        """How many answers wait for a commit."""
        return len(self._deferred)

    @property
    def txn_durable(self) -> int:
        return self.txn.durable if self.txn is not None else 0

    @property
    def written(self) -> bool:
        """Whether everything this node appended (what lingers in the core included) is
        committed: a lone voter stopping cleanly waits for it."""
        txn = self.txn
        return self.hwm >= self.driver.core.next_offset and (txn is None or txn.durable
                                                             >= txn.end)

    # --- what the driver tells (RaftListener) --------------------------------------------------
    def committed(self, high_watermark: int) -> None:
        self.hwm = high_watermark
        if self.rebuilding is not None:  # caught up from the log once it is built
            self.release()
            return
        image, own, building = self.image, self._own, self.image_job is not None
        if own and own[0][0] < high_watermark:
            # The leader's own records the commit covers (a result is never split across
            # batches), into the image in order: straight to its controller unless held. An
            # image being built reads them from the log instead.
            replay_one = image.replay if image.held else image.controller.replay
            while own and own[0][0] < high_watermark:
                base, records = own.popleft()
                if building:
                    continue
                if len(records) == 1:
                    replay_one(records[0][0], records[0][1], base)
                else:
                    for i, (record, version) in enumerate(records):
                        replay_one(record, version, base + i)
        if high_watermark > self.applied:  # a follower's records, or a new leader's tail
            targets = ((image,) if self.shared else (self.controller,) if building
                       else (self.controller, image))
            replay.apply(targets, replay.log_records(
                self.log.read(self.applied), self.applied, high_watermark))
            self.applied = high_watermark
        if not building:
            image.advance(high_watermark)
        self.controller.features.kraft_version = self.driver.core.kraft_version
        self.release()
        if self.state is HostState.ELECTED:
            self._maybe_activate()
        self.maybe_snapshot()

    def leadership_changed(self, leading: bool) -> None:
        if leading:
            if self.state is HostState.FOLLOWER:
                self.state = HostState.ELECTED
                self._maybe_activate()
            return
        if self.state in (HostState.ELECTED, HostState.MIGRATING, HostState.ACTIVE):
            log.info("no longer the active controller (epoch %d): failing %d answers in "
                     "flight, rebuilding the controller from the committed log",
                     self.driver.core.epoch, len(self._deferred))
            self.fail_deferred(NOT_CONTROLLER)
            self._own.clear()
            self.state = HostState.FOLLOWER
            if self.shared:  # elected, never active: it applied nothing uncommitted
                return
            if self.image_job is not None:  # the image being built becomes the state
                self.rebuilding, self.image_job = self.image_job, None
                return
            if self.txn is not None:
                # Until its own is rebuilt (with its transaction log), the node reads the
                # committed image's (nothing changes it meanwhile: commits wait for it).
                self.controller = self.image.controller
                self._start_rebuild(self.hwm)
                return
            self.controller, self.shared = self.image.controller, True
            self.applied = max(self.image.offset, self.hwm)
            self.controller.on_committed(self.hwm, self.txn_durable)
            log.info("controller is the committed image again, at offset %d", self.hwm)
            if self.on_new_controller is not None:
                self.on_new_controller(self.controller)

    def snapshot_installed(self, snapshot: Any, size: int) -> None:
        self._start_rebuild(snapshot.snapshot_id.end_offset)

    def txn_durable_moved(self, count: int) -> None:
        """The transaction log's fsync round covered records below `count`."""
        self.release()

    # --- answers -------------------------------------------------------------------------------
    def release(self) -> None:
        """Tell the controller the committed offsets; release the answers they cover."""
        hwm, txn_hwm = self.hwm, self.txn_durable
        self.controller.on_committed(hwm, txn_hwm)
        deferred = self._deferred
        while deferred and deferred[0].end <= hwm and deferred[0].txn_end <= txn_hwm:
            waiting = deferred.popleft()
            waiting.resolve(waiting.response)
        self.on_commit()

    def fail_deferred(self, code: int | None) -> None:
        """Every waiting answer: an error `code`, or None (the node stopped)."""
        deferred, self._deferred = self._deferred, deque()
        for waiting in deferred:
            waiting.resolve(None if code is None
                            else error_response(waiting.request, waiting.version, code))

    def stop(self) -> None:
        if self.state is not HostState.FAILED:
            self.state = HostState.STOPPED
        self.fail_deferred(NOT_CONTROLLER)

    def fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc
        self.state = HostState.FAILED
        self.fail_deferred(None)

    # --- activation ----------------------------------------------------------------------------
    def _maybe_activate(self) -> None:
        """A leader answers once its whole log (its LeaderChange included) is committed and
        replayed, so it answers from the whole history."""
        core = self.driver.core
        end = core.log.end_offset
        if not self.driver.leading or core.high_watermark < end or self.applied < end \
                or self.rebuilding is not None:
            return
        if self.shared:
            if self.image.held:  # a snapshot of it is being written: activated once done
                return
            self._build_image_apart()
            if self.state is not HostState.ELECTED:  # activated by a job run here and now
                return
        self.activations += 1
        self.controller.activate(leader_epoch=core.epoch, now_ms=self.clock_ms())
        migrating = self.txn is not None and self.controller.transactions.migration_due()
        self.state = HostState.MIGRATING if migrating else HostState.ACTIVE
        log.info("active controller in epoch %d from offset %d", core.epoch, end)
        self.on_activated()

    def migration_step(self) -> int | None:
        """While MIGRATING: write the next step of moving the former transaction-log layout
        (each committed before the next is asked for); the log end it waits for, or None
        once done (then ACTIVE)."""
        step = self.controller.transactions.migration_step()
        if step is None:
            if self.state is HostState.MIGRATING:
                self.state = HostState.ACTIVE
            return None
        return self.write(step, self.clock_ms(), self.driver.core.next_offset)

    # --- state from disk -----------------------------------------------------------------------
    def _rebuild_job(self, end: int, *, image_only: bool = False) -> replay.Rebuild:
        """The state the newest whole snapshot and the log below `end` make: one controller,
        or two when a transaction log (a lone voter's, all of it its own and on its way to
        disk) is replayed into the controller alone."""
        txn = None if image_only else self.txn
        return replay.Rebuild(
            self.make_controller, self.snapshots.newest_whole(), self.log, end,
            self.driver.core.kraft_version, txn is not None,
            txn_files=txn.files if txn is not None else None,
            txn_durable=self.txn_durable if txn is not None else 0)

    def _start_rebuild(self, end: int) -> None:
        """Rebuild off the loop (`start_job`); until it is done the node replays nothing, and
        then catches up from the log (`_rebuilt`). A newer rebuild supersedes one under way."""
        job = self._rebuild_job(end)
        self.rebuilding = job
        self.start_job(job)

    def _adopt(self, job: replay.Rebuild) -> None:
        """A rebuilt state becomes the controller and the committed image (one object unless
        a transaction log keeps them two)."""
        self.controller, self.applied = job.controller, job.at
        if job.image_controller is not None:
            self.image, self.shared = CommittedImage(job.image_controller, job.at), False
        else:
            self.image, self.shared = CommittedImage(job.controller, job.at), True

    def _build_image_apart(self) -> None:
        """A new leader keeps its state as its controller; its committed image is built apart,
        off the loop, from the snapshot and the log it has committed (`_image_built`)."""
        self.shared = False
        # Meanwhile the image is the state of nothing, which no snapshot is taken of.
        self.image = CommittedImage(self.make_controller(), 0)
        job = self._rebuild_job(self.hwm, image_only=True)
        self.image_job = job
        self.start_job(job)

    def _image_built(self, job: replay.Rebuild) -> None:
        if job is not self.image_job:
            return  # the leadership went meanwhile (it became `rebuilding`)
        self.image_job = None
        if job.controller is None:
            if self.failure is None:  # its snapshot went meanwhile (`job_failed`): anew
                self._build_image_apart()
            return
        image, hwm = CommittedImage(job.controller, job.at), self.hwm
        if image.offset < hwm:  # what was committed meanwhile (the leader's own included)
            replay.apply((image,), replay.log_records(self.log.read(image.offset),
                                                      image.offset, hwm))
            image.advance(hwm)
        self.image = image
        log.info("committed image built apart from the controller, at offset %d", hwm)
        self.maybe_snapshot()

    def _rebuilt(self, job: replay.Rebuild) -> None:
        if job is not self.rebuilding:
            return  # superseded (another snapshot installed meanwhile)
        self.rebuilding = None
        if job.controller is None:
            if self.failure is None:  # its snapshot went meanwhile (`job_failed`): anew
                self._start_rebuild(job.end)
            return  # else the run failed: the node stops (see `fail`)
        self._adopt(job)
        hwm, image = self.hwm, self.image
        if self.applied < hwm:
            targets = (image,) if self.shared else (self.controller, image)
            replay.apply(targets, replay.log_records(self.log.read(self.applied),
                                                     self.applied, hwm))
            self.applied = hwm
            image.advance(hwm)
        self.controller.on_committed(self.applied, self.txn_durable)
        log.info("controller rebuilt from the committed log, at offset %d", self.applied)
        if self.on_new_controller is not None:
            self.on_new_controller(self.controller)
        if self.state is HostState.ELECTED:
            self._maybe_activate()
        self.maybe_snapshot()

    # --- snapshots -----------------------------------------------------------------------------
    def maybe_snapshot(self) -> None:
        """Hand a snapshot (or retention) job to `start_job` when the policy asks for one."""
        if self.rebuilding is not None or self.image_job is not None:
            return
        job = self.generator.maybe_take(
            self.image, self.clock_ms(), durable=self.log.flushed_offset, committed=self.hwm,
            epoch_of=self._epoch_of,
            timestamp_below=self.log.timestamp_below, control_at=self._control_at)
        if job is not None:
            self.start_job(job)

    def run_job_here(self, job: Any) -> None:
        try:
            job.run()
        except OSError as exc:
            if self.job_failed(job, exc):
                raise
        finally:
            self.job_done(job)

    def job_failed(self, job: Any, exc: OSError) -> bool:
        """Whether `job` failing with `exc` stops the node. A rebuild reads its snapshot file
        while the loop goes on: an installed snapshot (which deletes every older one) or
        retention may delete that file meanwhile. That is no fault of the disk: the rebuild
        is superseded already, or starts anew from the newest snapshot (`job_done`)."""
        return not (isinstance(job, replay.Rebuild) and isinstance(exc, FileNotFoundError))

    def job_done(self, job: Any) -> None:
        """On the loop, after `job.run` (in a worker thread, or not at all if it failed)."""
        if isinstance(job, replay.Rebuild):
            if job is self.image_job:
                self._image_built(job)
            else:
                self._rebuilt(job)
            return
        self.generator.done(job)
        if self.state is HostState.ELECTED:  # it may have waited for the image's release
            self._maybe_activate()
        trimmed = job.trimmed_to
        cut = None if trimmed is None else (trimmed.end_offset, trimmed.epoch)
        sid = job.snapshot_id if job.written else trimmed
        if sid is not None and sid.end_offset > self.log.log_start_offset - 1:
            self.driver.snapshot_taken((sid.end_offset, sid.epoch), cut)

    def _epoch_of(self, offset: int) -> int:
        epoch = self.log.epoch_at(offset)
        if epoch is None:  # the log starts at the newest snapshot: its epoch
            newest = self.snapshots.newest
            epoch = newest.snapshot_id.epoch if newest is not None and newest.snapshot_id else 0
        return epoch

    def _control_at(self, offset: int) -> list[tuple[bytes, bytes]]:
        """The kraft.version and voter set a snapshot at `offset` carries after its header."""
        core = self.driver.core
        if core.kraft_version < 1:
            return []
        from kraftpy.controller.raft.voters import control_records

        return control_records(core.kraft_version, core.voters_at(offset).to_record())
