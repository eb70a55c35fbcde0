"""A way back from a lost majority: a stopped survivor's data dir given a voter set of the
survivors only (`kraftpy storage recover-quorum`).

A KIP-853 quorum changes its voters only by committing a VotersRecord, which needs a majority
of the voters it has. With that majority's disks gone, nothing online can change the set, and
Kafka offers no override. This does it offline, on one survivor, at a cost the operator must
accept: whatever the lost voters committed that this disk lacks is gone.

What is written, after the log the survivor has (kept whole: offsets, epochs and CRCs as
they are), as one control batch of a new leader epoch N, in the shape Kafka's own first
leader writes: LeaderChange (this node leads N, voters = the survivors, granted by this
node), KRaftVersion (1), KRaftVoters (the survivors, each as the old set recorded it). The
quorum-state names this node leader of N, and `quorum-recovery.json` in the data dir keeps
the act and the directories it declared lost. A second batch of epoch N moves the producer-id
counter on (a ProducerIdsRecord, as a snapshot states it), by `PRODUCER_ID_MARGIN` ids or what
the operator names: blocks the lost voters granted are not in this log, and brokers may be
handing out ids from them, so the next block must start past them. At its next start the node
stands for epoch N + 1 with the new set (alone, or with the other survivors) and writes its
own LeaderChange.

Why it is safe as far as anything can be once a majority is lost:
- N is above every epoch this disk knows (quorum-state, the log, its snapshots) by a margin
  (`EPOCH_MARGIN`), or what the operator names, so no leader of the old set can have used
  it unless the lost voters held that many elections this node never heard of. Epoch N has
  one writer, this command, so no other log holds a different batch of epoch N.
- Every replica that takes part later fetches this log and truncates what diverges from it;
  a request from an epoch below N is fenced as Raft fences any stale leader.
- A voter's key is its id and directory id. A lost controller formatted again has a new
  directory id, so it cannot vote as its old self. An old disk that comes back asks the old
  set for votes: the recovered survivor never grants one (it refuses the directory, and its
  log ends in epoch N, past anything an old disk holds), nor does any replica that has
  fetched epoch N; only the other survivors (fewer than a majority, less the recovered one)
  can, before they fetch it. So one old disk can never lead; old disks that come back
  together, enough of them to make a majority of the old set with those survivors, can:
  nothing on the survivors stops that, which is why the operator names each lost directory
  and must never start it again.
- The survivor refuses Vote, Fetch and FetchSnapshot from a declared-lost directory, and
  AddRaftVoter of one (`declared_lost`, read by `dynamic.VoterChanges`).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftpy.controller.log import files
from kraftpy.controller.raft.quorum_state import ElectionState
from kraftpy.controller.raft.voters import ReplicaKey, VoterSet, control_records
from kraftpy.protocol.control_records import leader_change
from kraftpy.protocol.metadata_frame import encode_metadata_record
from kraftpy.protocol.records.producer_ids_record import ProducerIdsRecord
from kraftpy.protocol.uuid import kafka_uuid_str, parse_kafka_uuid

RECOVERY_FILE = "quorum-recovery.json"
EPOCH_MARGIN = 1000  # epochs above the highest this disk knows, for elections it never saw
PRODUCER_ID_MARGIN = 1_000_000  # ids past the log's counter: a thousand blocks it never saw
INT64_MAX = 2**63 - 1
MAX_EPOCH = 2**31 - 1
_DIGITS = re.compile(r"[0-9]{1,10}")


class RecoveryRefused(ValueError):
    """The recovery is not done; the message says why and what to do instead."""


class RecoveryFileError(ValueError):
    """quorum-recovery.json is not as this module writes it."""


# --- what the survivor's disk says ----------------------------------------------------------------
@dataclass(frozen=True)
class SurvivorLog:
    """The facts of one stopped node's data dir that a recovery is decided on."""

    log_dir: Path
    cluster_id: str
    node: ReplicaKey  # this node: id and meta.properties' directory.id
    kraft_version: int
    voters: VoterSet  # the set in force at the log end
    voters_offset: int  # where the log records it (-1: a snapshot or the format holds it)
    log_start: int
    log_end: int
    last_epoch: int  # of the log's last batch (0 for an empty log)
    quorum_epoch: int  # quorum-state's
    quorum_leader: int | None
    snapshot_end: int  # the newest snapshot's end offset: below it everything is committed
    declared_lost: frozenset[ReplicaKey]  # by earlier recoveries
    next_producer_id: int = 0  # the producer-id counter at the log end (0: never issued)

    @property
    def highest_epoch(self) -> int:
        return max(self.last_epoch, self.quorum_epoch)


def read_survivor(storage: Any) -> SurvivorLog:
    """The facts of an open `MetadataStorage` (read-only is enough)."""
    from kraftpy.controller.raft.dynamic import recorded_voters

    text = storage.meta.get("directory.id")
    if not text:
        raise RecoveryRefused(
            f"{storage.log_dir / files.META_PROPERTIES} has no directory.id: this is not a "
            "KIP-853 controller directory")
    try:
        directory = parse_kafka_uuid(text)
    except ValueError:
        raise RecoveryRefused(f"{storage.log_dir / files.META_PROPERTIES}: directory.id "
                              f"{text!r} is not a Kafka uuid") from None
    base, history = recorded_voters(storage)
    voters, offset = (history[-1][1], history[-1][0]) if history else (base, -1)
    if history and history[-1][0] < storage.metadata.log_start_offset:
        offset = -1  # the newest snapshot's set
    mdir = storage.log_dir / "__cluster_metadata-0"
    state = files.read_quorum_state(mdir) if mdir.is_dir() else None
    epochs = storage.metadata.leader_epochs
    snapshot = storage.snapshot
    sid = snapshot.snapshot_id if snapshot is not None else None
    leader = state.get("leaderId", -1) if state else -1
    if state is not None and type(state["leaderEpoch"]) is not int:
        raise RecoveryRefused(f"{mdir / files.QUORUM_STATE}: leaderEpoch "
                              f"{state['leaderEpoch']!r} is not a number")
    return SurvivorLog(
        log_dir=Path(storage.log_dir), cluster_id=storage.cluster_id,
        node=ReplicaKey(storage.node_id, directory),
        kraft_version=_kraft_version(storage), voters=voters, voters_offset=offset,
        log_start=storage.metadata.log_start_offset, log_end=storage.metadata.log_end_offset,
        last_epoch=max([epochs[-1][0] if epochs else 0, sid.epoch if sid else 0]),
        quorum_epoch=state["leaderEpoch"] if state else 0,
        quorum_leader=leader if isinstance(leader, int) and leader >= 0 else None,
        snapshot_end=sid.end_offset if sid is not None else 0,
        declared_lost=declared_lost(storage.log_dir),
        next_producer_id=_next_producer_id(storage))


def _next_producer_id(storage: Any) -> int:
    """The producer-id counter replay reaches: the last ProducerIdsRecord of the newest
    snapshot and the log after it (each must be above the one before)."""
    from kraftpy.protocol.metadata_frame import decode_metadata_record
    from kraftpy.protocol.primitives import read_uvarint

    def scan(values: Any, found: int) -> int:
        for value in values:
            if value is not None and len(value) > 1 and value[0] == 1 and read_uvarint(
                    value, 1)[0] == ProducerIdsRecord.API_KEY:
                found = decode_metadata_record(value)[0].next_producer_id
        return found

    found = 0
    start = None
    snapshot = storage.snapshot
    if snapshot is not None and snapshot.snapshot_id is not None:
        found = scan(snapshot.iter_values(), found)
        start = snapshot.snapshot_id.end_offset
    for batch in storage.metadata.read(start):
        if not batch.is_control:
            found = scan(batch.values(), found)
    return found


def _kraft_version(storage: Any) -> int:
    """kraft.version as the node would take it: the log's last KRaftVersion record, else the
    newest snapshot's, else the raft bootstrap snapshot's (`MetadataStorage._load_voters`)."""
    from kraftpy.controller.log.snapshots import read_snapshot
    from kraftpy.controller.raft.voters import RAFT_BOOTSTRAP_SNAPSHOT, from_control
    from kraftpy.protocol.control_records import ControlType, parse_control_key

    level = None
    start = None
    snapshot = storage.snapshot
    if snapshot is not None and snapshot.snapshot_id is not None \
            and snapshot.snapshot_id.end_offset > 0:
        level = from_control(snapshot.control)[0]
        start = snapshot.snapshot_id.end_offset
    for batch in storage.metadata.read(start):
        if batch.is_control:
            for record in batch.records():
                if parse_control_key(record.key) == ControlType.KRAFT_VERSION:
                    found = from_control([(ControlType.KRAFT_VERSION, record.value)])[0]
                    level = found if found is not None else level
    bootstrap = storage.log_dir / "__cluster_metadata-0" / RAFT_BOOTSTRAP_SNAPSHOT
    if level is None and bootstrap.is_file():
        level = from_control(read_snapshot(bootstrap).control)[0]
    return level or 0


# --- the operator's words ------------------------------------------------------------------------
def parse_lost(text: str) -> list[ReplicaKey]:
    """`--lost-controllers ID:DIRECTORY_ID,...`: each lost voter by id and directory id."""
    out: list[ReplicaKey] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        node, colon, directory = item.partition(":")
        if not colon or not _DIGITS.fullmatch(node.strip()):
            raise RecoveryRefused(f"--lost-controllers: {item!r} is not ID:DIRECTORY_ID (the "
                                  "voter's id and the directory id the voter set records)")
        try:
            key = ReplicaKey(int(node), parse_kafka_uuid(directory.strip()))
        except ValueError:
            raise RecoveryRefused(f"--lost-controllers: {directory.strip()!r} in {item!r} is "
                                  "not a directory id (22 base64url characters)") from None
        if any(k.id == key.id for k in out):
            raise RecoveryRefused(f"--lost-controllers names controller {key.id} twice")
        out.append(key)
    if not out:
        raise RecoveryRefused("--lost-controllers names no controller")
    return out


def parse_survivors(text: str) -> list[int]:
    """`--survivors ID,...`: the voters whose data dirs survive, this node among them."""
    out: list[int] = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        if not _DIGITS.fullmatch(item):
            raise RecoveryRefused(f"--survivors: {item!r} is not a controller id")
        if int(item) in out:
            raise RecoveryRefused(f"--survivors names controller {item} twice")
        out.append(int(item))
    if not out:
        raise RecoveryRefused("--survivors names no controller")
    return out


# --- the decision ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class RecoveryPlan:
    survivor: SurvivorLog
    voters: VoterSet  # the new set: the survivors, as the old set recorded them
    lost: tuple[ReplicaKey, ...]
    epoch: int  # the leader epoch of the recovery batch
    next_producer_id: int | None = None  # the counter moved on to (None: left as it is)

    @property
    def offset(self) -> int:
        """Where the batch goes: the log end (LeaderChange there, the voters two later)."""
        return self.survivor.log_end

    def records(self) -> list[tuple[bytes, bytes]]:
        """(key, value) of the control batch: LeaderChange, KRaftVersion, KRaftVoters."""
        me = self.survivor.node.id
        return [leader_change(me, sorted(self.voters.ids), [me]),
                *control_records(1, self.voters.to_record())]

    def producer_ids(self) -> list[bytes]:
        """The second batch: the counter moved on (no broker, no epoch: a snapshot's form)."""
        if self.next_producer_id is None:
            return []
        return [encode_metadata_record(ProducerIdsRecord(
            broker_id=-1, broker_epoch=-1, next_producer_id=self.next_producer_id), 0)]

    def election(self) -> bytes:
        """quorum-state: this node led epoch N (data_version 1, as KIP-853 nodes write it)."""
        return ElectionState(epoch=self.epoch, leader_id=self.survivor.node.id).encode(1)

    def entry(self, now_ms: int) -> dict[str, Any]:
        """What quorum-recovery.json keeps of this recovery."""
        s = self.survivor
        return {"timestampMs": now_ms, "nodeId": s.node.id,
                "directoryId": _dir(s.node), "offset": self.offset,
                "leaderEpoch": self.epoch, "previousVotersOffset": s.voters_offset,
                "knownCommittedOffset": s.snapshot_end, "logEndOffset": s.log_end,
                "nextProducerId": self.next_producer_id,
                "voters": [_key_json(n.key) for n in self.voters.voters.values()],
                "lost": [_key_json(k) for k in self.lost]}


def plan(survivor: SurvivorLog, *, survivors: Sequence[int] | None,
         lost: Sequence[ReplicaKey] | None, leader_epoch: int | None = None,
         skip_producer_ids: int = PRODUCER_ID_MARGIN) -> RecoveryPlan:
    """The recovery the operator asked for, or `RecoveryRefused` saying why not. Every voter
    of the recorded set is named once: a survivor (this node among them) or lost, by its id
    and the directory id the set records; the survivors must have lost their majority."""
    s = survivor
    if s.kraft_version < 1:
        raise RecoveryRefused(
            f"{s.log_dir} holds no KIP-853 voter set (kraft.version {s.kraft_version}): a "
            "static quorum's voters are each node's controller.quorum.voters, which this "
            "command does not change")
    if not s.voters.voters:
        raise RecoveryRefused(
            f"{s.log_dir} records kraft.version 1 but no voter set: this node was formatted "
            "to join a quorum (--no-initial-controllers) and never joined one")
    shown = describe_voters(s.voters, s.node)
    if not s.voters.is_voter(s.node):
        raise RecoveryRefused(
            f"this node ({_show(s.node)}) is not a voter of the recorded set {shown}: run "
            "recover-quorum on a surviving voter's data dir")
    if s.voters.is_only_voter(s.node):
        raise RecoveryRefused(f"this node is already the only voter ({shown}): there is no "
                              "lost majority to recover from")
    if survivors is None or lost is None:
        raise RecoveryRefused(
            f"name every voter of {shown} once: the survivors with --survivors ID,... (this "
            "node among them) and the lost ones with --lost-controllers ID:DIRECTORY_ID,...")
    for key in lost:
        if key.id == s.node.id:
            raise RecoveryRefused(f"--lost-controllers names controller {key.id}, this node: "
                                  "run recover-quorum on a survivor")
        node = s.voters.voters.get(key.id)
        if node is None:
            raise RecoveryRefused(f"--lost-controllers: controller {key.id} is not a voter of "
                                  f"{shown}")
        if node.key != key:
            raise RecoveryRefused(
                f"--lost-controllers: controller {key.id}'s directory is "
                f"{_dir(node.key)} in the voter set, not {_dir(key)}: name the directory "
                "that is lost as the set records it")
    named_lost = {k.id for k in lost}
    both = sorted(named_lost & set(survivors))
    if both:
        raise RecoveryRefused(f"controller {both[0]} is named in both --survivors and "
                              "--lost-controllers")
    for node_id in survivors:
        if node_id not in s.voters.voters:
            raise RecoveryRefused(f"--survivors: controller {node_id} is not a voter of {shown}")
    if s.node.id not in survivors:
        raise RecoveryRefused(f"--survivors must name this node ({s.node.id}): the new voter "
                              "set is written here")
    unnamed = sorted(s.voters.ids - named_lost - set(survivors))
    if unnamed:
        raise RecoveryRefused(f"controller {unnamed[0]} of {shown} is named in neither "
                              "--survivors nor --lost-controllers")
    if len(survivors) >= s.voters.majority:
        raise RecoveryRefused(
            f"{len(survivors)} of the {len(s.voters.voters)} voters survive, a majority: the "
            "quorum can still elect a leader and commit. Start the survivors and remove the "
            "lost voters with kafka-metadata-quorum remove-controller instead")
    floor = s.highest_epoch + 1
    epoch = s.highest_epoch + 1 + EPOCH_MARGIN if leader_epoch is None else leader_epoch
    if epoch < floor:
        raise RecoveryRefused(f"--leader-epoch {epoch} is not above epoch {s.highest_epoch}, "
                              "the highest this data dir knows")
    if epoch >= MAX_EPOCH:
        raise RecoveryRefused(f"leader epoch {epoch} does not leave room below {MAX_EPOCH}")
    if skip_producer_ids < 0:
        raise RecoveryRefused(f"--skip-producer-ids {skip_producer_ids} is negative")
    next_id = s.next_producer_id + skip_producer_ids if skip_producer_ids else None
    if next_id is not None and next_id > INT64_MAX - 1_000_000:
        raise RecoveryRefused(f"the producer-id counter {s.next_producer_id} plus "
                              f"{skip_producer_ids} leaves no room for blocks")
    new = VoterSet.of(s.voters.voters[i] for i in sorted(survivors))
    return RecoveryPlan(s, new, tuple(sorted(lost, key=lambda k: k.id)), epoch, next_id)


# --- what the operator is told ------------------------------------------------------------------
def describe_survivor(s: SurvivorLog) -> list[str]:
    where = ("the newest snapshot" if s.voters_offset < 0
             else f"offset {s.voters_offset}")
    leader = "none" if s.quorum_leader is None else str(s.quorum_leader)
    lines = [
        f"Data dir {s.log_dir}: cluster {s.cluster_id}, node {s.node.id}, directory "
        f"{_dir(s.node)}",
        f"Voter set (kraft.version {s.kraft_version}, recorded at {where}): "
        f"{describe_voters(s.voters, s.node)}",
        f"Metadata log: offsets {s.log_start} to {s.log_end - 1} (log end offset "
        f"{s.log_end}), last epoch {s.last_epoch}; quorum-state epoch {s.quorum_epoch} "
        f"(leader {leader})",
    ]
    if s.declared_lost:
        lines.append("Declared lost by an earlier recovery: "
                     + ", ".join(_show(k) for k in sorted(s.declared_lost, key=_order)))
    return lines


def describe_loss(s: SurvivorLog) -> list[str]:
    """The offsets that may be lost, as far as this disk can tell: the high watermark is not
    kept on disk, so only the newest snapshot's end is known committed."""
    lines = ["What may be lost:"]
    if s.snapshot_end > 0:
        known = (f"the newest snapshot ends at offset {s.snapshot_end}: offsets below it are "
                 "known committed")
    else:
        known = "no snapshot: no offset is known committed (the high watermark is not on disk)"
    lines.append(f"  - {known}")
    if s.log_end > s.snapshot_end:
        lines.append(
            f"  - offsets {s.snapshot_end} to {s.log_end - 1} are on this disk, but whether a "
            "majority of the old voters had them is unknown: they are kept and become "
            "committed")
    lines.append(
        f"  - any record the lost voters committed at offset {s.log_end} or later, or in an "
        f"epoch above {s.last_epoch}, is not on this disk and is lost; a broker whose "
        "__cluster_metadata-0 goes further or holds such an epoch had applied some of it")
    return lines


def describe_plan(p: RecoveryPlan) -> list[str]:
    others = sorted(p.voters.ids - {p.survivor.node.id})
    lines = [
        f"New voter set: {describe_voters(p.voters, p.survivor.node)}, in a control batch of "
        f"leader epoch {p.epoch} at offsets {p.offset} to {p.offset + 2} (LeaderChange, "
        "KRaftVersion, KRaftVoters)",
        "Declared lost, refused from now on: " + ", ".join(_show(k) for k in p.lost),
    ]
    if p.next_producer_id is not None:
        lines.append(
            f"Producer ids: the counter moves from {p.survivor.next_producer_id} to "
            f"{p.next_producer_id} (offset {p.offset + 3}), past blocks the lost voters may "
            "have granted")
    if others:
        lines.append("Other survivors (" + ", ".join(map(str, others)) + "): start them on "
                     "their data dirs as they are; never run recover-quorum on them too. "
                     "Run it on the survivor whose log is the most up to date: the highest "
                     "last epoch, then the highest log end offset")
    return lines


def describe_voters(voters: VoterSet, me: ReplicaKey | None = None) -> str:
    return "[" + ", ".join(f"{_show(n.key)}{' (this node)' if me == n.key else ''}"
                           for n in voters.voters.values()) + "]"


def _show(key: ReplicaKey) -> str:
    return f"{key.id}:{_dir(key)}"


def _dir(key: ReplicaKey) -> str:
    return "-" if key.directory_id is None else kafka_uuid_str(key.directory_id)


def _order(key: ReplicaKey) -> tuple[int, str]:
    return key.id, _dir(key)


def _key_json(key: ReplicaKey) -> dict[str, Any]:
    return {"id": key.id, "directoryId": _dir(key)}


# --- on disk ---------------------------------------------------------------------------------------
def write(storage: Any, p: RecoveryPlan, now_ms: int) -> None:
    """Carry out the plan on the storage it was made from (opened for writing): first the
    declaration (quorum-recovery.json), then the batch, fsynced, then quorum-state. A crash
    between them leaves a dir the node starts on safely, and the command can run again."""
    if storage.metadata.log_end_offset != p.offset:
        raise RecoveryRefused(f"the log end moved from {p.offset} to "
                              f"{storage.metadata.log_end_offset} since it was read: run again")
    path = storage.log_dir / RECOVERY_FILE
    recoveries = read_recoveries(storage.log_dir)
    body = {"version": 0, "recoveries": [*recoveries, p.entry(now_ms)]}
    files.atomic_write(path, (json.dumps(body, indent=1) + "\n").encode())
    keys, values = zip(*p.records(), strict=True)
    storage.metadata.append(list(values), keys=list(keys), control=True, leader_epoch=p.epoch,
                            timestamp=now_ms)
    if p.producer_ids():
        storage.metadata.append(p.producer_ids(), leader_epoch=p.epoch, timestamp=now_ms)
    storage.metadata.flush()
    files.atomic_write(storage.log_dir / "__cluster_metadata-0" / files.QUORUM_STATE,
                       p.election())


def read_recoveries(log_dir: Path) -> list[dict[str, Any]]:
    """The recoveries quorum-recovery.json records, oldest first ([] without the file)."""
    path = Path(log_dir) / RECOVERY_FILE
    if not path.exists():
        return []
    try:
        body = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecoveryFileError(f"{path}: not JSON ({exc})") from None
    recoveries = body.get("recoveries") if isinstance(body, dict) else None
    if not isinstance(body, dict) or body.get("version") != 0 or not isinstance(recoveries,
                                                                                  list):
        raise RecoveryFileError(f"{path}: not version 0 with a list of recoveries")
    for number, entry in enumerate(recoveries, 1):
        lost = entry.get("lost") if isinstance(entry, dict) else None
        if not isinstance(lost, list) or not all(_is_key(k) for k in lost):
            raise RecoveryFileError(f"{path}: recovery {number} has no list of lost "
                                    '{"id": ID, "directoryId": DIRECTORY_ID}')
    return recoveries


def _is_key(item: Any) -> bool:
    if not isinstance(item, dict) or type(item.get("id")) is not int:
        return False
    try:
        parse_kafka_uuid(item.get("directoryId"))
    except (ValueError, TypeError, AttributeError):
        return False
    return True


def declared_lost(log_dir: Path) -> frozenset[ReplicaKey]:
    """Every directory a recovery of this data dir declared lost."""
    return frozenset(ReplicaKey(int(k["id"]), parse_kafka_uuid(k["directoryId"]))
                     for entry in read_recoveries(log_dir) for k in entry["lost"])


def now_ms() -> int:
    return time.time_ns() // 1_000_000
