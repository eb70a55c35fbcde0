"""KIP-853's dynamic quorum on the trio shell: where it starts, who it talks to, and the
leader's side of AddRaftVoter (80), RemoveRaftVoter (81) and UpdateRaftVoter (82).

A controller configured with `controller.quorum.bootstrap.servers` (and no
`controller.quorum.voters`) runs `RaftQuorum` with the voter set the log records: the newest
VotersRecord in the log, else the newest snapshot's, else the raft bootstrap snapshot that
`storage format --standalone` / `--initial-controllers` wrote. A node formatted with
`--no-initial-controllers` starts with no voters at all: an observer that fetches from the
bootstrap servers until it finds the leader, replicates the log, and becomes a voter when a
VotersRecord naming it (its id and directory id) arrives.

The decisions are the core's (`RaftNode.voter_change_error`, `add_voter`, `remove_voter`,
`update_voter`); this module carries out what needs I/O or time, in the order Kafka's
AddVoterHandler / RemoveVoterHandler / UpdateVoterHandler do: one change at a time, the new
voter's ApiVersions asked for its kraft.version range, and the AddRaftVoter and
RemoveRaftVoter answers held until the VotersRecord is committed (REQUEST_TIMED_OUT after
`controller.quorum.request.timeout.ms`, NOT_LEADER_OR_FOLLOWER if the leadership is lost
meanwhile).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio
from kraftpy.controller.raft.peers import Peers, request_once
from kraftpy.controller.raft.voters import RAFT_BOOTSTRAP_SNAPSHOT, ReplicaKey, VoterNode, VoterSet
from kraftpy.protocol.messages.add_raft_voter_response import AddRaftVoterResponse
from kraftpy.protocol.messages.remove_raft_voter_response import RemoveRaftVoterResponse
from kraftpy.protocol.messages.update_raft_voter_response import (
    CurrentLeader,
    UpdateRaftVoterResponse,
)
from kraftpy.protocol.uuid import ZERO_UUID, kafka_uuid_str

log = logging.getLogger("kraftpy.raft")

NONE = 0
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
UNSUPPORTED_VERSION = 35
INVALID_REQUEST = 42
INCONSISTENT_CLUSTER_ID = 104
DUPLICATE_VOTER = 126
VOTER_NOT_FOUND = 127
API_VERSIONS_VERSION = 4  # the latest: below it, ranges from 0 are left out


# --- configuration and the recorded voters ------------------------------------------------------
def configured_bootstrap(config: Any) -> dict[int, tuple[str, int]] | None:
    """`controller.quorum.bootstrap.servers` of a controller without
    `controller.quorum.voters`, as Kafka numbers them (-2, -3, ...); None otherwise."""
    from kraftpy.controller.raft.shell import RaftShellError

    props = config.properties
    text = props.get("controller.quorum.bootstrap.servers", "").strip()
    if not text or props.get("controller.quorum.voters", "").strip():
        return None
    if "controller" not in props.get("process.roles", "broker,controller"):
        return None
    out: dict[int, tuple[str, int]] = {}
    for index, item in enumerate(x.strip() for x in text.split(",")):
        host, colon, port = item.rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise RaftShellError(f"controller.quorum.bootstrap.servers: {item!r} is not "
                                 "host:port", 2)
        out[-(index + 2)] = (host.strip("[]"), int(port))
    return out


def recorded_voters(storage: Any) -> tuple[VoterSet, list[tuple[int, VoterSet]]]:
    """(the set before the log, [(offset, set) of every VotersRecord in the log]): the base
    from the newest snapshot (also in the history, at the snapshot's last offset) or the raft
    bootstrap snapshot, empty when neither has one."""
    from kraftpy.controller.log.snapshots import read_snapshot
    from kraftpy.controller.raft.voters import from_control
    from kraftpy.protocol.control_records import ControlType, parse_control_key
    from kraftpy.protocol.messages.voters_record import VotersRecord

    record = None
    snapshot = storage.snapshot
    start = None
    if snapshot is not None and snapshot.snapshot_id is not None \
            and snapshot.snapshot_id.end_offset > 0:
        record = from_control(snapshot.control)[1]
        start = snapshot.snapshot_id.end_offset
    else:
        path = storage.log_dir / "__cluster_metadata-0" / RAFT_BOOTSTRAP_SNAPSHOT
        if path.is_file():
            record = from_control(read_snapshot(path).control)[1]
    base = VoterSet() if record is None else VoterSet.from_record(record)
    history: list[tuple[int, VoterSet]] = []
    if start is not None and record is not None:
        # A snapshot's set was in the log below it (the snapshot replaced those records): a
        # leader must not write it again as if only the bootstrap snapshot held it.
        history.append((start - 1, base))
    for batch in storage.metadata.read(start):
        if not batch.is_control:
            continue
        for rec in batch.records():
            if parse_control_key(rec.key) == ControlType.KRAFT_VOTERS and rec.value is not None:
                history.append((rec.offset, VoterSet.from_record(
                    VotersRecord.decode(rec.value, 0))))
    return base, history


def snapshot_voters(storage: Any, raft: Any, offset: int) -> None:
    """Point the storage's control records (what a snapshot carries after its header) at
    kraft.version and the voter set in force at `offset`, which the log may have changed
    since the data dir was opened."""
    storage.kraft_version = raft.kraft_version
    storage.voters = raft.voters_at(offset).to_record()


# --- peers that come and go ---------------------------------------------------------------------
class DynamicPeers(Peers):
    """`Peers` whose addresses are asked of the core at each send (voters added, a leader
    learned from a fetch answer, bootstrap servers): a task per address, started on first
    use, replaced when the address changes."""

    def __init__(self, node_id: int, resolve: Callable[[int], tuple[str, int] | None], *,
                 request_timeout_ms: int, on_response: Any, on_failure: Any) -> None:
        super().__init__(node_id, {}, request_timeout_ms=request_timeout_ms,
                         on_response=on_response, on_failure=on_failure)
        self.resolve = resolve
        self._nursery: trio.Nursery | None = None

    def send(self, destination: int, correlation_id: int, request: Any) -> None:
        address = self.resolve(destination)
        if address is None or not address[0] or self._nursery is None:
            self.on_failure(destination, correlation_id)
            return
        if self.addresses.get(destination) != address:
            old = self._channels.get(destination)
            if old is not None:
                old[0].close()  # its task ends; a request it held fails by the core's timeout
            self.addresses[destination] = address
            self._channels[destination] = trio.open_memory_channel(64)
            self._nursery.start_soon(self._peer, destination)
        super().send(destination, correlation_id, request)

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await trio.sleep_forever()


async def kraft_version_range(host: str, port: int, timeout_s: float
                              ) -> tuple[int, tuple[int, int] | None]:
    """(error, the kraft.version range) a node's ApiVersions answer advertises; a failed
    connection is REQUEST_TIMED_OUT, a node without the feature (0, 0) as Kafka reads it."""
    from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest

    request = ApiVersionsRequest(client_software_name="kraftpy",
                                 client_software_version="1")
    response = await request_once((host, port), request, API_VERSIONS_VERSION, "raft-client",
                                  timeout_s)
    if response is None:
        log.info("ApiVersions to %s:%d failed", host, port)
        return REQUEST_TIMED_OUT, None
    if response.error_code != NONE:
        return response.error_code, None
    for feature in response.supported_features:
        if feature.name == "kraft.version":
            return NONE, (feature.min_version, feature.max_version)
    return NONE, (0, 0)


# --- the leader's handlers ----------------------------------------------------------------------
def _key(voter_id: int, directory: Any) -> ReplicaKey | None:
    """A request's voter: an id and a directory id (Kafka refuses either missing)."""
    if voter_id < 0 or directory is None or directory == ZERO_UUID:
        return None
    return ReplicaKey(voter_id, directory)


def _listeners(items: Any) -> tuple[tuple[str, str, int], ...]:
    return tuple((e.name, e.host, e.port) for e in items)


class VoterChanges:
    """AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter against one `RaftQuorum`, and the
    directories a quorum recovery of its data dir declared lost (`quorum_recovery.py`),
    which it hands to the core to refuse and never adds back."""

    def __init__(self, quorum: Any, timeout_ms: int) -> None:
        self.quorum = quorum
        self.timeout_s = timeout_ms / 1000
        self.pending = False  # Kafka's isOperationPending: an add or remove in progress
        self.declared_lost = _declared_lost(getattr(quorum.storage, "log_dir", None))
        if self.declared_lost:
            quorum.raft.declared_lost = self.declared_lost
            log.info("refusing the directories a quorum recovery declared lost: %s",
                     ", ".join(_show(k) for k in sorted(self.declared_lost,
                                                        key=lambda k: k.id)))

    # --- shared ---
    def _core(self, step: Callable[[Any, float], tuple[int, list[Any]]]) -> int:
        """Run a core decision and carry out its actions on the shell, in order."""
        q = self.quorum
        out = [REQUEST_TIMED_OUT]

        def go() -> None:
            out[0], actions = step(q.raft, q.clock_ms())
            q._do(actions)

        q._guard(go)
        return out[0]

    def _leader_error(self, cluster_id: str | None) -> int:
        q = self.quorum
        if cluster_id is not None and cluster_id != q.cluster_id:
            return INCONSISTENT_CLUSTER_ID
        if q._failed is not None or q._stopping or q.raft.voter_change_error() \
                == NOT_LEADER_OR_FOLLOWER:
            return NOT_LEADER_OR_FOLLOWER
        return NONE

    def _precheck_message(self, error: int, voter: ReplicaKey | None = None) -> str:
        raft = self.quorum.raft
        if error == UNSUPPORTED_VERSION:
            return ("Cluster doesn't support changing voters because the kraft.version "
                    f"feature is {raft.kraft_version}")
        if error == DUPLICATE_VOTER and voter is not None:
            return (f"The voter id for {_show(voter)} is already part of the set of voters "
                    f"{_keys(raft.voters)}.")
        if error == REQUEST_TIMED_OUT:
            if raft.state.high_watermark is None:
                return ("Request timed out waiting for leader to establish HWM and fence "
                        "previous voter changes")
            return ("Request timed out waiting for voters to commit the latest voter change "
                    f"at {raft.last_voters_offset} with HWM {raft.high_watermark}")
        return ""

    async def _committed(self, epoch: int) -> int:
        """Wait for the newest VotersRecord to commit in this leader's epoch."""
        q = self.quorum
        offset = q.raft.last_voters_offset
        with trio.move_on_after(self.timeout_s):
            while q.raft.epoch == epoch and q.raft.state.leader_id == q.node_id \
                    and q._failed is None:
                if q.hwm[0] > offset:
                    return NONE
                with trio.move_on_after(0.05):
                    await q.wait_for_high_watermark(offset)
            return NOT_LEADER_OR_FOLLOWER
        return REQUEST_TIMED_OUT

    # --- AddRaftVoter ---
    async def add(self, request: Any) -> AddRaftVoterResponse:
        q = self.quorum
        error = self._leader_error(request.cluster_id)
        if error == INCONSISTENT_CLUSTER_ID:
            return _add(error, f'The given id "{request.cluster_id}" doesn\'t match the '
                        f'cluster id "{q.cluster_id}"')
        if error:
            return _add(error, None)
        key = _key(request.voter_id, request.voter_directory_id)
        if key is None:
            return _add(INVALID_REQUEST, "Add voter request didn't include a valid voter")
        if key in self.declared_lost:
            return _add(INVALID_REQUEST, f"{_show(key)} was declared lost by a quorum recovery "
                        f"of this controller's data dir; format a new directory for controller "
                        f"{key.id} and add that")
        node = VoterNode(key, _listeners(request.listeners))
        endpoint = node.endpoint(q.raft.listener)
        if endpoint is None:
            return _add(INVALID_REQUEST, "Add voter request didn't include the endpoint "
                        f"for the default listener {q.raft.listener}")
        if self.pending:
            return _add(REQUEST_TIMED_OUT, "Request timed out waiting for leader to handle "
                        "previous voter change request")
        error = q.raft.voter_change_error(key.id)
        if error:
            return _add(error, self._precheck_message(error, key))
        self.pending = True
        try:
            return await self._add(node, endpoint)
        finally:
            self.pending = False

    async def _add(self, node: VoterNode, endpoint: tuple[str, int]) -> AddRaftVoterResponse:
        q = self.quorum
        epoch = q.raft.epoch
        error, versions = await kraft_version_range(*endpoint, self.timeout_s)
        if error:
            return _add(REQUEST_TIMED_OUT, "Aborted add voter operation for since "
                        f"API_VERSIONS returned an error {error}")
        if q.raft.epoch != epoch:
            return _add(NOT_LEADER_OR_FOLLOWER, None)
        assert versions is not None
        node = VoterNode(node.key, node.listeners, versions)
        error = self._core(lambda raft, now: raft.add_voter(node, now))
        if error == INVALID_REQUEST:
            return _add(error, f"Aborted add voter operation for {_show(node.key)} since the "
                        f"kraft.version range (min: {versions[0]}, max: {versions[1]} doesn't "
                        f"support the finalized version {q.raft.kraft_version}")
        if error == REQUEST_TIMED_OUT and q.raft.voter_change_error(node.key.id) == NONE:
            return _add(error, f"Aborted add voter operation for {_show(node.key)} since it "
                        "is lagging behind")
        if error:
            return _add(error, self._precheck_message(error, node.key) or None)
        log.info("adding voter %s at offset %d", _show(node.key), q.raft.last_voters_offset)
        error = await self._committed(epoch)
        if error == REQUEST_TIMED_OUT:
            return _add(error, f"Timed out waiting for the addition of {_show(node.key)} to "
                        "commit")
        return _add(error, None)

    # --- RemoveRaftVoter ---
    async def remove(self, request: Any) -> RemoveRaftVoterResponse:
        q = self.quorum
        error = self._leader_error(request.cluster_id)
        if error == INCONSISTENT_CLUSTER_ID:
            return _remove(error, f'The given id "{request.cluster_id}" doesn\'t match the '
                           f'cluster id "{q.cluster_id}"')
        if error:
            return _remove(error, None)
        key = _key(request.voter_id, request.voter_directory_id)
        if key is None:
            return _remove(INVALID_REQUEST, "Remove voter request didn't include a valid voter")
        if self.pending:
            return _remove(REQUEST_TIMED_OUT, "Request timed out waiting for leader to handle "
                           "previous voter change request")
        error = q.raft.voter_change_error()
        if error:
            return _remove(error, self._precheck_message(error))
        epoch = q.raft.epoch
        voters = q.raft.voters
        error = self._core(lambda raft, now: raft.remove_voter(key, now))
        if error == VOTER_NOT_FOUND:
            return _remove(error, f"Cannot remove voter {_show(key)} from the set of voters "
                           f"{_keys(voters)}")
        if error:
            return _remove(error, self._precheck_message(error) or None)
        log.info("removing voter %s at offset %d", _show(key), q.raft.last_voters_offset)
        self.pending = True
        try:
            error = await self._committed(epoch)
        finally:
            self.pending = False
        return _remove(error, None)

    # --- UpdateRaftVoter ---
    def update(self, request: Any) -> UpdateRaftVoterResponse:
        q = self.quorum
        error = self._leader_error(request.cluster_id)
        if error == NONE and request.current_leader_epoch != q.raft.epoch:
            error = (74 if request.current_leader_epoch < q.raft.epoch  # FENCED_LEADER_EPOCH
                     else 75)  # UNKNOWN_LEADER_EPOCH
        if error:
            return self._update_answer(error)
        key = _key(request.voter_id, request.voter_directory_id)
        listeners = _listeners(request.listeners)
        low = request.k_raft_version_feature.min_supported_version
        high = request.k_raft_version_feature.max_supported_version
        if key is None or not any(name == q.raft.listener for name, _, _ in listeners) \
                or low < 0 or high < 0 or high < low:
            return self._update_answer(INVALID_REQUEST)
        if self.pending:
            return self._update_answer(REQUEST_TIMED_OUT)
        node = VoterNode(key, listeners, (low, high))
        return self._update_answer(self._core(lambda raft, now: raft.update_voter(node, now)))

    def _update_answer(self, error: int) -> UpdateRaftVoterResponse:
        raft = self.quorum.raft
        leader = raft.state.leader_id
        endpoint = raft.endpoint_of(leader) if leader is not None else None
        return UpdateRaftVoterResponse(error_code=error, current_leader=CurrentLeader(
            leader_id=-1 if leader is None else leader, leader_epoch=raft.epoch,
            host=endpoint[0] if endpoint else "", port=endpoint[1] if endpoint else -1))


def _declared_lost(log_dir: Any) -> frozenset[ReplicaKey]:
    """quorum-recovery.json's lost directories (none without a data dir or the file); a file
    that cannot be read refuses the start (exit 2), as refusing nothing could be unsafe."""
    from kraftpy.controller.raft.quorum_recovery import RecoveryFileError, declared_lost
    from kraftpy.controller.raft.shell import RaftShellError

    if log_dir is None:
        return frozenset()
    try:
        return declared_lost(log_dir)
    except RecoveryFileError as exc:
        raise RaftShellError(str(exc), 2) from None


def _add(error: int, message: str | None) -> AddRaftVoterResponse:
    return AddRaftVoterResponse(error_code=error, error_message=message)


def _remove(error: int, message: str | None) -> RemoveRaftVoterResponse:
    return RemoveRaftVoterResponse(error_code=error, error_message=message)


def _show(key: ReplicaKey) -> str:
    directory = "<undefined>" if key.directory_id is None else kafka_uuid_str(key.directory_id)
    return f"ReplicaKey(id={key.id}, directoryId={directory})"


def _keys(voters: VoterSet) -> str:
    return "[" + ", ".join(_show(n.key) for n in voters.voters.values()) + "]"
