"""The Raft core case by case: quorum-state bytes, settings, votes, restarts, the high
watermark rule, divergence, voter changes, and its messages through the wire codecs."""

from __future__ import annotations

import random
import uuid

import pytest
from kraftpy.controller.raft import actions as a
from kraftpy.controller.raft import messages as m
from kraftpy.controller.raft.config import RaftConfig, RaftConfigError
from kraftpy.controller.raft.core import NotLeaderError, RaftNode
from kraftpy.controller.raft.log_state import RaftLog
from kraftpy.controller.raft.quorum_state import ElectionState, QuorumStateError, decode
from kraftpy.controller.raft.roles import Role
from kraftpy.controller.raft.voters import ReplicaKey, VoterNode, VoterSet
from kraftpy.protocol.messages.voters_record import VotersRecord
from kraftpy.protocol.record_batch import build_record_batch
from support.paths import reference

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
VOTERS = VoterSet.static({1: ("n1", 9093), 2: ("n2", 9093), 3: ("n3", 9093)})


def node(node_id: int = 1, *, voters: VoterSet = VOTERS, log: RaftLog | None = None,
         election: ElectionState | None = None, kraft_version: int = 0,
         now: float = 0) -> RaftNode:
    return RaftNode(config=RaftConfig(), node_id=node_id, directory_id=uuid.UUID(int=node_id),
                    cluster_id=CLUSTER, voters=voters, log=log or RaftLog(),
                    election=election, now_ms=now, rng=random.Random(node_id),
                    kraft_version=kraft_version,
                    endpoints=(("CONTROLLER", f"n{node_id}", 9093),))


def of(actions: list, kind: type) -> list:
    return [x for x in actions if isinstance(x, kind)]


def vote(candidate: int, epoch: int, *, pre: bool = False, last_epoch: int = 0,
         last_offset: int = 0, voter: int = 1):
    return m.vote_request(CLUSTER, epoch, ReplicaKey(candidate, uuid.UUID(int=candidate)),
                          ReplicaKey(voter), last_epoch, last_offset, pre)


def answer(actions: list):
    (respond,) = of(actions, a.Respond)
    return respond.response.topics[0].partitions[0]


# --- quorum-state ------------------------------------------------------------------------
def test_quorum_state_v1_reads_and_writes_kafkas_bytes() -> None:
    line = (b'{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":'
            b'"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}')
    state = decode(line)
    assert (state.epoch, state.leader_id, state.voted_id) == (2, None, 1)
    assert state.encode(1) == line


def test_quorum_state_v0_is_byte_for_byte_kafkas() -> None:
    files = sorted(reference("real-metadata-logs").glob("*/data/__cluster_metadata-0/"
                                                        "quorum-state"))
    assert files
    for path in files:
        data = path.read_bytes()
        assert decode(data).encode(0) == data.rstrip(b"\n")


@pytest.mark.parametrize("data, message", [
    (b"", "not one line of JSON"), (b"[1]", "not a JSON object"),
    (b'{"leaderId":1}', "no integer data_version"),
    (b'{"data_version":2}', "not within the min (0) and max (1)"),
    (b'{"leaderId":1,"leaderEpoch":1,"votedId":-1,"data_version":1}',
     "'votedDirectoryId' is mandatory"),
    (b'{"leaderId":"x","leaderEpoch":1,"votedId":-1,"votedDirectoryId":'
     b'"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}', "leaderId 'x' is not an int32"),
    (b'\xff', "not one line of JSON"),
])
def test_bad_quorum_state_is_a_clear_error(data: bytes, message: str) -> None:
    with pytest.raises(QuorumStateError, match=message.replace("(", r"\(").replace(")", r"\)")):
        decode(data)


def test_settings_are_kafkas_with_its_defaults() -> None:
    config = RaftConfig.from_properties({"controller.quorum.append.linger.ms": "0"})
    assert (config.election_timeout_ms, config.fetch_timeout_ms, config.append_linger_ms,
            config.election_backoff_max_ms, config.request_timeout_ms) == (1000, 2000, 0,
                                                                            1000, 2000)
    with pytest.raises(RaftConfigError, match="controller.quorum.fetch.timeout.ms"):
        RaftConfig.from_properties({"controller.quorum.fetch.timeout.ms": "2s"})
    with pytest.raises(RaftConfigError, match="outside"):
        RaftConfig.from_properties({"controller.quorum.election.timeout.ms": "-1"})


# --- votes -------------------------------------------------------------------------------
def test_one_vote_per_epoch_persisted_before_the_answer_and_kept_across_a_restart() -> None:
    n = node(1)
    n._take()
    actions = n.handle_request("t", vote(2, 1), 2, 10)
    # epoch 1 seen (unattached), then the vote: both on disk before the answer
    assert [type(x) for x in actions] == [a.WriteQuorumState, a.LeaderChanged,
                                          a.WriteQuorumState, a.Respond]
    assert answer(actions).vote_granted
    written = of(actions, a.WriteQuorumState)[-1].data
    assert decode(written).voted_id == 2
    assert not answer(n.handle_request("t", vote(3, 1), 2, 20)).vote_granted
    restarted = node(1, election=decode(written), now=30)
    assert restarted.role is Role.UNATTACHED
    assert not answer(restarted.handle_request("t", vote(3, 1), 2, 40)).vote_granted
    assert answer(restarted.handle_request("t", vote(2, 1), 2, 50)).vote_granted


def test_a_pre_vote_is_granted_without_a_write_and_changes_no_vote() -> None:
    n = node(1)
    n._take()
    actions = n.handle_request("t", vote(2, 0, pre=True), 2, 10)
    assert of(actions, a.WriteQuorumState) == [] and answer(actions).vote_granted
    assert answer(n.handle_request("t", vote(3, 1), 2, 20)).vote_granted


def test_votes_go_only_to_logs_at_least_as_long() -> None:
    log = RaftLog(end_offset=5, flushed_offset=5, epochs=[(1, 0)])
    n = node(1, log=log, election=ElectionState(epoch=1))
    assert not answer(n.handle_request("t", vote(2, 2, last_epoch=1, last_offset=4), 2,
                                       0)).vote_granted
    assert answer(n.handle_request("t", vote(3, 2, last_epoch=1, last_offset=5), 2,
                                   0)).vote_granted


def test_vote_errors() -> None:
    n = node(1, election=ElectionState(epoch=5))
    assert answer(n.handle_request("t", vote(2, 4), 2, 0)).error_code == 74  # FENCED
    assert answer(n.handle_request("t", vote(2, 6, last_epoch=6), 2, 0)).error_code == 42
    assert answer(n.handle_request("t", vote(2, 6, voter=9), 2, 0)).error_code == 125
    bad_cluster = vote(2, 6)
    bad_cluster.cluster_id = "other"
    (respond,) = n.handle_request("t", bad_cluster, 2, 0)
    assert respond.response.error_code == 104 and respond.response.topics == []


# --- restarts and leadership ------------------------------------------------------------------
def test_a_leader_restarts_resigned_and_a_candidate_as_candidate() -> None:
    assert node(1, election=ElectionState(epoch=3, leader_id=1)).role is Role.RESIGNED
    assert node(1, election=ElectionState(epoch=3, voted_id=1)).role is Role.CANDIDATE
    assert node(1, election=ElectionState(epoch=3, leader_id=2)).role is Role.FOLLOWER
    # It stood, lost to 2 and followed it (its log may hold epoch 3's records): a follower
    # again, its vote kept, not a candidate of an epoch it knows the leader of (whose
    # VoteRequest, its last epoch not below the candidate epoch, every voter refuses).
    lost = node(1, election=ElectionState(epoch=3, leader_id=2, voted_id=1))
    assert lost.role is Role.FOLLOWER and lost.state.voted is not None
    assert lost.state.voted.id == 1
    observer = node(9, election=ElectionState(epoch=3, leader_id=2))
    assert observer.role is Role.OBSERVER and not observer.is_voter


def test_a_lone_voter_leads_and_commits_once_flushed() -> None:
    n = node(1, voters=VoterSet.static({1: ("n1", 9093)}))
    actions = n._take()
    assert n.role is Role.LEADER and n.epoch == 1
    (batch,) = of(actions, a.AppendBatch)
    assert batch.control and batch.base_offset == 0 and batch.epoch == 1
    assert of(actions, a.Committed) == []  # nothing is durable yet
    assert of(n.on_flushed(1, 5), a.Committed) == [a.Committed(1)]
    assert n.append([b"x", b"y"], 10) == 1
    (batch,) = of(n.poll(35), a.AppendBatch)  # after append.linger.ms
    assert batch.records == ((None, b"x"), (None, b"y"))
    assert of(n.on_flushed(3, 36), a.Committed) == [a.Committed(3)]
    with pytest.raises(NotLeaderError):
        node(2).append([b"z"], 0)


def test_an_idle_lone_leader_sleeps_until_its_next_timer() -> None:
    # No voter fetches from a lone leader, so its check-quorum deadline is never renewed; it
    # must not count as a timer, or the shell's poll loop wakes at once, forever.
    n = node(1, voters=VoterSet.static({1: ("n1", 9093)}))
    n._take()
    n.on_flushed(1, 5)
    n.poll(60_000)
    assert n.role is Role.LEADER
    assert n.next_deadline() > 60_000


def _leader_of_three() -> RaftNode:
    n = node(1)
    n._take()
    sends = of(n.poll(2000), a.Send)  # election timeout: Prospective, pre-votes out
    assert all(s.request.topics[0].partitions[0].pre_vote for s in sends)
    granted = m.vote_response(0, 0, -1, True, None)
    for send in sends:
        n.handle_response(send.destination, send.correlation_id, granted, 2001)
    vote_sends = of(n.poll(2002), a.Send)
    for send in vote_sends:
        n.handle_response(send.destination, send.correlation_id,
                          m.vote_response(0, 1, -1, True, None), 2003)
    assert n.role is Role.LEADER
    return n


def fetch(replica: int, offset: int, epoch: int = 1, last_epoch: int = 1, wait: int = 0):
    return m.fetch_request(CLUSTER, ReplicaKey(replica), epoch, offset, last_epoch, -1, wait,
                           1 << 20)


def test_the_high_watermark_needs_a_majority_and_the_epoch_start() -> None:
    n = _leader_of_three()
    n.on_flushed(1, 2004)  # the LeaderChange record, on the leader's disk only
    assert n.high_watermark == 0
    actions = n.handle_request("f2", fetch(2, 1), 17, 2005)
    assert of(actions, a.Committed) == [a.Committed(1)]
    (respond,) = of(actions, a.Respond)
    assert respond.read_from == 1 and respond.response.responses[0].partitions[0] \
        .high_watermark == 1
    # a fetch at offset 0 from a voter does not move it back, nor past what a majority has
    n.append([b"a"], 2010)
    n.poll(2040)
    n.on_flushed(2, 2041)
    assert n.high_watermark == 1


def test_a_new_leader_holds_back_the_old_epochs_records() -> None:
    log = RaftLog(end_offset=4, flushed_offset=4, epochs=[(1, 0)])
    n = node(1, log=log, election=ElectionState(epoch=1, leader_id=2))
    n._take()
    n._to_prospective()
    n._to_candidate()
    n.state.votes.record(2, True)
    n._to_leader()
    assert n.state.epoch_start_offset == 4
    # a follower has the old epoch's records (4): not enough, nothing of epoch 2 is there
    n.handle_request("f2", fetch(2, 4, epoch=2, last_epoch=1), 17, 10)
    assert n.high_watermark == 0
    n.on_flushed(5, 11)
    actions = n.handle_request("f2", fetch(2, 5, epoch=2, last_epoch=2), 17, 12)
    assert of(actions, a.Committed) == [a.Committed(5)]


def test_a_follower_truncates_on_a_diverging_epoch() -> None:
    log = RaftLog(end_offset=6, flushed_offset=6, epochs=[(1, 0), (2, 4)])
    n = node(2, log=log, election=ElectionState(epoch=3, leader_id=1))
    n._take()
    (send,) = of(n.poll(1), a.Send)
    assert send.request.topics[0].partitions[0].fetch_offset == 6
    response = m.fetch_response(error=0, epoch=3, leader_id=1, high_watermark=3,
                                log_start_offset=0, leader=None, diverging=(1, 4))
    actions = n.handle_response(1, send.correlation_id, response, 2)
    assert of(actions, a.Truncate) == [a.Truncate(4)]
    assert n.log.end_offset == 4 and n.log.epochs == [(1, 0)]
    records = build_record_batch([b"r"], base_offset=4, partition_leader_epoch=3)
    (send,) = of(n.poll(3), a.Send)
    response = m.fetch_response(error=0, epoch=3, leader_id=1, high_watermark=5,
                                log_start_offset=0, leader=None)
    response.responses[0].partitions[0].records = records
    actions = n.handle_response(1, send.correlation_id, response, 4)
    assert [type(x) for x in actions] == [a.AppendFetched, a.Flush, a.Committed]
    assert of(actions, a.Committed) == [a.Committed(5)] and n.log.epochs[-1] == (3, 4)
    assert of(n.poll(5), a.Send) == []  # no next fetch until the fetched batch is on disk
    assert of(n.on_flushed(5, 6), a.Send)


def test_a_late_fetch_answer_naming_the_snapshot_just_installed_changes_nothing() -> None:
    """A Fetch sent before a download ended can be answered after the snapshot it names is
    installed: the follower goes on fetching from it (Kafka: the snapshot exists, so nothing
    is fetched), not installing it again (that once stopped a follower's quorum)."""
    n = node(2, election=ElectionState(epoch=3, leader_id=1))
    n._take()
    (first,) = of(n.poll(1), a.Send)
    (second,) = of(n.poll(2), a.Send) or [None]  # a second fetch in flight, if the core sends it
    answer_ = m.fetch_response(error=0, epoch=3, leader_id=1, high_watermark=50,
                               log_start_offset=40, leader=None, snapshot=(40, 2))
    n.handle_response(1, first.correlation_id, answer_, 3)
    (fetch_snapshot,) = of(n.poll(4), a.Send)
    chunk = m.fetch_snapshot_response(error=0, epoch=3, leader_id=1, leader=None,
                                      snapshot_id=(40, 2), position=0)
    chunk.topics[0].partitions[0].size = 5
    chunk.topics[0].partitions[0].unaligned_records = b"12345"
    actions = n.handle_response(1, fetch_snapshot.correlation_id, chunk, 5)
    assert of(actions, a.InstallSnapshot) == [a.InstallSnapshot((40, 2))]
    assert n.log.start_offset == n.log.end_offset == 40
    (fetch,) = of(n.poll(6), a.Send)
    assert fetch.request.topics[0].partitions[0].fetch_offset == 40
    late = m.fetch_response(error=0, epoch=3, leader_id=1, high_watermark=50,
                            log_start_offset=40, leader=None, snapshot=(40, 2))
    actions = n.handle_response(1, (second or fetch).correlation_id, late, 7)
    assert of(actions, a.InstallSnapshot) == [] and of(actions, a.WriteSnapshotChunk) == []
    assert n.state.fetching_snapshot is None and n.log.end_offset == 40


def test_graceful_resignation_sends_end_quorum_epoch_best_successor_first() -> None:
    n = _leader_of_three()
    n.on_flushed(1, 2004)
    n.handle_request("f3", fetch(3, 1), 17, 2005)
    n.resign(2006)
    sends = of(n.poll(2006), a.Send)
    assert n.role is Role.RESIGNED and {s.destination for s in sends} == {2, 3}
    part = sends[0].request.topics[0].partitions[0]
    assert part.preferred_successors == [3, 2]
    follower = node(2, election=ElectionState(epoch=1, leader_id=1))
    follower.handle_request("e", sends[0].request, 1, 2010)
    # second of two successors: election.backoff.max.ms >> 1 (Kafka's strict exponential)
    assert follower.state.fetch_deadline == 2010 + 500


# --- KIP-853 ------------------------------------------------------------------------------
def _key(i: int) -> ReplicaKey:
    return ReplicaKey(i, uuid.UUID(int=i))


def _voter(i: int, versions: tuple[int, int] = (0, 1), listener: str = "CONTROLLER"
           ) -> VoterNode:
    return VoterNode(_key(i), ((listener, f"n{i}", 9093),), versions)


def _observer_fetch(n: RaftNode, i: int, offset: int, now: float) -> list:
    return n.handle_request(f"f{i}", m.fetch_request(CLUSTER, _key(i), n.epoch, offset, 1, -1,
                                                     0, 1 << 20), 17, now)


def _dynamic_leader() -> RaftNode:
    """A lone voter at kraft.version 1 whose epoch start (LeaderChange, KRaftVersion,
    Voters: offsets 0-2) is committed."""
    lone = node(1, voters=VoterSet.of([_voter(1)]), kraft_version=1)
    (batch,) = of(lone._take(), a.AppendBatch)
    assert [k[2:4] for k, _ in batch.records] == [b"\x00\x02", b"\x00\x05", b"\x00\x06"]
    assert lone.last_voters_offset == 2
    lone.on_flushed(3, 2)
    assert lone.high_watermark == 3
    return lone


def test_voter_changes_need_a_leader_with_a_high_watermark_then_kraft_version_1() -> None:
    follower = node(2, kraft_version=1)
    assert follower.remove_voter(ReplicaKey(3), 0)[0] == 6  # NOT_LEADER_OR_FOLLOWER
    n = _leader_of_three()
    assert n.remove_voter(ReplicaKey(3), 2004)[0] == 7  # no high watermark yet
    n.on_flushed(1, 2004)
    n.handle_request("f2", fetch(2, 1), 17, 2005)
    assert n.high_watermark == 1
    assert n.remove_voter(ReplicaKey(3), 2006)[0] == 35  # UNSUPPORTED_VERSION at kraft 0


def test_a_static_leader_keeps_a_voters_update_in_memory_as_kafka_does() -> None:
    """Kafka 4.1 followers send UpdateRaftVoter at kraft.version 0 too: the leader answers
    NONE and keeps the voter's range and endpoints as its volatile voters, writing nothing."""
    n = _leader_of_three()
    assert n.update_voter(_voter(3), 2004)[0] == 7  # REQUEST_TIMED_OUT: no high watermark
    n.on_flushed(1, 2004)
    n.handle_request("f2", fetch(2, 1), 17, 2005)
    error, actions = n.update_voter(_voter(3), 2006)  # a directory id: a static voter has none
    assert error == 0 and not of(actions, a.AppendBatch) and not n._pending
    assert n.volatile_voters[3].kraft_versions == (0, 1) and n.voters.ids == {1, 2, 3}
    assert n.update_voter(_voter(4), 2006)[0] == 127  # VOTER_NOT_FOUND
    assert n.update_voter(_voter(2, listener="OTHER"), 2006)[0] == 42  # no CONTROLLER
    assert n.update_voter(_voter(2, (1, 1)), 2006)[0] == 42  # kraft.version 0 unsupported
    assert node(2).update_voter(_voter(3), 0)[0] == 6  # NOT_LEADER_OR_FOLLOWER


def test_remove_voter_needs_exactly_that_voter_and_never_the_last() -> None:
    lone = _dynamic_leader()
    assert lone.remove_voter(ReplicaKey(2), 3)[0] == 127  # VOTER_NOT_FOUND
    assert lone.remove_voter(ReplicaKey(1, uuid.UUID(int=9)), 3)[0] == 127  # other directory
    assert lone.remove_voter(_key(1), 3)[0] == 127  # the last voter stays


def test_add_voter_waits_for_a_caught_up_observer_and_checks_its_kraft_versions() -> None:
    lone = _dynamic_leader()
    assert lone.voter_change_error(1) == 126  # DUPLICATE_VOTER
    assert lone.add_voter(_voter(1), 4)[0] == 126
    assert lone.add_voter(_voter(2), 4)[0] == 7  # never fetched: not caught up
    _observer_fetch(lone, 2, 1, 5)  # fetched, but behind the high watermark (3)
    assert lone.add_voter(_voter(2), 6)[0] == 7
    _observer_fetch(lone, 2, 3, 7)
    assert lone.add_voter(_voter(2, (0, 0)), 8)[0] == 42  # INVALID_REQUEST: no kraft.version 1
    assert lone.add_voter(_voter(2), 7 + 3_600_000)[0] == 7  # last fetch over an hour ago
    error, _ = lone.add_voter(_voter(2), 9)
    assert error == 0 and lone.voters.ids == {1, 2} and lone.last_voters_offset == 3
    assert lone.voters_at(3).ids == {1} and lone.voters_at(4).ids == {1, 2}  # snapshots
    (batch,) = of(lone.poll(10), a.AppendBatch)
    assert batch.control and VoterSet.from_record(
        VotersRecord.decode(batch.records[0][1], 0)).ids == {1, 2}


def test_one_voter_change_at_a_time_and_it_commits_by_the_new_majority() -> None:
    lone = _dynamic_leader()
    _observer_fetch(lone, 2, 3, 5)
    assert lone.add_voter(_voter(2), 6)[0] == 0
    lone.poll(7)
    lone.on_flushed(4, 8)
    assert lone.high_watermark == 3  # {1, 2} votes now: the leader alone is no majority
    assert lone.voter_change_error() == 7  # the last change is not committed
    assert lone.remove_voter(_key(2), 9)[0] == 7
    _observer_fetch(lone, 2, 4, 10)
    assert lone.high_watermark == 4 and lone.voter_change_error() == 0


def test_a_leader_that_removed_itself_resigns_once_that_is_committed() -> None:
    lone = _dynamic_leader()
    _observer_fetch(lone, 2, 3, 5)
    lone.add_voter(_voter(2), 6)
    lone.poll(7)
    lone.on_flushed(4, 8)
    _observer_fetch(lone, 2, 4, 9)
    assert lone.remove_voter(_key(1), 10)[0] == 0
    assert lone.voters.ids == {2} and lone.role is Role.LEADER
    lone.poll(11)
    lone.on_flushed(5, 12)
    assert lone.role is Role.LEADER  # not committed: voter 2 has not fetched it
    _observer_fetch(lone, 2, 5, 13)
    actions = lone.poll(14)
    assert lone.role is Role.RESIGNED
    assert [s.destination for s in of(actions, a.Send)] == [2]  # EndQuorumEpoch to voter 2


def test_update_voter_checks_versions_listener_and_key() -> None:
    lone = _dynamic_leader()
    assert lone.update_voter(_voter(1, (0, 0)), 4)[0] == 42  # kraft.version 1 unsupported
    assert lone.update_voter(_voter(1, listener="OTHER"), 4)[0] == 42  # no CONTROLLER
    assert lone.update_voter(_voter(2), 4)[0] == 127  # not a voter
    assert lone.update_voter(VoterNode(ReplicaKey(1, uuid.UUID(int=7)),
                                       (("CONTROLLER", "n1", 9093),)), 4)[0] == 127
    moved = VoterNode(_key(1), (("CONTROLLER", "moved", 9094),))
    assert lone.update_voter(moved, 4)[0] == 0
    assert lone.voters.voters[1].endpoint("CONTROLLER") == ("moved", 9094)
    assert lone.last_voters_offset == 3


def test_an_observer_finds_the_leader_through_the_bootstrap_servers() -> None:
    observer = RaftNode(config=RaftConfig(), node_id=4, directory_id=uuid.UUID(int=4),
                        cluster_id=CLUSTER, voters=VoterSet(), log=RaftLog(), election=None,
                        now_ms=0, rng=random.Random(4), kraft_version=0,
                        endpoints=(("CONTROLLER", "n4", 9093),), bootstrap={-2: ("n1", 9093)})
    assert observer.role is Role.OBSERVER
    (send,) = of(observer.poll(1), a.Send)
    assert send.destination == -2 and observer.endpoint_of(-2) == ("n1", 9093)
    leader = _dynamic_leader()
    actions = leader.handle_request("f", send.request, 17, 4)
    (respond,) = of(actions, a.Respond)
    records = build_record_batch([b"x"], base_offset=0, partition_leader_epoch=1)
    respond.response.responses[0].partitions[0].records = records
    observer.handle_response(-2, send.correlation_id, respond.response, 5)
    assert observer.leader_id == 1 and observer.endpoint_of(1) == ("n1", 9093)
    (send,) = of(observer.poll(6), a.Send)
    assert send.destination == 1  # fetches from the leader from now on


# --- the wire -----------------------------------------------------------------------------
@pytest.mark.parametrize("build, versions", [
    (lambda: vote(2, 3), range(0, 3)),
    (lambda: vote(2, 3, pre=True), range(2, 3)),  # older: UNSUPPORTED_VERSION to the core
    (lambda: m.vote_response(0, 3, 1, True, None), range(0, 3)),
    (lambda: m.begin_quorum_epoch_request(CLUSTER, 3, 1, (("CONTROLLER", "n1", 9093),),
                                          ReplicaKey(2)), range(0, 2)),
    (lambda: m.begin_quorum_epoch_response(0, 3, 1, None), range(0, 2)),
    (lambda: m.end_quorum_epoch_request(CLUSTER, 3, 1, [ReplicaKey(2)],
                                        (("CONTROLLER", "n1", 9093),)), range(0, 2)),
    (lambda: m.end_quorum_epoch_response(0, 3, 1, None), range(0, 2)),
    (lambda: fetch(2, 7), range(17, 19)),
    (lambda: m.fetch_snapshot_request(CLUSTER, ReplicaKey(2), 3, (10, 2), 0, 100),
     range(0, 2)),
])
def test_the_cores_requests_encode_at_kafkas_versions(build, versions) -> None:
    for version in versions:
        message = build()
        data = message.encode(version)
        again = type(message).decode(data, version)
        assert again.encode(version) == data


def test_answers_carry_node_endpoints_only_in_versions_that_have_them() -> None:
    """Every answer the core builds encodes at the version it was asked in."""
    for version in range(0, 3):
        n = node(2, election=ElectionState(epoch=3, leader_id=1))
        n._take()
        request = vote(3, 4, voter=2) if version else vote(3, 4, voter=-1)
        (respond,) = of(n.handle_request("t", request, version, 0), a.Respond)
        respond.response.encode(version)
        assert bool(respond.response.node_endpoints) is False or version >= 1
    n = node(2, election=ElectionState(epoch=3, leader_id=1))
    for version in (13, 16, 17, 18):  # CurrentLeader, which Raft answers with, is 12+
        (respond,) = of(n.handle_request("t", fetch(5, 0, epoch=3, last_epoch=0), version, 0),
                        a.Respond)
        response = respond.response
        assert response.responses[0].partitions[0].error_code == 6  # NOT_LEADER_OR_FOLLOWER
        assert bool(response.node_endpoints) == (version >= 17)
        response.encode(version)
