"""PartitionChangeBuilder: one partition's next state as a PartitionChangeRecord, or nothing.

Every leader or ISR move the controller makes goes through here, as in Kafka 4.1: a broker
fenced, shutting down, unfenced or unregistered, an AlterPartition from a leader, an election
asked for (ElectLeaders, the periodic preferred and unclean elections) and each step of a
reassignment. The caller sets targets (ISR, replicas, adding/removing, recovery state, a
directory) and the kind of election; `build` then, in Kafka's order:

1. completes a reassignment whose target ISR holds every target replica;
2. keeps the eligible leader replicas (KIP-966, when ELR is on): an ISR below the topic's
   effective min.insync.replicas hands its leavers to the ELR (not ones that shut down
   uncleanly), and the last-known ELR holds the last leader once the ISR is empty;
3. elects: the current leader if still valid, else the first valid replica (ISR, or the ELR
   when the ISR is empty), else the last known leader, else, for an unclean election, any
   live replica (ISR reset to it, leader recovery state RECOVERING);
4. bumps the leader epoch where a reassignment drops replicas (or, before metadata.version
   3.6-IV0, where the ISR shrinks);
5. writes only the fields that changed; no change at all is no record.

Pure: the partition and predicates come in, a record goes out; state moves only when the
record is replayed.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

from kraftpy.protocol.records.partition_change_record import PartitionChangeRecord

if TYPE_CHECKING:
    from kraftpy.controller.replication_control import Partition

NO_LEADER = -1
NO_LEADER_CHANGE = -2
RECOVERED, RECOVERING, NO_RECOVERY_CHANGE = 0, 1, -1
UNASSIGNED = uuid.UUID(int=0)  # DirectoryId.UNASSIGNED
LOST = uuid.UUID(int=1)  # DirectoryId.LOST
MIGRATING = uuid.UUID(int=2)  # DirectoryId.MIGRATING
MV_3_6_IV0 = 12  # from here an ISR shrink needs no leader epoch bump (KAFKA-15021)
MV_3_7_IV2 = 17  # directory assignment (PartitionChangeRecord.Directories)


class Election(Enum):
    """Kafka's PartitionChangeBuilder.Election."""

    PREFERRED = 0  # the preferred replica if it may lead, else as ONLINE
    ONLINE = 1  # any in-sync replica (the ELR when the ISR is empty)
    UNCLEAN = 2  # as ONLINE, then any live replica, losing what it lacks


def java_int_set_order(values: Iterable[int]) -> list[int]:
    """The iteration order of a java.util.HashSet<Integer> filled with `values` in order.

    Kafka builds the ELR through such a set; its order is what the record holds. An Integer
    hashes to itself (spread by h ^ h >>> 16), buckets are hash & (capacity - 1) with the
    capacity doubling past 3/4 full from 16, and a bucket keeps insertion order.
    """
    seen: list[int] = []
    for v in values:
        if v not in seen:
            seen.append(v)
    capacity = 16
    while len(seen) > capacity * 3 // 4:
        capacity *= 2

    def bucket(v: int) -> int:
        h = v & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return sorted(seen, key=lambda v: (bucket(v), seen.index(v)))


# --- reassignment (Kafka's PartitionReassignmentReplicas and PartitionReassignmentRevert) ---

@dataclass(frozen=True)
class ReassignmentReplicas:
    """The replica list of a reassignment in flight: the target's replicas, then the ones
    being removed; `adding` and `removing` sorted, as Kafka's TreeSets give them."""

    removing: list[int]
    adding: list[int]
    replicas: list[int]

    @staticmethod
    def of(current: Sequence[int], target: Sequence[int]) -> ReassignmentReplicas:
        removing = sorted(set(current) - set(target))
        adding = sorted(set(target) - set(current))
        return ReassignmentReplicas(removing, adding, list(target) + removing)

    def in_progress(self) -> bool:
        return bool(self.removing or self.adding)

    def maybe_complete(self, target_isr: list[int]) -> tuple[list[int], list[int]] | None:
        """(replicas, isr) once the ISR holds every replica the reassignment keeps."""
        if not self.in_progress():
            return None
        isr, replicas = list(target_isr), self.replicas
        if self.removing:
            isr = [r for r in target_isr if r not in self.removing]
            if not isr:
                return None
            replicas = [r for r in self.replicas if r not in self.removing]
            if not replicas:
                return None
        if not set(replicas) <= set(isr):
            return None
        return replicas, isr

    def original_replicas(self) -> list[int]:
        return [r for r in self.replicas if r not in self.adding]


class ReassignmentError(ValueError):
    """Kafka's InvalidReplicaAssignmentException from a revert that cannot be made."""


def revert_reassignment(part: Partition) -> tuple[list[int], list[int], bool]:
    """(replicas, isr, unclean) after cancelling `part`'s reassignment: the added replicas go,
    the removed ones stay. An ISR left empty takes the first remaining replica, which is an
    unclean election (the caller checks that the topic allows one)."""
    ongoing = ReassignmentReplicas(list(part.removing_replicas), list(part.adding_replicas),
                                   list(part.replicas))
    replicas = ongoing.original_replicas()
    isr = [r for r in part.isr if r not in ongoing.adding]
    if isr:
        return replicas, isr, False
    if not replicas:
        raise ReassignmentError("Invalid replica assignment: addingReplicas contains all "
                                "replicas.")
    return replicas, [replicas[0]], True


# --- the builder -------------------------------------------------------------------------------

class PartitionChangeBuilder:
    def __init__(self, part: Partition, is_acceptable_leader: Callable[[int], bool],
                 metadata_version: int, min_isr: int, *, elr_enabled: bool = False,
                 election: Election = Election.ONLINE,
                 default_dir: Callable[[int], uuid.UUID] | None = None,
                 directories: list[uuid.UUID] | None = None) -> None:
        """`directories`: `current_directories(part)`, when the caller has it already."""
        self.part = part
        self.is_acceptable_leader = is_acceptable_leader
        self.metadata_version = metadata_version
        self.min_isr = min_isr
        self.elr_enabled = elr_enabled
        self.election = election
        self.default_dir = default_dir or _migrating
        # The partition's own lists stand for unchanged targets: nothing here changes a
        # list in place (a target is replaced), and they are never the partition's to change.
        self.target_isr: list[int] = part.isr
        self.target_replicas: list[int] = part.replicas
        self.target_removing: list[int] = part.removing_replicas
        self.target_adding: list[int] = part.adding_replicas
        self.target_elr: list[int] = part.eligible_leader_replicas or []
        self.target_last_known_elr: list[int] = part.last_known_elr or []
        self.target_recovery = part.leader_recovery_state
        self.unclean_shutdown_replicas: list[int] = []
        self.current_dirs = current_directories(part) if directories is None else directories
        self.target_dirs = dict(zip(part.replicas, self.current_dirs, strict=False))
        # Kafka keeps the last leader in the last-known ELR (useLastKnownLeaderInBalancedRecovery).
        self.use_last_known_leader = True

    # targets, as Kafka's setters
    def set_target_isr(self, isr: Iterable[int]) -> PartitionChangeBuilder:
        self.target_isr = list(isr)
        return self

    def set_target_replicas(self, replicas: Iterable[int]) -> PartitionChangeBuilder:
        self.target_replicas = list(replicas)
        return self

    def set_target_removing(self, removing: Iterable[int]) -> PartitionChangeBuilder:
        self.target_removing = list(removing)
        return self

    def set_target_adding(self, adding: Iterable[int]) -> PartitionChangeBuilder:
        self.target_adding = list(adding)
        return self

    def set_target_recovery_state(self, state: int) -> PartitionChangeBuilder:
        self.target_recovery = state
        return self

    def set_directory(self, broker_id: int, directory: uuid.UUID) -> PartitionChangeBuilder:
        self.target_dirs[broker_id] = directory
        return self

    def set_unclean_shutdown_replicas(self, replicas: Iterable[int]) -> PartitionChangeBuilder:
        self.unclean_shutdown_replicas = list(replicas)
        return self

    # --- election ---------------------------------------------------------------------

    def _valid_new_leader(self, replica: int) -> bool:
        """In the ISR, or in the ELR when the ISR is empty, and acceptable."""
        in_set = replica in self.target_isr or (not self.target_isr
                                                and replica in self.target_elr)
        return in_set and self.is_acceptable_leader(replica)

    def _can_elect_last_known_leader(self) -> bool:
        last = self.part.last_known_elr or []
        return (self.elr_enabled and self.use_last_known_leader and not self.target_elr
                and not self.target_isr and len(last) == 1
                and self.is_acceptable_leader(last[0]))

    def elect_leader(self) -> tuple[int, bool]:
        """(leader, unclean), Kafka's electLeader."""
        part = self.part
        if self.election is Election.PREFERRED:
            preferred = self.target_replicas[0]
            if self._valid_new_leader(preferred):
                return preferred, False
            if self._valid_new_leader(part.leader):
                return part.leader, False
            for r in self.target_replicas[1:]:
                if self._valid_new_leader(r):
                    return r, False
            if self._can_elect_last_known_leader():
                return (part.last_known_elr or [])[0], True
            return NO_LEADER, False
        if self._valid_new_leader(part.leader):
            return part.leader, False
        for r in self.target_replicas:
            if self._valid_new_leader(r):
                return r, False
        if self._can_elect_last_known_leader():
            return (part.last_known_elr or [])[0], True
        if self.election is Election.UNCLEAN:
            for r in self.target_replicas:
                if self.is_acceptable_leader(r):
                    return r, True
        return NO_LEADER, False

    def _try_election(self, record: PartitionChangeRecord) -> None:
        leader, unclean = self.elect_leader()
        if leader == self.part.leader:
            return
        if leader in self.target_elr:
            self.target_isr = [leader]
            self.target_elr = [r for r in self.target_elr if r != leader]
        record.leader = leader
        if unclean:
            record.isr = [leader]  # forced: whatever the others had is given up
            if self.part.leader_recovery_state != RECOVERING:
                record.leader_recovery_state = RECOVERING

    # --- the record -------------------------------------------------------------------

    def _complete_reassignment(self) -> None:
        if not self.target_removing and not self.target_adding:
            return  # no reassignment in progress
        done = ReassignmentReplicas(self.target_removing, self.target_adding,
                                    self.target_replicas).maybe_complete(self.target_isr)
        if done is None:
            return
        self.target_replicas, self.target_isr = done
        self.target_removing, self.target_adding = [], []

    def _populate_target_elr(self) -> None:
        if not self.elr_enabled:
            return
        if len(self.target_isr) >= self.min_isr:
            self.target_elr, self.target_last_known_elr = [], []
            return
        isr = set(self.target_isr)
        candidates = java_int_set_order([*self.target_elr, *self.part.isr])
        self.target_elr = [r for r in candidates if r not in isr
                           and r not in self.unclean_shutdown_replicas]
        candidates = java_int_set_order([*candidates, *self.target_last_known_elr])
        self.target_last_known_elr = [r for r in candidates if r not in isr
                                      and r not in self.target_elr]

    def _update_record_elr(self, record: PartitionChangeRecord) -> None:
        clean = record.isr is None
        if not clean or not self.elr_enabled:
            self.target_elr, self.target_last_known_elr = [], []
        if self.target_elr != (self.part.eligible_leader_replicas or []):
            record.eligible_leader_replicas = list(self.target_elr)
        last = self.part.last_known_elr or []
        if self.use_last_known_leader and len(last) == 1 and (
                record.leader == NO_LEADER or (record.leader == NO_LEADER_CHANGE
                                               and self.part.leader == NO_LEADER)):
            self.target_last_known_elr = last
        if self.use_last_known_leader:
            return  # the last known leader is written by _update_last_known_leader
        if self.target_last_known_elr != last:
            record.last_known_elr = list(self.target_last_known_elr)

    def _update_last_known_leader(self, record: PartitionChangeRecord) -> None:
        if not self.use_last_known_leader or not self.elr_enabled:
            return
        part, last = self.part, self.part.last_known_elr or []
        if record.isr is not None and not record.isr and (
                len(last) != 1 or last[0] != part.leader):
            record.last_known_elr = [part.leader]  # the first time it has no leader
        elif (record.leader >= 0 or (part.leader != NO_LEADER and record.leader != NO_LEADER)) \
                and last:
            record.last_known_elr = []

    def _set_assignment_changes(self, record: PartitionChangeRecord) -> None:
        part = self.part
        if self.target_replicas:
            if self.metadata_version >= MV_3_7_IV2:
                targets = self.target_dirs
                dirs = [targets[r] if r in targets else self.default_dir(r)
                        for r in self.target_replicas]
                if not _same_ids(dirs, self.current_dirs):
                    record.directories = dirs
            if self.target_replicas != part.replicas:
                record.replicas = list(self.target_replicas)
        if self.target_removing != part.removing_replicas:
            record.removing_replicas = list(self.target_removing)
        if self.target_adding != part.adding_replicas:
            record.adding_replicas = list(self.target_adding)

    def build(self) -> PartitionChangeRecord | None:
        """The change record, or None when nothing changes."""
        part = self.part
        record = PartitionChangeRecord(topic_id=part.topic_id, partition_id=part.partition_id)
        self._complete_reassignment()
        self._populate_target_elr()
        self._try_election(record)
        # A reassignment that drops replicas needs a new leader epoch.
        if record.leader == NO_LEADER_CHANGE and not set(part.replicas) <= set(
                self.target_replicas):
            record.leader = part.leader
        self._update_record_elr(record)
        if record.isr is None and (self.target_isr or self.elr_enabled) \
                and self.target_isr != part.isr:
            record.isr = list(self.target_isr)
        if (self.metadata_version < MV_3_6_IV0 and record.leader == NO_LEADER_CHANGE
                and record.isr is not None and not set(part.isr) <= set(record.isr)):
            record.leader = part.leader
        self._update_last_known_leader(record)
        self._set_assignment_changes(record)
        if self.target_recovery != part.leader_recovery_state:
            record.leader_recovery_state = self.target_recovery
        return None if is_no_op(record) else record


def current_directories(part: Partition) -> list[uuid.UUID]:
    """The partition's directories as Kafka's registration holds them: MIGRATING for each
    replica when the records carried none. (A copy the caller may keep.)"""
    dirs = part.directories
    for d in dirs:
        if d.int != 2:  # not MIGRATING (compared as ints: UUID.__eq__ is slow Python)
            return list(dirs)
    return [MIGRATING] * len(part.replicas)


def _same_ids(a: list[uuid.UUID], b: list[uuid.UUID]) -> bool:
    """a == b for lists of directory ids, the same objects compared first (the usual case)."""
    if len(a) != len(b):
        return False
    for x, y in zip(a, b, strict=True):
        if x is not y and x.int != y.int:
            return False
    return True


def _migrating(_broker_id: int) -> uuid.UUID:
    return MIGRATING


def is_no_op(record: PartitionChangeRecord) -> bool:
    """Kafka's changeRecordIsNoOp."""
    return (record.isr is None and record.eligible_leader_replicas is None
            and record.last_known_elr is None and record.leader == NO_LEADER_CHANGE
            and record.replicas is None and record.removing_replicas is None
            and record.adding_replicas is None
            and record.leader_recovery_state == NO_RECOVERY_CHANGE
            and record.directories is None)
