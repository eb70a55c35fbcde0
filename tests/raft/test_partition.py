"""A network partition between three `kraftpy serve` voters (`support/fault_proxy.py` on every
directed link).

The leader is cut off from both others: a write sent to it is never acknowledged as done (it
fails NOT_CONTROLLER once the leader gives up, or gets no answer); the two others elect a new
leader and commit; the old one stops leading. Healed, it rejoins as a follower of the new
epoch, truncates the suffix it could not commit, and catches up: every acknowledged block is
in every log, the three logs hold the same grants, none granted twice. A follower cut off
and healed disturbs nobody (KIP-996's pre-vote): the leader keeps its epoch. Every wait is
bounded.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

from kraftpy.tools.broker_sim import BrokerSim
from kraftpy.tools.kafka_connection import ClientError
from raft.test_quorum_processes import BROKER_ID, _grants
from support.fault_proxy import FaultProxy, quorum_through_proxy
from support.server import (
    HOST,
    KraftpyServer,
    quorum_leader,
    start_quorum,
    stop_quorum,
)
from support.server import describe_quorum as _describe

NOT_CONTROLLER = 41
NOT_LEADER_OR_FOLLOWER = 6
# check-quorum (1.5 x fetch.timeout.ms) for the old leader to give up, plus an election
GIVE_UP_S = 10.0


def _wait(what: str, check, timeout: float, servers: list[KraftpyServer]):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = check()
        except (ClientError, OSError):
            got = None
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout}s: {what}\n" + "\n".join(
        f"--- {s.root.name}\n{s.log_tail(25)}" for s in servers))


def test_an_isolated_leader_cannot_commit_and_rejoins_truncated(tmp_path: Path) -> None:
    proxy = FaultProxy()
    servers = quorum_through_proxy(tmp_path, proxy)
    acked: list[tuple[int, int]] = []
    try:
        start_quorum(servers)
        old = quorum_leader(servers, timeout=15)
        old_id = int(old.properties["node.id"])
        cluster_id = old.cluster_id()
        broker = BrokerSim((HOST, old.controller_port), BROKER_ID, cluster_id=cluster_id,
                           timeout=GIVE_UP_S + 5)
        epoch = broker.register()
        acked += [broker.allocate() for _ in range(3)]
        epoch_before = _describe(old).leader_epoch

        proxy.cut(*proxy.links_of(old_id))
        answers: list[object] = []

        def write_to_isolated() -> None:  # may wait until the old leader gives up
            try:
                answers.append(broker.allocate_response().error_code)
            except (ClientError, OSError) as exc:
                answers.append(exc)

        writer = threading.Thread(target=write_to_isolated, daemon=True)
        writer.start()
        others = [s for s in servers if s is not old]
        new = quorum_leader(others, timeout=GIVE_UP_S + 5)
        fresh = BrokerSim((HOST, new.controller_port), BROKER_ID, cluster_id=cluster_id,
                          timeout=5)
        fresh.epoch = epoch
        acked += [fresh.allocate() for _ in range(3)]
        writer.join(GIVE_UP_S + 10)
        assert answers and answers[0] != 0, f"the isolated leader acknowledged: {answers}"
        assert answers[0] == NOT_CONTROLLER or isinstance(answers[0], Exception), answers
        broker.close()
        # the old leader gave up: no longer leading, whatever it appended is uncommitted
        _wait("the isolated leader stops leading",
              lambda: _describe(old).error_code == NOT_LEADER_OR_FOLLOWER, GIVE_UP_S, servers)
        new_epoch = _describe(new).leader_epoch
        assert new_epoch > epoch_before

        proxy.heal(*proxy.links_of(old_id))
        acked.append(fresh.allocate())

        def rejoined() -> bool:
            part = _describe(new)
            ends = {r.replica_id: r.log_end_offset for r in part.current_voters}
            return (part.leader_epoch == new_epoch and len(set(ends.values())) == 1
                    and ends[old_id] >= part.high_watermark)

        _wait("the old leader caught up as a follower", rejoined, 20, servers)
        fresh.close()
        assert "truncating the metadata log to offset" in old.log_text(), old.log_tail(40)
        assert quorum_leader(servers, timeout=5) is new
    finally:
        stop_quorum(servers)
        proxy.close()
    grants = {srv.root.name: [(r.broker_id, r.broker_epoch, r.next_producer_id)
                              for r in _grants(srv)] for srv in servers}
    assert len({tuple(g) for g in grants.values()}) == 1, grants  # the same in every log
    for name, own in grants.items():
        ends = {end for b, _, end in own if b == BROKER_ID}
        missing = [(f, n) for f, n in acked if f + n not in ends]
        assert not missing, f"{name} lacks acknowledged blocks {missing}"
        assert len(own) == len(set(own)), f"{name} holds a grant twice"
    audit = subprocess.run(
        [sys.executable, "-m", "kraftpy.tools", "pid-audit",
         *(str(s.data_dir) for s in servers)], capture_output=True, text=True, timeout=120)
    assert audit.returncode == 0, audit.stdout[-3000:] + audit.stderr[-3000:]


def test_an_isolated_follower_does_not_disturb_the_leader(tmp_path: Path) -> None:
    """KIP-996: cut off, a follower asks only for pre-votes (no epoch is begun without a
    majority); healed, the pre-vote is refused by voters that hear from their leader, and it
    follows the same leader in the same epoch and catches up."""
    proxy = FaultProxy()
    servers = quorum_through_proxy(tmp_path, proxy)
    try:
        start_quorum(servers)
        leader = quorum_leader(servers, timeout=15)
        epoch = _describe(leader).leader_epoch
        follower = next(s for s in servers if s is not leader)
        follower_id = int(follower.properties["node.id"])
        broker = BrokerSim((HOST, leader.controller_port), BROKER_ID,
                           cluster_id=leader.cluster_id(), timeout=5)
        broker.register()
        proxy.cut(*proxy.links_of(follower_id))
        time.sleep(GIVE_UP_S / 2)  # past fetch.timeout.ms: the follower stands (pre-vote)
        blocks = [broker.allocate() for _ in range(3)]  # the leader commits with the other
        proxy.heal(*proxy.links_of(follower_id))

        def caught_up() -> bool:
            part = _describe(leader)
            ends = {r.replica_id: r.log_end_offset for r in part.current_voters}
            return ends[follower_id] >= part.high_watermark

        _wait("the follower caught up", caught_up, 20, servers)
        part = _describe(leader)
        assert (part.leader_id, part.leader_epoch) == (int(leader.properties["node.id"]),
                                                       epoch)
        assert _describe(follower).error_code == NOT_LEADER_OR_FOLLOWER
        broker.close()
    finally:
        stop_quorum(servers)
        proxy.close()
    ends = {r.next_producer_id for r in _grants(follower) if r.broker_id == BROKER_ID}
    assert all(f + n in ends for f, n in blocks)
