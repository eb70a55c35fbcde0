"""Raft metrics in a quorum of three kraftpy voters come from the Raft core: every voter names
the same leader and epoch and counts three voters; only the leader is the active controller;
after the leader is killed the others name the new one."""

from __future__ import annotations

import time
from pathlib import Path

from support.metrics_scrape import scrape, value
from support.server import free_port, quorum_leader, quorum_servers, start_quorum, stop_quorum

R = "kafka_server_raft_metrics_"
ACTIVE = "kafka_controller_kafkacontroller_activecontrollercount"


def _views(urls: dict[int, str], timeout: float = 20.0) -> dict[int, dict]:
    """Each running voter's scrape, once all name one leader of one epoch."""
    deadline = time.monotonic() + timeout
    while True:
        views = {i: scrape(url) for i, url in urls.items()}
        leaders = {value(m, R + "current_leader") for m in views.values()}
        epochs = {value(m, R + "current_epoch") for m in views.values()}
        if len(leaders) == 1 and len(epochs) == 1 and -1 not in leaders:
            return views
        assert time.monotonic() < deadline, (leaders, epochs)
        time.sleep(0.2)


def test_every_voter_reports_the_quorum_as_the_core_sees_it(tmp_path: Path) -> None:
    servers = quorum_servers(tmp_path)
    urls = {}
    for i, srv in enumerate(servers, start=1):
        port = free_port()
        with srv.config_path.open("a") as config:
            config.write(f"kraftpy.metrics.listener=http://127.0.0.1:{port}\n")
        urls[i] = f"http://127.0.0.1:{port}"
    try:
        start_quorum(servers)
        leader = quorum_leader(servers)
        leader_id = servers.index(leader) + 1
        views = _views(urls)
        for i, m in views.items():
            assert value(m, R + "current_leader") == leader_id
            assert value(m, R + "number_of_voters") == 3
            assert value(m, ACTIVE) == (1 if i == leader_id else 0)
        assert value(views[leader_id], R + "current_vote") == leader_id
        epoch = value(views[leader_id], R + "current_epoch")
        assert value(views[leader_id], R + "log_end_epoch") == epoch

        leader.kill()
        del urls[leader_id]
        new = quorum_leader(servers)
        new_id = servers.index(new) + 1
        views = _views(urls)
        for m in views.values():
            assert value(m, R + "current_leader") == new_id
            assert value(m, R + "current_epoch") > epoch
    finally:
        stop_quorum(servers)
