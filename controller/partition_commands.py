"""Partition commands: AlterPartition, ElectLeaders, the periodic elections, reassignments.

Each returns a ControllerResult and changes nothing; the PartitionChangeRecords it returns
move the partitions when replayed. The checks, their order and the error codes are Kafka
4.1's (ReplicationControlManager.alterPartition / electLeaders / maybeBalancePartitionLeaders
/ maybeElectUncleanLeaders / alterPartitionReassignments / listPartitionReassignments):

- AlterPartition: a partition leader's ISR change (KIP-497), checked against the partition's
  leader and partition epochs (a newer epoch than ours is NOT_CONTROLLER, an older leader
  epoch FENCED_LEADER_EPOCH, an older partition epoch INVALID_UPDATE_VERSION), the ISR
  against the replicas, the leader recovery state (KIP-704), and from v3 each new member's
  broker epoch (KIP-903: fenced, shutting down, unregistered or another incarnation is
  INELIGIBLE_REPLICA). An ISR that completes a reassignment may move the leader: the
  change is written and NEW_LEADER_ELECTED answered.
- ElectLeaders: PREFERRED or UNCLEAN, per partition; for every partition when none are named.
- Reassignments: the target replicas join as adding, the ones leaving stay as removing until
  the ISR holds every target replica; then one more change finishes it. A null target
  cancels (reverting may need an unclean election, which the topic must allow).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kraftpy.controller.leader_moves import Walk
from kraftpy.controller.partition_change import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    RECOVERED,
    RECOVERING,
    Election,
    ReassignmentError,
    ReassignmentReplicas,
    revert_reassignment,
)
from kraftpy.controller.result import ControllerResult
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.alter_partition_reassignments_response import (
    AlterPartitionReassignmentsResponse,
    ReassignablePartitionResponse,
    ReassignableTopicResponse,
)
from kraftpy.protocol.messages.alter_partition_response import (
    AlterPartitionResponse,
)
from kraftpy.protocol.messages.alter_partition_response import (
    PartitionData as AlterPartitionData,
)
from kraftpy.protocol.messages.alter_partition_response import (
    TopicData as AlterTopicData,
)
from kraftpy.protocol.messages.elect_leaders_response import (
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from kraftpy.protocol.messages.list_partition_reassignments_response import (
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
)

if TYPE_CHECKING:
    from kraftpy.controller.replication_control import (
        Partition,
        ReplicationControlManager,
        Topic,
    )

ZERO_UUID_INT = 0
PREFERRED_ELECTION, UNCLEAN_ELECTION = 0, 1
MAX_RECORDS_PER_USER_OP = 10_000
# Kafka's Errors messages, for errors sent with their default text.
MESSAGES = {
    ErrorCode.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE:
        "Eligible topic partition leaders are not available.",
    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS: "No partition reassignment is in progress.",
}

Error = tuple[int, str | None]


class PartitionError(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message if message is not None else MESSAGES.get(code)


def in_reassignment(part: Partition) -> bool:
    return bool(part.removing_replicas or part.adding_replicas)


@dataclass
class _Run:
    """A periodic election under way: its walk, and the elections made so far."""

    walk: Walk
    elected: int = 0


class PartitionCommands:
    def __init__(self, replication: ReplicationControlManager) -> None:
        self.rc = replication
        self._balance: _Run | None = None
        self._unclean: _Run | None = None

    @property
    def cluster(self) -> Any:
        return self.rc.cluster

    # --- AlterPartition ----------------------------------------------------------------

    def alter_partition(self, request: Any, api_version: int) -> ControllerResult:
        if not request.topics:
            return ControllerResult.reply(AlterPartitionResponse(throttle_time_ms=0,
                                                                 error_code=ErrorCode.NONE))
        if self.cluster.check_broker_epoch(request.broker_id, request.broker_epoch):
            return ControllerResult.reply(AlterPartitionResponse(
                throttle_time_ms=0, error_code=ErrorCode.STALE_BROKER_EPOCH))
        response = AlterPartitionResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                          topics=[])
        records: list[tuple[Any, int]] = []
        events: list[Any] = []
        for t in request.topics:
            out = AlterTopicData(topic_id=t.topic_id, partitions=[])
            response.topics.append(out)
            topic = self.rc.topics.get(t.topic_id)
            if topic is None or t.topic_id.int == ZERO_UUID_INT:
                out.partitions += [AlterPartitionData(partition_index=p.partition_index,
                                                      error_code=ErrorCode.UNKNOWN_TOPIC_ID)
                                   for p in t.partitions]
                continue
            for p in t.partitions:
                if api_version < 3:
                    states = [(b, -1) for b in p.new_isr]
                else:
                    states = [(s.broker_id, s.broker_epoch) for s in p.new_isr_with_epochs]
                part = topic.partitions.get(p.partition_index)
                code = self._check_alter(request.broker_id, part, p, states)
                if code != ErrorCode.NONE or part is None:
                    out.partitions.append(AlterPartitionData(partition_index=p.partition_index,
                                                             error_code=code))
                    continue
                builder = self.rc.builder(part, election=Election.UNCLEAN
                                          if self.rc.unclean_enabled(topic) else Election.ONLINE)
                builder.set_target_isr(b for b, _ in states)
                builder.set_target_recovery_state(p.leader_recovery_state)
                record = builder.build()
                leader, isr = part.leader, list(part.isr)
                leader_epoch, partition_epoch = part.leader_epoch, part.partition_epoch
                recovery = part.leader_recovery_state
                if record is not None:
                    records.append((record, self.rc.change_version()))
                    partition_epoch += 1
                    if record.isr is not None:
                        isr = list(record.isr)
                    if record.leader_recovery_state != -1:
                        recovery = record.leader_recovery_state
                    if record.leader != NO_LEADER_CHANGE:
                        leader_epoch += 1
                        leader = record.leader
                    if record.leader not in (NO_LEADER_CHANGE, request.broker_id):
                        # the ISR completed a reassignment that moved the leader
                        events.append(f"AlterPartition from node {request.broker_id} for "
                                      f"{topic.name}-{part.partition_id} completed the "
                                      "reassignment and moved the leader")
                        out.partitions.append(AlterPartitionData(
                            partition_index=p.partition_index,
                            error_code=ErrorCode.NEW_LEADER_ELECTED))
                        continue
                out.partitions.append(AlterPartitionData(
                    partition_index=p.partition_index, error_code=ErrorCode.NONE,
                    leader_id=leader, isr=isr, leader_recovery_state=recovery,
                    leader_epoch=leader_epoch, partition_epoch=partition_epoch))
        if not records:
            return ControllerResult(response, events=events)
        return ControllerResult(response, records=records, events=events)

    def _check_alter(self, broker_id: int, part: Partition | None, data: Any,
                     states: list[tuple[int, int]]) -> int:
        """Kafka's validateAlterPartitionData, check by check."""
        if part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if data.leader_epoch > part.leader_epoch or data.partition_epoch > part.partition_epoch:
            return ErrorCode.NOT_CONTROLLER  # it has seen a newer controller than us
        if data.leader_epoch < part.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if broker_id != part.leader:
            return ErrorCode.INVALID_REQUEST
        if data.partition_epoch < part.partition_epoch:
            return ErrorCode.INVALID_UPDATE_VERSION
        new_isr = [b for b, _ in states]
        if len(set(new_isr)) != len(new_isr) or not set(new_isr) <= set(part.replicas):
            return ErrorCode.INVALID_REQUEST  # Replicas.validateIsr
        if part.leader not in new_isr:
            return ErrorCode.INVALID_REQUEST
        recovery = data.leader_recovery_state
        if recovery not in (RECOVERED, RECOVERING):
            return ErrorCode.INVALID_REQUEST
        if recovery == RECOVERING and len(new_isr) > 1:
            return ErrorCode.INVALID_REQUEST
        if part.leader_recovery_state == RECOVERED and recovery == RECOVERING:
            return ErrorCode.INVALID_REQUEST
        for b, epoch in states:
            reg = self.cluster.brokers.get(b)
            if (reg is None or reg.in_controlled_shutdown or reg.fenced
                    or (epoch != -1 and reg.epoch != epoch)):
                return ErrorCode.INELIGIBLE_REPLICA
        return ErrorCode.NONE

    # --- ElectLeaders ------------------------------------------------------------------

    def elect_leaders(self, request: Any, api_version: int) -> ControllerResult:
        election_type = request.election_type if api_version >= 1 else PREFERRED_ELECTION
        if request.topic_partitions is not None and not request.topic_partitions:
            return ControllerResult.reply(ElectLeadersResponse(
                throttle_time_ms=0, error_code=ErrorCode.NONE, replica_election_results=[]))
        if election_type not in (PREFERRED_ELECTION, UNCLEAN_ELECTION):
            return ControllerResult.reply(self.elect_error(
                request, api_version, ErrorCode.INVALID_REQUEST,
                f"Unknown election type {election_type}"))
        response = ElectLeadersResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                        replica_election_results=[])
        records: list[tuple[Any, int]] = []
        if request.topic_partitions is None:
            for name in list(self.rc.topics_by_name):
                result = ReplicaElectionResult(topic=name, partition_result=[])
                response.replica_election_results.append(result)
                topic = self.rc.topics[self.rc.topics_by_name[name]]
                for pid in list(topic.partitions):
                    code, message = self._elect(name, pid, election_type, records)
                    if code != ErrorCode.ELECTION_NOT_NEEDED:
                        result.partition_result.append(PartitionResult(
                            partition_id=pid, error_code=code, error_message=message))
        else:
            for t in request.topic_partitions:
                result = ReplicaElectionResult(topic=t.topic, partition_result=[])
                response.replica_election_results.append(result)
                for pid in t.partitions:
                    code, message = self._elect(t.topic, pid, election_type, records)
                    result.partition_result.append(PartitionResult(
                        partition_id=pid, error_code=code, error_message=message))
        if len(records) > MAX_RECORDS_PER_USER_OP:
            return ControllerResult.reply(self.elect_error(
                request, api_version, ErrorCode.POLICY_VIOLATION,
                "Unable to perform excessively large batch operation."))
        if not records:
            return ControllerResult.reply(response)
        return ControllerResult(response, records=records,
                                events=[f"ElectLeaders: {len(records)} partition(s) change "
                                        "leader"])

    @staticmethod
    def elect_error(request: Any, version: int, code: int, message: str | None
                    ) -> ElectLeadersResponse:
        """ElectLeadersRequest.getErrorResponse: the error on every named partition (and at
        the top from v1)."""
        return ElectLeadersResponse(
            throttle_time_ms=0, error_code=code if version >= 1 else 0,
            replica_election_results=[
            ReplicaElectionResult(topic=t.topic, partition_result=[
                PartitionResult(partition_id=p, error_code=code, error_message=message)
                for p in t.partitions])
            for t in request.topic_partitions or []])

    def _elect(self, name: str, pid: int, election_type: int,
               records: list[tuple[Any, int]]) -> Error:
        topic_id = self.rc.topics_by_name.get(name)
        if topic_id is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {name}"
        topic = self.rc.topics.get(topic_id)
        if topic is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic id as {topic_id}"
        part = topic.partitions.get(pid)
        if part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {name}-{pid}"
        preferred = election_type == PREFERRED_ELECTION
        if (preferred and part.leader == part.replicas[0]) or (
                not preferred and part.leader != NO_LEADER):
            return ErrorCode.ELECTION_NOT_NEEDED, MESSAGES[ErrorCode.ELECTION_NOT_NEEDED]
        record = self.rc.builder(part, election=Election.PREFERRED if preferred
                                 else Election.UNCLEAN).build()
        if record is None:
            code = ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE if preferred \
                else ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
            return code, MESSAGES[code]
        records.append((record, self.rc.change_version()))
        return ErrorCode.NONE, None

    # --- the periodic elections --------------------------------------------------------

    def walking(self) -> bool:
        """Whether a periodic election's walk is under way (`balance_step`, `unclean_step`)."""
        return self._balance is not None or self._unclean is not None

    def balancing(self) -> bool:
        return self._balance is not None

    def uncleaning(self) -> bool:
        return self._unclean is not None

    def balance_step(self, max_elections: int, limit: int
                     ) -> tuple[list[tuple[Any, int]], bool | None]:
        """A part of Kafka's maybeBalancePartitionLeaders: preferred elections for the
        partitions not led by their first replica when the run began, at most `limit` of
        them looked at in this part. (records, None) while the run goes on; at its end
        (records, whether more may be due at once: it stopped at `max_elections`)."""
        run = self._balance
        if run is None:
            run = self._balance = _Run(Walk(self.rc, self.rc.imbalanced.freeze_all()))
        records: list[tuple[Any, int]] = []
        for part in run.walk.take(limit):
            if run.elected + len(records) >= max_elections:
                break
            if part.replicas and part.leader != part.replicas[0]:
                record = self.rc.builder(part, election=Election.PREFERRED).build()
                if record is not None:
                    records.append((record, self.rc.change_version()))
        run.elected += len(records)
        if run.elected >= max_elections or run.walk.done:
            self._balance = None
            return records, run.elected >= max_elections
        return records, None

    def unclean_step(self, max_elections: int, limit: int
                     ) -> tuple[list[tuple[Any, int]], bool | None, list[str]]:
        """A part of Kafka's maybeElectUncleanLeaders: unclean elections for the partitions
        leaderless when the run began whose topics allow them, as `balance_step`; and one
        line per attempt."""
        run = self._unclean
        if run is None:
            run = self._unclean = _Run(Walk(self.rc, self.rc.brokers_to_isrs.members.freeze(
                NO_LEADER)))
        records: list[tuple[Any, int]] = []
        events: list[str] = []
        allowed: dict[Any, bool] = {}
        for part in run.walk.take(limit):
            if run.elected + len(records) >= max_elections:
                break
            topic = self.rc.topic_of(part)
            ok = allowed.get(topic.topic_id)
            if ok is None:
                ok = allowed[topic.topic_id] = self.rc.unclean_enabled(topic)
            if not ok or part.leader != NO_LEADER:
                continue
            code, _ = self._elect(topic.name, part.partition_id, UNCLEAN_ELECTION, records)
            events.append(f"Unclean leader election for offline partition {topic.name}-"
                          f"{part.partition_id}: {ErrorCode(code).name}")
        run.elected += len(records)
        if run.elected >= max_elections or run.walk.done:
            self._unclean = None
            return records, run.elected >= max_elections, events
        return records, None, events

    # --- reassignments -----------------------------------------------------------------

    def alter_partition_reassignments(self, request: Any, api_version: int) -> ControllerResult:
        allow_rf_change = request.allow_replication_factor_change if api_version >= 1 else True
        if not request.topics:
            return ControllerResult.reply(AlterPartitionReassignmentsResponse(
                throttle_time_ms=0, allow_replication_factor_change=True,
                error_code=ErrorCode.NONE, error_message="", responses=[]))
        response = AlterPartitionReassignmentsResponse(
            throttle_time_ms=0, allow_replication_factor_change=allow_rf_change,
            error_code=ErrorCode.NONE, error_message=None, responses=[])
        records: list[tuple[Any, int]] = []
        done = total = 0
        for t in request.topics:
            out = ReassignableTopicResponse(name=t.name, partitions=[])
            response.responses.append(out)
            for p in t.partitions:
                code, message = ErrorCode.NONE, None
                try:
                    self._reassign(t.name, p, records, allow_rf_change)
                    done += 1
                except PartitionError as exc:
                    code, message = exc.code, exc.message
                total += 1
                out.partitions.append(ReassignablePartitionResponse(
                    partition_index=p.partition_index, error_code=code, error_message=message))
        events = [f"Successfully altered {done} out of {total} partition reassignment(s)."]
        if len(records) > MAX_RECORDS_PER_USER_OP:
            return ControllerResult.reply(AlterPartitionReassignmentsResponse(
                throttle_time_ms=0, allow_replication_factor_change=allow_rf_change,
                error_code=ErrorCode.POLICY_VIOLATION,
                error_message="Unable to perform excessively large batch operation.",
                responses=[]))
        if not records:
            result = ControllerResult.reply(response)
            result.events = events
            return result
        return ControllerResult(response, records=records, events=events)

    def _reassign(self, name: str, target: Any, records: list[tuple[Any, int]],
                  allow_rf_change: bool) -> None:
        topic_id = self.rc.topics_by_name.get(name)
        topic = self.rc.topics.get(topic_id) if topic_id is not None else None
        if topic is None:
            raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                 f"Unable to find a topic named {name}.")
        part = topic.partitions.get(target.partition_index)
        if part is None:
            raise PartitionError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "Unable to find "
                                 f"partition {name}:{target.partition_index}.")
        if target.replicas is None:
            record = self._cancel(topic, part)
        else:
            record = self._change(topic, part, list(target.replicas), allow_rf_change)
        if record is not None:
            records.append((record, self.rc.change_version()))

    def _cancel(self, topic: Topic, part: Partition) -> Any:
        if not in_reassignment(part):
            raise PartitionError(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
                                 MESSAGES[ErrorCode.NO_REASSIGNMENT_IN_PROGRESS])
        try:
            replicas, isr, unclean = revert_reassignment(part)
        except ReassignmentError as exc:
            raise PartitionError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, str(exc)) from None
        allowed = self.rc.unclean_enabled(topic)
        if unclean and not allowed:
            raise PartitionError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Unable to revert "
                                 f"partition assignment for {topic.name}:{part.partition_id} "
                                 "because it would require an unclean leader election.")
        builder = self.rc.builder(part, election=Election.UNCLEAN if allowed
                                  else Election.ONLINE)
        builder.set_target_isr(isr).set_target_replicas(replicas)
        builder.set_target_removing([]).set_target_adding([])
        return builder.build()

    def _change(self, topic: Topic, part: Partition, target: list[int],
                allow_rf_change: bool) -> Any:
        self._check_manual(target)
        if not allow_rf_change:
            current = set(part.replicas)
            if in_reassignment(part):
                current = (current | set(part.adding_replicas)) - set(part.removing_replicas)
            if len(current) != len(target):
                raise PartitionError(ErrorCode.INVALID_REPLICATION_FACTOR, "The replication "
                                     f"factor is changed from {len(current)} to {len(target)}")
        plan = ReassignmentReplicas.of(part.replicas, target)
        builder = self.rc.builder(part)
        if plan.replicas != list(part.replicas):
            builder.set_target_replicas(plan.replicas)
        if plan.removing:
            builder.set_target_removing(plan.removing)
        if plan.adding:
            builder.set_target_adding(plan.adding)
        return builder.build()

    def _check_manual(self, brokers: list[int]) -> None:
        """validateManualPartitionAssignment, without a replication factor to match."""
        if not brokers:
            raise PartitionError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual partition "
                                 "assignment includes an empty replica list.")
        previous = None
        for b in sorted(brokers):
            if b not in self.cluster.brokers:
                raise PartitionError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual "
                                     f"partition assignment includes broker {b}, but no such "
                                     "broker is registered.")
            if b == previous:
                raise PartitionError(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "The manual "
                                     f"partition assignment includes the broker {b} more than "
                                     "once.")
            previous = b

    def list_partition_reassignments(self, request: Any, api_version: int) -> ControllerResult:
        response = ListPartitionReassignmentsResponse(throttle_time_ms=0,
                                                      error_code=ErrorCode.NONE,
                                                      error_message=None, topics=[])
        if request.topics is None:
            # From the index replay keeps (Kafka's reassigningTopics), never every partition.
            ongoing: dict[Any, list[int]] = {}
            for topic_id, pid in self.rc.reassigning.ids(None):
                ongoing.setdefault(topic_id, []).append(pid)
            for topic_id, pids in ongoing.items():
                self._list_topic(response, self.rc.topics[topic_id], pids)
        else:
            for t in request.topics:
                topic_id = self.rc.topics_by_name.get(t.name)
                if topic_id is not None and topic_id in self.rc.topics:
                    self._list_topic(response, self.rc.topics[topic_id],
                                     list(t.partition_indexes))
        return ControllerResult.reply(response)

    @staticmethod
    def _list_topic(response: Any, topic: Topic, partition_ids: list[int]) -> None:
        ongoing = OngoingTopicReassignment(name=topic.name, partitions=[])
        for pid in partition_ids:
            part = topic.partitions.get(pid)
            if part is not None and in_reassignment(part):
                ongoing.partitions.append(OngoingPartitionReassignment(
                    partition_index=pid, replicas=list(part.replicas),
                    adding_replicas=list(part.adding_replicas),
                    removing_replicas=list(part.removing_replicas)))
        if ongoing.partitions:
            response.topics.append(ongoing)


__all__ = ["NO_LEADER", "PartitionCommands", "PartitionError", "in_reassignment"]
