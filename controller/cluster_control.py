"""ClusterControlManager: broker registrations, broker epochs, heartbeats (KIP-631).

The broker epoch is the log offset where the registration operation's records begin, so a
broker restarted with a new incarnation always gets a larger epoch than any it held before.
Registrations change only by replay; registering, heartbeating, unregistering and session
fencing are commands that return records (see broker_heartbeat_manager for the state table).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from kraftpy.controller.broker_heartbeat_manager import (
    INT64_MAX,
    BrokerControlState,
    BrokerHeartbeatManager,
    current_state,
    next_state,
)
from kraftpy.controller.feature_control import MV_3_7_IV0, FeatureControlManager
from kraftpy.controller.leader_moves import MoveQueue
from kraftpy.controller.partition_change import LOST, MIGRATING, UNASSIGNED
from kraftpy.controller.replication_control import ReplicationControlManager
from kraftpy.controller.result import ControllerResult
from kraftpy.controller.settings import ControllerSettings
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.broker_heartbeat_response import BrokerHeartbeatResponse
from kraftpy.protocol.messages.broker_registration_response import BrokerRegistrationResponse
from kraftpy.protocol.messages.controller_registration_response import (
    ControllerRegistrationResponse,
)
from kraftpy.protocol.messages.unregister_broker_response import UnregisterBrokerResponse
from kraftpy.protocol.records.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from kraftpy.protocol.records.register_broker_record import (
    BrokerEndpoint,
    BrokerFeature,
    RegisterBrokerRecord,
)
from kraftpy.protocol.records.register_controller_record import (
    ControllerEndpoint,
    ControllerFeature,
    RegisterControllerRecord,
)
from kraftpy.protocol.records.unregister_broker_record import UnregisterBrokerRecord
from kraftpy.protocol.uuid import kafka_uuid_str

UNASSIGNED_INT, LOST_INT, MIGRATING_INT = UNASSIGNED.int, LOST.int, MIGRATING.int
# Kafka's SecurityProtocol ids: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL.
_SECURITY_PROTOCOLS = frozenset({0, 1, 2, 3})


class ReplayError(ValueError):
    """A record that contradicts the replayed state: the log is damaged or not ours."""


@dataclass
class BrokerRegistration:
    broker_id: int
    epoch: int
    incarnation_id: uuid.UUID
    endpoints: list[tuple[str, str, int, int]]  # (name, host, port, security protocol)
    features: list[tuple[str, int, int]]  # (name, min supported, max supported)
    rack: str | None
    fenced: bool
    in_controlled_shutdown: bool
    is_migrating_zk_broker: bool = False
    log_dirs: list[uuid.UUID] = field(default_factory=list)

    @property
    def state(self) -> BrokerControlState:
        return current_state(self.fenced, self.in_controlled_shutdown)

    def record(self, version: int) -> RegisterBrokerRecord:
        return RegisterBrokerRecord(
            broker_id=self.broker_id, is_migrating_zk_broker=self.is_migrating_zk_broker,
            incarnation_id=self.incarnation_id, broker_epoch=self.epoch,
            end_points=[BrokerEndpoint(name=n, host=h, port=p, security_protocol=s)
                        for n, h, p, s in self.endpoints],
            features=[BrokerFeature(name=n, min_supported_version=lo, max_supported_version=hi)
                      for n, lo, hi in self.features],
            rack=self.rack, fenced=self.fenced,
            in_controlled_shutdown=self.in_controlled_shutdown,
            log_dirs=list(self.log_dirs))


def _reserved_dir(d: uuid.UUID) -> bool:
    """Kafka's DirectoryId.reserved: the first 100 ids (UNASSIGNED, LOST, MIGRATING, ...)."""
    return d.int < 100


class ClusterControlManager:
    def __init__(self, settings: ControllerSettings, features: FeatureControlManager,
                 replication: ReplicationControlManager) -> None:
        self.settings = settings
        self.features = features
        self.replication = replication
        self.brokers: dict[int, BrokerRegistration] = {}
        self.register_offsets: dict[int, int] = {}
        self.controllers: dict[int, Any] = {}  # RegisterControllerRecord, kept for snapshots
        self.heartbeats = BrokerHeartbeatManager(settings.broker_session_timeout_ms)
        self.now_ms = 0  # the time of the event being handled; replay has no clock of its own
        # Leader moves still to be made, a part per event (leader_moves.py), and the brokers
        # whose fence is among them, with the state it leaves them in: fenced for
        # everything else already. Soft state, as the heartbeats: a new leader starts empty.
        self.moves = MoveQueue()
        self.leaving: dict[int, BrokerControlState] = {}

    # --- replay ---------------------------------------------------------------------------

    def replay_register(self, record: Any, offset: int) -> None:
        old = self.brokers.get(record.broker_id)
        self.brokers[record.broker_id] = BrokerRegistration(
            record.broker_id, record.broker_epoch, record.incarnation_id,
            [(e.name, e.host, e.port, e.security_protocol) for e in record.end_points],
            [(f.name, f.min_supported_version, f.max_supported_version)
             for f in record.features],
            record.rack, bool(record.fenced), bool(record.in_controlled_shutdown),
            bool(record.is_migrating_zk_broker), list(record.log_dirs or []))
        self.register_offsets[record.broker_id] = offset
        if old is None or old.epoch != record.broker_epoch:
            self.heartbeats.register(record.broker_id, self.now_ms)
        self.heartbeats.forget_expiry()  # it may come back unfenced

    def replay_unregister(self, record: Any) -> None:
        self._registration(record.broker_id, record.broker_epoch, record)
        del self.brokers[record.broker_id]
        self.register_offsets.pop(record.broker_id, None)
        self.heartbeats.remove(record.broker_id)

    def replay_fence(self, record: Any, fenced: bool) -> None:
        """FenceBrokerRecord / UnfenceBrokerRecord (metadata.version before 3.3-IV2)."""
        reg = self._registration(record.id, record.epoch, record)
        self._set_fenced(reg, fenced)

    def replay_change(self, record: Any) -> None:
        reg = self._registration(record.broker_id, record.broker_epoch, record)
        if record.fenced not in (-1, 0, 1) or record.in_controlled_shutdown not in (0, 1):
            raise ReplayError(f"unknown fencing or shutdown change in {record!r}")
        if record.fenced:
            self._set_fenced(reg, record.fenced == 1)
        if record.in_controlled_shutdown == 1:
            reg.in_controlled_shutdown = True
        if record.log_dirs:
            reg.log_dirs = list(record.log_dirs)
        self.heartbeats.forget_expiry()

    def _set_fenced(self, reg: BrokerRegistration, fenced: bool) -> None:
        if reg.fenced and not fenced:
            self.heartbeats.register(reg.broker_id, self.now_ms)
        reg.fenced = fenced

    def _registration(self, broker_id: int, epoch: int, record: Any) -> BrokerRegistration:
        reg = self.brokers.get(broker_id)
        if reg is None:
            raise ReplayError(f"no broker registration found for {record!r}")
        if reg.epoch != epoch:
            raise ReplayError(f"no broker registration with epoch {epoch} for {record!r}")
        return reg

    def snapshot_records(self) -> list[tuple[Any, int]]:
        base = self.features.register_broker_record_version()
        out: list[tuple[Any, int]] = []
        for b in self.brokers.values():
            # metadata.version decides, unless the registration holds what only a later
            # version can carry (a log without feature levels, or written by a newer Kafka)
            version = max(base, 3 if b.log_dirs else 2 if b.is_migrating_zk_broker else 1)
            out.append((b.record(version), version))
        out += [(r, 0) for r in self.controllers.values()]
        return out

    # --- queries --------------------------------------------------------------------------

    def check_broker_epoch(self, broker_id: int, epoch: int) -> str | None:
        """Why (broker id, epoch) is stale, or None when it is the current registration."""
        reg = self.brokers.get(broker_id)
        if reg is None:
            return f"No broker registration found for broker id {broker_id}"
        if reg.epoch != epoch:
            return f"Expected broker epoch {reg.epoch}, but got broker epoch {epoch}"
        return None

    def usable(self, broker_id: int) -> bool:
        """Can lead partitions: registered, unfenced and not shutting down."""
        reg = self.brokers.get(broker_id)
        return reg is not None and not reg.fenced and not reg.in_controlled_shutdown \
            and broker_id not in self.leaving

    def has_online_dir(self, broker_id: int, directory: uuid.UUID) -> bool:
        """Kafka's hasOnlineDir: registered, and the directory is one of its online ones
        (UNASSIGNED and MIGRATING always are, LOST never; no dirs known counts as online)."""
        reg = self.brokers.get(broker_id)
        if reg is None:
            return False
        reserved = directory.int  # compared as ints: UUID.__eq__ is slow Python
        if reserved == UNASSIGNED_INT or reserved == MIGRATING_INT:
            return True
        if reserved == LOST_INT:
            return False
        return not reg.log_dirs or directory in reg.log_dirs

    def default_dir(self, broker_id: int) -> uuid.UUID:
        """Where a new replica on the broker goes (ClusterDescriber.defaultDir): its only
        log dir, UNASSIGNED with several (the broker says which), MIGRATING with none or
        before metadata.version 3.7-IV2."""
        if not self.features.log_dirs_required():
            return MIGRATING
        reg = self.brokers.get(broker_id)
        if reg is None:
            return UNASSIGNED
        if not reg.log_dirs:
            return MIGRATING
        return reg.log_dirs[0] if len(reg.log_dirs) == 1 else UNASSIGNED

    def unfenced(self) -> list[int]:
        """Brokers not fenced, nor being fenced."""
        leaving = self.leaving
        return [b for b, reg in self.brokers.items() if not reg.fenced and b not in leaving]

    # --- commands -------------------------------------------------------------------------

    def register_broker(self, request: Any, now_ms: int, next_offset: int,
                        api_version: int = 4) -> ControllerResult:
        broker_id = request.broker_id

        def fail(code: ErrorCode, why: str) -> ControllerResult:
            result = ControllerResult.reply(BrokerRegistrationResponse(
                throttle_time_ms=0, error_code=code, broker_epoch=-1))
            result.events.append(f"Refused registration of broker {broker_id}: {why}")
            return result

        if request.cluster_id != self.settings.cluster_id:
            return fail(ErrorCode.INCONSISTENT_CLUSTER_ID,
                        f"Expected cluster ID {self.settings.cluster_id}")
        if broker_id < 0 or broker_id == self.settings.node_id:
            return fail(ErrorCode.INVALID_REGISTRATION, f"Broker id {broker_id} is not usable")
        existing = self.brokers.get(broker_id)
        if (existing is not None and existing.incarnation_id != request.incarnation_id
                and self.heartbeats.in_session(broker_id, existing.epoch, now_ms)):
            return fail(ErrorCode.DUPLICATE_BROKER_REGISTRATION,
                        "Another broker is registered with that broker id; a restarted "
                        "broker gets in once the session of the one before expires.")
        if request.is_migrating_zk_broker:
            return fail(ErrorCode.BROKER_ID_NOT_REGISTERED,
                        "Controller does not support registering ZK brokers.")
        log_dirs = list(request.log_dirs or [])
        if self.features.log_dirs_required():
            why = self._check_log_dirs(broker_id, log_dirs)
            if why:
                return fail(ErrorCode.INVALID_REGISTRATION, why)
        why = self.features.check_broker_features(request.features)
        if why:
            return fail(ErrorCode.UNSUPPORTED_VERSION, why)

        result = ControllerResult(None)
        same = existing is not None and existing.incarnation_id == request.incarnation_id
        if same:
            epoch, fenced, shutting = (existing.epoch, existing.fenced,
                                       existing.in_controlled_shutdown)
        else:
            epoch, fenced, shutting = next_offset, True, False
            # The previous incarnation's places (ISR, and ELR after an unclean end) go
            # first; from v3 a broker says which epoch it stopped cleanly in.
            clean = api_version >= 3 and existing is not None \
                and existing.epoch == request.previous_broker_epoch
            self._drop_moves(broker_id)  # what is left of them is in the records below
            result.records += self.replication.handle_broker_shutdown(broker_id, clean)
        version = self.features.register_broker_record_version()
        reg = BrokerRegistration(
            broker_id, epoch, request.incarnation_id,
            [(x.name, x.host, x.port, x.security_protocol) for x in request.listeners],
            [(f.name, f.min_supported_version, f.max_supported_version)
             for f in request.features],
            request.rack, fenced, shutting, False, log_dirs if version >= 3 else [])
        result.records.append((reg.record(version), version))
        result.response = BrokerRegistrationResponse(throttle_time_ms=0,
                                                     error_code=ErrorCode.NONE,
                                                     broker_epoch=epoch)
        result.events.append(f"Registered broker {broker_id} (incarnation "
                             f"{request.incarnation_id}) with broker epoch {epoch}")
        return result

    def _check_log_dirs(self, broker_id: int, log_dirs: list[uuid.UUID]) -> str | None:
        if not log_dirs:
            return "No directories specified in request"
        if any(_reserved_dir(d) for d in log_dirs):
            return "Reserved directory ID in request"
        if len(set(log_dirs)) != len(log_dirs):
            return "Duplicate directory ID in request"
        for other, reg in self.brokers.items():
            if other != broker_id and set(reg.log_dirs) & set(log_dirs):
                return f"Broker {other} is already registered with a requested directory"
        return None

    def heartbeat(self, request: Any, now_ms: int) -> ControllerResult:
        broker_id = request.broker_id
        self.heartbeats.track(broker_id, request.broker_epoch, now_ms)
        if broker_id not in self.register_offsets:
            return ControllerResult.reply(BrokerHeartbeatResponse(
                throttle_time_ms=0, error_code=ErrorCode.STALE_BROKER_EPOCH))
        if self.check_broker_epoch(broker_id, request.broker_epoch):
            return ControllerResult.reply(BrokerHeartbeatResponse(
                throttle_time_ms=0, error_code=ErrorCode.STALE_BROKER_EPOCH))
        reg = self.brokers[broker_id]
        register_offset = self.register_offsets[broker_id]
        caught_up = request.current_metadata_offset >= register_offset
        leaving = self.leaving.get(broker_id)
        if leaving is not None:  # its fence is under way: fenced, and nothing else changes
            self.heartbeats.touch(broker_id, now_ms, request.current_metadata_offset)
            return ControllerResult.reply(BrokerHeartbeatResponse(
                throttle_time_ms=0, error_code=ErrorCode.NONE, is_caught_up=caught_up,
                is_fenced=True, should_shut_down=leaving.should_shut_down))
        beat = self.heartbeats.state(broker_id, now_ms)
        current = reg.state
        # Leaderships and the lowest active offset matter only on the way to a shutdown;
        # the steady heartbeat skips the scans over partitions and brokers.
        shutting = current is BrokerControlState.CONTROLLED_SHUTDOWN or (
            current is BrokerControlState.UNFENCED and request.want_shut_down
            and not request.want_fence)
        leads = shutting and self.replication.leads_partitions(broker_id)
        lowest = INT64_MAX
        if current is BrokerControlState.CONTROLLED_SHUTDOWN:
            lowest = self.heartbeats.lowest_active_offset(
                [b for b, r in self.brokers.items() if r.state is BrokerControlState.UNFENCED])
        nxt = next_state(current, want_fence=request.want_fence,
                         want_shut_down=request.want_shut_down, caught_up=caught_up,
                         has_leaderships=leads,
                         controlled_shutdown_offset=beat.controlled_shutdown_offset,
                         lowest_active_offset=lowest)
        result = self.transition(reg, current, nxt)
        self.heartbeats.touch(broker_id, now_ms, request.current_metadata_offset)
        if self.features.log_dirs_required() and request.offline_log_dirs:
            records, gone = self.replication.handle_directories_offline(
                broker_id, reg.epoch, request.offline_log_dirs, reg.log_dirs)
            if gone:
                result.records += records
                result.events.append(
                    f"Directories {', '.join(map(kafka_uuid_str, gone))} in broker "
                    f"{broker_id} marked offline, remaining directories: "
                    + ", ".join(kafka_uuid_str(d) for d in reg.log_dirs if d not in gone))
        result.response = BrokerHeartbeatResponse(
            throttle_time_ms=0, error_code=ErrorCode.NONE, is_caught_up=caught_up,
            is_fenced=nxt.fenced, should_shut_down=nxt.should_shut_down)
        result.respond_before_commit = not result.records
        return result

    def transition(self, reg: BrokerRegistration, current: BrokerControlState,
                   nxt: BrokerControlState) -> ControllerResult:
        """The records that move a broker from one state to another (none if equal): Kafka's
        (the partitions' moves, then the fence; the unfence or the controlled shutdown, then
        the moves), the moves a part per event (`moves`) when they are many."""
        result = ControllerResult(None)
        if current is nxt:
            return result
        b, epoch = reg.broker_id, reg.epoch
        S = BrokerControlState
        replication = self.replication
        if nxt in (S.FENCED, S.SHUTDOWN_NOW):
            job = replication.fence_moves(b, epoch, [(BrokerRegistrationChangeRecord(
                broker_id=b, broker_epoch=epoch, fenced=1), 0)], fencing=nxt)
        elif nxt is S.UNFENCED:
            job = replication.unfence_moves(b, epoch, [(BrokerRegistrationChangeRecord(
                broker_id=b, broker_epoch=epoch, fenced=-1), 0)])
        else:  # S.CONTROLLED_SHUTDOWN
            opening = [] if reg.in_controlled_shutdown else [(BrokerRegistrationChangeRecord(
                broker_id=b, broker_epoch=epoch, in_controlled_shutdown=1), 1)]
            job = replication.controlled_shutdown_moves(b, epoch, opening)
        result.records += self.moves.start(job)
        result.events.append(f"Broker {b} (epoch {epoch}): {current.name} -> {nxt.name}")
        if not job.done:
            if job.fencing is not None:
                self.leaving[b] = job.fencing
            result.events.append(f"Broker {b}: its leader and ISR moves go on, a part per "
                                 "controller event")
        return result

    def continue_moves(self) -> ControllerResult:
        """The next part of the oldest leader moves still to be made."""
        job, records = self.moves.step()
        result = ControllerResult(None, records=records)
        if job is not None and job.done:
            self.leaving.pop(job.broker_id, None)
            result.events.append(f"Broker {job.broker_id}: leader and ISR moves done")
        return result

    def _drop_moves(self, broker_id: int) -> None:
        self.moves.drop(broker_id)
        self.leaving.pop(broker_id, None)

    def fence_one_stale_broker(self, now_ms: int) -> ControllerResult:
        """Session expiry: fence the broker silent longest, one per call, as Kafka does."""
        if now_ms <= self.heartbeats.quiet_until_ms:  # no session can have expired yet
            return ControllerResult(None)
        stale = self.heartbeats.oldest_stale(self.unfenced(), now_ms)
        if stale is None:
            return ControllerResult(None)
        reg = self.brokers[stale]
        result = self.transition(reg, reg.state, BrokerControlState.FENCED)
        result.events[0] += (f" (no heartbeat for "
                             f"{now_ms - self.heartbeats.brokers[stale].last_contact_ms} ms)")
        return result

    def unregister_broker(self, request: Any) -> ControllerResult:
        reg = self.brokers.get(request.broker_id)
        if reg is None:
            return ControllerResult.reply(UnregisterBrokerResponse(
                throttle_time_ms=0, error_code=ErrorCode.BROKER_ID_NOT_REGISTERED,
                error_message=f"Broker ID {request.broker_id} is not currently registered"))
        b = reg.broker_id
        result = ControllerResult(UnregisterBrokerResponse(throttle_time_ms=0,
                                                           error_code=ErrorCode.NONE))
        self._drop_moves(b)  # what is left of them is in the records below
        result.records += self.replication.handle_broker_unregistered(b)
        result.records.append((UnregisterBrokerRecord(broker_id=b, broker_epoch=reg.epoch), 0))
        result.events.append(f"Unregistered broker {b} (epoch {reg.epoch})")
        return result

    def register_controller(self, request: Any) -> ControllerResult:
        """A quorum controller's registration (KIP-919): its listeners and feature ranges as
        one RegisterControllerRecord. Unlike a broker's, nothing is checked against the
        finalized levels: a controller that cannot run them stops by itself."""
        def fail(code: ErrorCode, message: str) -> ControllerResult:
            return ControllerResult.reply(ControllerRegistrationResponse(
                throttle_time_ms=0, error_code=code, error_message=message))

        mv = self.features.metadata_version
        if not mv:  # not bootstrapped yet: the sender retries
            return fail(ErrorCode.NOT_CONTROLLER,
                        "This is not the correct controller for this cluster.")
        if mv < MV_3_7_IV0:
            return fail(ErrorCode.UNSUPPORTED_VERSION, "The version of API is not supported.")
        if any(lis.security_protocol not in _SECURITY_PROTOCOLS for lis in request.listeners):
            return fail(ErrorCode.UNKNOWN_SERVER_ERROR,
                        "The server experienced an unexpected error when processing the "
                        "request.")
        record = RegisterControllerRecord(
            controller_id=request.controller_id, incarnation_id=request.incarnation_id,
            zk_migration_ready=False,
            end_points=[ControllerEndpoint(name=lis.name, host=lis.host, port=lis.port,
                                           security_protocol=lis.security_protocol)
                        for lis in request.listeners],
            features=[ControllerFeature(name=f.name, min_supported_version=f.min_supported_version,
                                        max_supported_version=f.max_supported_version)
                      for f in request.features])
        result = ControllerResult(ControllerRegistrationResponse(throttle_time_ms=0,
                                                                 error_code=ErrorCode.NONE),
                                  records=[(record, 0)])
        result.events.append(f"Registered controller {request.controller_id} (incarnation "
                             f"{kafka_uuid_str(request.incarnation_id)})")
        return result

    def _partition_change_version(self) -> int:
        return self.features.partition_change_record_version()

    # --- reports --------------------------------------------------------------------------

    def describe(self) -> list[dict[str, Any]]:
        out = []
        for b in sorted(self.brokers.values(), key=lambda r: r.broker_id):
            beat = self.heartbeats.brokers.get(b.broker_id)
            out.append({
                "broker_id": b.broker_id, "broker_epoch": b.epoch,
                "incarnation_id": kafka_uuid_str(b.incarnation_id),
                "endpoints": [{"name": n, "host": h, "port": p, "security_protocol": s}
                              for n, h, p, s in sorted(b.endpoints)],
                "rack": b.rack, "fenced": b.fenced,
                "in_controlled_shutdown": b.in_controlled_shutdown, "state": b.state.name,
                "last_contact_ms": beat.last_contact_ms if beat else None,
            })
        return out
