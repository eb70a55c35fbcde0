"""DescribeQuorum from the Raft core: the leader's replica states, as Kafka's LeaderState keeps
them (caught-up times, observers and their session timeout), NOT_LEADER_OR_FOLLOWER on any
other node, UNKNOWN_TOPIC_OR_PARTITION for anything but __cluster_metadata-0, and the answer
through the wire codecs at v0-2."""

from __future__ import annotations

import uuid

import pytest
from kraftpy.controller.raft import actions as a
from kraftpy.controller.raft import messages as m
from kraftpy.controller.raft.describe import OBSERVER_SESSION_TIMEOUT_MS
from kraftpy.controller.raft.quorum_state import ElectionState
from kraftpy.controller.raft.voters import ReplicaKey
from kraftpy.protocol.messages.describe_quorum_request import (
    DescribeQuorumRequest,
    PartitionData,
    TopicData,
)
from kraftpy.protocol.messages.describe_quorum_response import DescribeQuorumResponse
from raft.test_core import _leader_of_three, node

ZERO = uuid.UUID(int=0)


def request(topic: str = "__cluster_metadata", partitions: tuple[int, ...] = (0,)
            ) -> DescribeQuorumRequest:
    return DescribeQuorumRequest(topics=[TopicData(topic_name=topic, partitions=[
        PartitionData(partition_index=p) for p in partitions])])


def fetch(replica: int, offset: int, directory: uuid.UUID | None = None):
    return m.fetch_request("MkU3OEVBNTcwNTJENDM2Qg", ReplicaKey(replica, directory), 1, offset,
                           1 if offset else 0, -1, 0, 1 << 20)


def partition(response: DescribeQuorumResponse):
    (topic,) = response.topics
    (part,) = topic.partitions
    return part


def test_the_leader_reports_every_voter_from_its_fetches() -> None:
    n = _leader_of_three()  # epoch 1, the LeaderChange batch at offset 0 appended
    n.on_flushed(1, 2004)
    n.handle_request("f2", fetch(2, 1), 17, 2005)  # voter 2 caught up: commits offset 1
    n.handle_request("f3", fetch(3, 0), 17, 2006)  # voter 3 behind
    part = partition(n.describe_quorum(request(), 1, 2100))
    assert (part.error_code, part.leader_id, part.leader_epoch, part.high_watermark) \
        == (0, 1, 1, 1)
    got = [(r.replica_id, r.log_end_offset, r.last_fetch_timestamp, r.last_caught_up_timestamp)
           for r in part.current_voters]
    # the leader: its flushed end, fetched and caught up "now"; 3 never reached the end
    assert got == [(1, 1, 2100, 2100), (2, 1, 2005, 2005), (3, 0, 2006, -1)]
    assert part.observers == []


def test_caught_up_as_of_the_previous_fetch_when_it_reaches_the_end_of_then() -> None:
    n = _leader_of_three()
    n.on_flushed(1, 2004)
    n.handle_request("f2", fetch(2, 1), 17, 2005)
    n.append([b"a"], 2010)
    n.poll(2040)
    n.on_flushed(2, 2041)  # the leader's end is 2
    n.handle_request("f3", fetch(3, 1), 17, 2050)  # behind: the leader was at 2
    n.append([b"b"], 2060)
    n.poll(2090)
    n.on_flushed(3, 2091)  # the leader moves on to 3
    n.handle_request("f3", fetch(3, 2), 17, 2100)  # reaches 2: caught up as of 2050
    voters = {r.replica_id: r for r in partition(n.describe_quorum(request(), 2, 2200))
              .current_voters}
    assert (voters[3].log_end_offset, voters[3].last_fetch_timestamp,
            voters[3].last_caught_up_timestamp) == (2, 2100, 2050)


def test_observers_are_shown_until_their_session_times_out() -> None:
    n = _leader_of_three()
    n.on_flushed(1, 2004)
    broker = uuid.UUID(int=77)
    n.handle_request("b", fetch(100, 1, broker), 17, 2005)
    response = n.describe_quorum(request(), 2, 2010)
    (observer,) = partition(response).observers
    assert (observer.replica_id, observer.replica_directory_id, observer.log_end_offset,
            observer.last_fetch_timestamp, observer.last_caught_up_timestamp) \
        == (100, broker, 1, 2005, 2005)
    # v2: the voters' listeners from the voter set; no directory ids in a static set
    assert [(nd.node_id, [(x.name, x.host, x.port) for x in nd.listeners])
            for nd in response.nodes] == [(i, [("CONTROLLER", f"n{i}", 9093)])
                                          for i in (1, 2, 3)]
    assert {r.replica_directory_id for r in partition(response).current_voters} == {ZERO}
    n.handle_request("f2", fetch(2, 1), 17, 2005 + OBSERVER_SESSION_TIMEOUT_MS)
    later = partition(n.describe_quorum(request(), 2, 2005 + OBSERVER_SESSION_TIMEOUT_MS))
    assert later.observers == []


def test_only_the_leader_answers_and_only_for_the_metadata_partition() -> None:
    follower = node(2, election=ElectionState(epoch=1, leader_id=1))
    part = partition(follower.describe_quorum(request(), 2, 10))
    assert (part.error_code, part.leader_id, part.current_voters) == (6, 0, [])
    assert part.error_message.startswith("For requests intended only for the leader")
    n = _leader_of_three()
    wrong = n.describe_quorum(request("other", (0, 1)), 2, 10)
    assert [(t.topic_name, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in wrong.topics] == [("other", [(0, 3), (1, 3)])]
    assert partition(n.describe_quorum(request(partitions=(1,)), 2, 10)).error_code == 3
    n.resign(20)
    assert partition(n.describe_quorum(request(), 2, 21)).error_code == 6  # Resigned


@pytest.mark.parametrize("version", [0, 1, 2])
def test_the_answer_encodes_at_every_version(version: int) -> None:
    n = _leader_of_three()
    n.on_flushed(1, 2004)
    n.handle_request("f2", fetch(2, 1), 17, 2005)
    response = n.describe_quorum(request(), version, 2100)
    decoded = DescribeQuorumResponse.decode(response.encode(version), version)
    part = partition(decoded)
    assert [r.log_end_offset for r in part.current_voters] == [1, 1, -1]
    assert (len(decoded.nodes) == 3) is (version >= 2)
    if version == 0:  # the timestamps are v1+
        assert part.current_voters[1].last_fetch_timestamp == -1


def test_a_leader_answers_before_its_epoch_commits() -> None:
    n = _leader_of_three()
    part = partition(n.describe_quorum(request(), 1, 2003))
    assert (part.error_code, part.leader_id, part.high_watermark) == (0, 1, -1)
    assert [r.log_end_offset for r in part.current_voters] == [1, -1, -1]  # its LeaderChange
    assert not any(isinstance(x, a.Respond) for x in n._take())


def test_a_follower_never_shows_ahead_of_the_leader() -> None:
    """Ours flushes behind its appends: a follower may fetch what the leader has not flushed
    yet, and the leader's row must still be at least as far (the tool's lag never negative)."""
    n = _leader_of_three()
    n.on_flushed(1, 2004)
    n.append([b"a", b"b"], 2010)
    n.poll(2040)  # appended to 3, flush outstanding
    n.handle_request("f2", fetch(2, 3), 17, 2050)
    voters = partition(n.describe_quorum(request(), 2, 2060)).current_voters
    assert [(r.replica_id, r.log_end_offset) for r in voters][:2] == [(1, 3), (2, 3)]
    assert voters[1].last_caught_up_timestamp == 2050
