"""Brokers against a real kraftpy: register, heartbeat, unfence, blocks, fencing, stale epochs."""

from __future__ import annotations

import time
import uuid
from pathlib import Path

import pytest
from support.broker_sim import STALE_BROKER_EPOCH, BrokerError, BrokerSim
from support.server import KraftpyServer, running_server

DUPLICATE_BROKER_REGISTRATION = 101


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with running_server(tmp_path_factory.mktemp("brokers"),
                        {"broker.session.timeout.ms": "1500"}) as srv:
        yield srv


def broker(srv: KraftpyServer, broker_id: int) -> BrokerSim:
    return BrokerSim((srv.host, srv.controller_port), broker_id, srv.cluster_id())


def test_register_heartbeat_unfence_and_take_contiguous_disjoint_blocks(server) -> None:
    brokers = [broker(server, i) for i in (11, 12, 13)]
    for b in brokers:
        assert b.register() > 0
        r = b.heartbeat(offset=0)  # not caught up yet: stays fenced
        assert (r.error_code, r.is_fenced, r.is_caught_up) == (0, True, False)
        b.wait_unfenced()
    blocks = []
    for _ in range(4):
        for b in brokers:
            start, length = b.allocate()
            assert length == 1000
            blocks.append(start)
    starts = sorted(blocks)
    assert starts == list(range(starts[0], starts[0] + 1000 * len(starts), 1000))
    assert len(set(blocks)) == len(blocks)
    text = server.log_text()  # a line per state change and per block handed out
    assert "Broker 11 (epoch" in text and "FENCED -> UNFENCED" in text
    assert sum(f"to broker {b.broker_id} " in line for line in text.splitlines()
               for b in brokers) == 12


def test_a_silent_broker_is_fenced_and_an_old_epoch_is_stale(server) -> None:
    b = broker(server, 21)
    old = b.register()
    b.wait_unfenced()
    time.sleep(2.5)  # broker.session.timeout.ms is 1500
    sent = time.monotonic()
    r = b.heartbeat(offset=0)
    heard = time.monotonic()
    assert r.error_code == 0 and r.is_fenced
    b.incarnation = uuid.uuid4()  # a restarted broker: a new incarnation
    # That heartbeat named the old epoch: Kafka 4.1 keeps the session of (id, epoch) for a
    # session timeout (1.5 s) from it, fenced or not, and refuses a new incarnation until
    # then. Judged by when each attempt was sent and answered, so a slow machine is no fault.
    new = None
    deadline = time.monotonic() + 30
    while new is None and time.monotonic() < deadline:
        attempt = time.monotonic()
        try:
            new = b.register()
        except BrokerError as exc:
            assert exc.code == DUPLICATE_BROKER_REGISTRATION
            assert attempt < heard + 1.51, "refused after the session had expired"
            time.sleep(0.1)
    assert new is not None and new > old
    assert time.monotonic() - sent >= 1.49, "a new incarnation got in within the session"
    assert b.allocate_response(epoch=old).error_code == STALE_BROKER_EPOCH
    assert b.heartbeat(epoch=old).error_code == STALE_BROKER_EPOCH
    assert b.allocate_response(epoch=new).error_code == 0


def test_controlled_shutdown_and_unregister(server) -> None:
    b = broker(server, 31)
    b.register()
    b.wait_unfenced()
    r = b.heartbeat(want_shut_down=True)
    assert r.error_code == 0 and r.should_shut_down
    assert b.unregister() == 0
    assert b.unregister() == 102  # BROKER_ID_NOT_REGISTERED
    assert b.heartbeat().error_code == STALE_BROKER_EPOCH


def test_blocks_survive_a_restart(tmp_path: Path) -> None:
    with running_server(tmp_path) as srv:
        b = broker(srv, 41)
        b.register()
        b.wait_unfenced()
        before = [b.allocate()[0] for _ in range(3)]
        srv.kill()
        srv.start()
        b.reconnect()
        b.register()  # same incarnation: same epoch kept
        b.wait_unfenced()
        after = b.allocate()[0]
        assert after > max(before)
