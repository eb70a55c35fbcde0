"""When a controller lets a broker id register again, on Kafka 4.1's controller and on kraftpy.

The same simulated broker (`BrokerSim`, over a real CONTROLLER connection) runs the same
steps against a Kafka 4.1 controller-only node and `kraftpy serve`, both with a broker session
of 3 s. What each controller answered is compared, not what we expect of it:
- a broker restarted right after its controlled shutdown (a new incarnation of the same id)
  is refused DUPLICATE_BROKER_REGISTRATION while the old epoch's session lasts, then let in;
- the same incarnation registering again at once is let in and keeps its broker epoch;
- a registration refused names the same error on both.

Time is judged by when each attempt was sent and answered, so a slow machine is no fault: a
refusal must have been sent before the session could have expired (its last contact plus the
timeout), and the attempt let in must have been answered at least a session after the last
heartbeat was sent.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support.broker_sim import BrokerError, BrokerSim
from support.kafka import KafkaNode
from support.server import running_server

pytestmark = pytest.mark.slow

SESSION_S = 3.0
SETTINGS = {"broker.session.timeout.ms": str(int(SESSION_S * 1000))}


@pytest.fixture(scope="module")
def controllers(tmp_path_factory: pytest.TempPathFactory, kafka_jars: Path
                ) -> Iterator[dict[str, tuple[str, int]]]:
    kafka = KafkaNode(tmp_path_factory.mktemp("kafka-registration"), roles="controller",
                      static_voter=True, overrides=SETTINGS)
    kafka.format()
    kafka.start()
    try:
        with running_server(tmp_path_factory.mktemp("kraftpy-registration"), SETTINGS) as srv:
            host, port = kafka.controller.split(":")
            yield {"kafka": (host, int(port)), "kraftpy": (srv.host, srv.controller_port)}
    finally:
        kafka.stop()


@dataclass
class Reregistration:
    refusals: list[int]  # the error code of every refused attempt, in order
    refused_in_session: bool  # every refusal was sent before the session could have expired
    let_in_after_session: bool  # the attempt let in was answered a session after the last beat
    new_epoch: bool


def _unfenced(address: tuple[str, int], broker_id: int) -> BrokerSim:
    broker = BrokerSim(address, broker_id, timeout=30.0)
    broker.register(retry_for=30.0)
    broker.wait_unfenced(timeout=30.0)
    return broker


def _new_incarnation_after_controlled_shutdown(address: tuple[str, int], broker_id: int
                                               ) -> Reregistration | None:
    """What the controller answered; None when this machine stalled so long that the first
    attempt went out after half a session (it would prove nothing about the refusal)."""
    broker = _unfenced(address, broker_id)
    old = broker.epoch
    for _ in range(100):  # until the controller tells it to shut down (no leaderships here)
        sent = time.monotonic()
        beat = broker.heartbeat(want_shut_down=True)
        heard = time.monotonic()
        assert beat.error_code == 0
        if beat.should_shut_down:
            break
        time.sleep(0.05)
    else:
        pytest.fail("the controller never let the broker shut down")
    broker.reconnect()  # the process restarted
    broker.incarnation = uuid.uuid4()
    refusals: list[int] = []
    in_session = True
    deadline = time.monotonic() + 10 * SESSION_S
    while time.monotonic() < deadline:
        attempt = time.monotonic()
        if not refusals and attempt > heard + SESSION_S / 2:
            return None
        try:
            broker.register(retry_for=0.0)
        except BrokerError as exc:
            refusals.append(exc.code)
            in_session = in_session and attempt < heard + SESSION_S
            time.sleep(0.1)
            continue
        return Reregistration(refusals, in_session, time.monotonic() - sent >= SESSION_S,
                              broker.epoch != old)
    pytest.fail(f"broker {broker_id} was refused for {10 * SESSION_S} s: {refusals[-3:]}")


def _same_incarnation_again(address: tuple[str, int], broker_id: int) -> tuple[int, bool, bool]:
    broker = _unfenced(address, broker_id)
    old = broker.epoch
    answer = broker.request(broker.registration(), 4)
    if answer.error_code == 0:
        broker.epoch = answer.broker_epoch
    beat = broker.heartbeat()
    return answer.error_code, broker.epoch == old, beat.error_code == 0


def test_a_new_incarnation_waits_out_the_old_session_on_both(
        controllers: dict[str, tuple[str, int]]) -> None:
    seen: dict[str, Reregistration] = {}
    for side, address in controllers.items():
        for broker_id in (7, 17, 27):  # another id after a stall of this machine
            run = _new_incarnation_after_controlled_shutdown(address, broker_id)
            if run is not None:
                seen[side] = run
                break
        else:
            pytest.fail(f"this machine stalled for half a session three times on {side}")
    for side, run in seen.items():
        assert run.refusals, f"{side} let a new incarnation in within the old session"
        assert run.refused_in_session, f"{side} refused after the session had expired"
        assert run.let_in_after_session, f"{side} let it in within the session"
    assert {run.refusals[0] for run in seen.values()} == {101}  # DUPLICATE_BROKER_REGISTRATION
    assert seen["kraftpy"].new_epoch == seen["kafka"].new_epoch


def test_the_same_incarnation_registers_again_at_once_on_both(
        controllers: dict[str, tuple[str, int]]) -> None:
    seen = {side: _same_incarnation_again(address, 8) for side, address in controllers.items()}
    assert seen["kraftpy"] == seen["kafka"]
    assert seen["kafka"][0] == 0
