"""Three kraftpy controllers beside three Kafka 4.1 controllers: AllocateProducerIds through
the quorum leader, and failover as brokers see it, in one run.

    python benchmarks/vs_kafka_quorum.py [--seconds 3] [--rounds 5] [--kills 10]
                                         [--settings default,linger0] [--brokers 16]

Each side is a quorum of three voters with static `controller.quorum.voters` on this
machine: three `kraftpy serve` processes, and three Kafka 4.1 controller-only nodes
(`process.roles=controller`, the test suite's harness, 384 MB heap, serial GC, full JIT).
Both run with the same settings: Kafka's defaults (election.timeout.ms 1000, fetch.timeout.ms
2000, append.linger.ms 25), then `controller.quorum.append.linger.ms=0`, each setting on fresh
quorums. Both sides are up for the whole of a setting.

The brokers are simulated, `--brokers` per side, each as a Kafka broker talks to its
controllers: it registers (BrokerRegistration v4), heartbeats every 2 s
(broker.heartbeat.interval.ms) and asks for producer-ID blocks (AllocateProducerIds v0, one
in flight). It sends to the leader it knows; on NOT_CONTROLLER, a dropped connection or a
timeout it asks the voters who leads (a raft Fetch: each voter's answer carries its
CurrentLeader, which is how a broker's raft client learns the leader), goes to the leader
named with the highest epoch, and backs off 50 ms between tries.

Rows, the sides alternating round by round (who goes first alternating too), the idle side
only heartbeating:
- AllocateProducerIds: blocks answered per second (each a committed ProducerIdsRecord), p50
  and p99 latency, and CPU per commit (the CPU time of the three controller processes over
  the round, divided by the blocks answered in it); after a warm-up of both sides;
- failover (Kafka's default settings only): under that load, kill -9 of the leader, until
  the next block answered by another node (and until every broker got one), p50 and max
  over `--kills` kills; the sides take turns kill by kill, the killed node is restarted and
  the quorum left to settle before the next.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

from server import FrameStream  # noqa: E402  (benchmarks/server.py)
from vs_kafka import FEATURES, tree_cpu  # noqa: E402

HOST = "127.0.0.1"
NOT_CONTROLLER = 41
FETCH, FETCH_VERSION = 1, 17  # what Kafka 4.1's raft client sends
HEARTBEAT_INTERVAL_S = 2.0  # broker.heartbeat.interval.ms
RETRY_BACKOFF_S = 0.05
REQUEST_TIMEOUT_S = 30.0  # a broker's controller.socket.timeout.ms
CONNECT_TIMEOUT_S = 1.0
SETTINGS = {"default": {}, "linger0": {"controller.quorum.append.linger.ms": "0"}}
KAFKA_JVM = ("-Xms64m", "-Xmx384m", "-XX:+UseSerialGC", "-Djava.awt.headless=true")
FIRST_BROKER_ID = 100


# --- statistics (pure: tests/raft/test_quorum_bench.py) ------------------------------------

def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (q in 0-100) of `values`; nan when there are none."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


@dataclass(frozen=True)
class Answer:
    """One AllocateProducerIds as a broker saw it: sent, answered, error code, by which node,
    to which broker."""

    sent: float
    done: float
    error: int
    node: int
    broker: int


@dataclass(frozen=True)
class Window:
    rate: float  # blocks answered per second
    p50_ms: float
    p99_ms: float
    cpu_us: float  # controller CPU per block answered
    errors: int


def summarize(answers: Sequence[Answer], start: float, end: float, cpu_s: float) -> Window:
    """The blocks answered within [start, end] (by the time they were answered)."""
    inside = [a for a in answers if start <= a.done <= end]
    ok = [a for a in inside if a.error == 0]
    latencies = [(a.done - a.sent) * 1000 for a in ok]
    span = end - start
    return Window(rate=len(ok) / span if span > 0 else 0.0,
                  p50_ms=percentile(latencies, 50), p99_ms=percentile(latencies, 99),
                  cpu_us=cpu_s / len(ok) * 1e6 if ok else math.nan,
                  errors=len(inside) - len(ok))


def failover_times(answers: Sequence[Answer], killed_at: float, victim: int,
                   brokers: int) -> tuple[float | None, float | None]:
    """Seconds from the kill to the first block answered by another node, and to the moment
    every one of `brokers` brokers had one (None while not yet). An answer from the victim
    itself arriving after the kill was sent by it before it died: it does not count."""
    firsts: dict[int, float] = {}
    for a in answers:
        if a.error == 0 and a.done > killed_at and a.node != victim:
            if a.done < firsts.get(a.broker, math.inf):
                firsts[a.broker] = a.done
    if not firsts:
        return None, None
    first = min(firsts.values()) - killed_at
    every = max(firsts.values()) - killed_at if len(firsts) >= brokers else None
    return first, every


def leader_view(response: Any) -> tuple[int, int] | None:
    """(leader id, epoch) a voter's Fetch answer names, or None when it names none."""
    if response.error_code or not response.responses:
        return None
    parts = response.responses[0].partitions
    if not parts:
        return None
    leader = parts[0].current_leader
    if leader.leader_id < 0 or leader.leader_epoch < 0:
        return None
    return leader.leader_id, leader.leader_epoch


def choose_leader(views: Sequence[tuple[int, int] | None]) -> tuple[int, int] | None:
    """The leader named with the highest epoch (as a raft client keeps the newest it hears)."""
    known = [v for v in views if v is not None]
    return max(known, key=lambda v: v[1]) if known else None


# --- a broker's way to its controllers -------------------------------------------------------

class Link:
    """One connection, one request at a time, Kafka's framing."""

    def __init__(self, stream: trio.SocketStream, client_id: str) -> None:
        self.stream = stream
        self.frames = FrameStream(stream)
        self.client_id = client_id
        self.correlation = 0

    @classmethod
    async def open(cls, address: tuple[str, int], client_id: str) -> Link:
        with trio.fail_after(CONNECT_TIMEOUT_S):
            return cls(await trio.open_tcp_stream(*address), client_id)

    async def call(self, message: Any, version: int, timeout: float) -> Any:
        from kraftpy.protocol.framing import decode_response, encode_request

        self.correlation += 1
        with trio.fail_after(timeout):
            await self.stream.send_all(encode_request(message, version, self.correlation,
                                                      self.client_id))
            _, response = decode_response(await self.frames.frame(), message.API_KEY, version)
        return response

    async def aclose(self) -> None:
        with contextlib.suppress(Exception):
            await self.stream.aclose()


FAILURES = (OSError, ConnectionError, trio.BrokenResourceError, trio.ClosedResourceError,
            trio.TooSlowError)


class Finder:
    """Who leads, as a broker's raft client learns it: the CurrentLeader of the voters' Fetch
    answers. The probe names epoch 0, so every voter answers FENCED_LEADER_EPOCH with its
    view and no records (and the leader records no fetch state for it)."""

    def __init__(self, voters: dict[int, tuple[str, int]], cluster_id: str,
                 broker_id: int) -> None:
        self.voters = voters
        self.cluster_id = cluster_id
        self.broker_id = broker_id
        self.links: dict[int, Link] = {}
        self.lock = trio.Lock()
        self.current: tuple[int, int] | None = None
        self.asked_at = -math.inf

    def probe(self) -> Any:
        from kraftpy.controller.raft.messages import fetch_request
        from kraftpy.controller.raft.voters import ReplicaKey

        return fetch_request(self.cluster_id, ReplicaKey(self.broker_id), 0, 0, 0, -1, 0, 0)

    async def ask(self, voter: int) -> tuple[int, int] | None:
        link = self.links.get(voter)
        try:
            if link is None:
                link = self.links[voter] = await Link.open(self.voters[voter],
                                                           f"raft-client-{self.broker_id}")
            return leader_view(await link.call(self.probe(), FETCH_VERSION, 2.0))
        except FAILURES:
            dropped = self.links.pop(voter, None)
            if dropped is not None:
                await dropped.aclose()
            return None

    async def leader(self, since: float) -> tuple[int, int] | None:
        """The newest leader any voter names, asked afresh unless asked after `since`."""
        async with self.lock:
            if self.asked_at <= since:
                order = list(self.voters)
                random.shuffle(order)
                views = [await self.ask(v) for v in order]
                newest = choose_leader(views)
                if newest is not None and (self.current is None or newest[1] >= self.current[1]):
                    self.current = newest
                self.asked_at = time.monotonic()
            return self.current

    async def aclose(self) -> None:
        for link in self.links.values():
            await link.aclose()
        self.links.clear()


class Channel:
    """A broker's channel to the active controller (Kafka's NodeToControllerChannelManager):
    sends to the leader it knows, and on NOT_CONTROLLER, a lost connection or a timeout finds
    the leader again and resends."""

    def __init__(self, finder: Finder, name: str) -> None:
        self.finder = finder
        self.name = name
        self.link: Link | None = None
        self.node = -1
        self.suspect = False  # NOT_CONTROLLER from `node`: ask who leads before resending

    async def drop(self) -> None:
        if self.link is not None:
            await self.link.aclose()
        self.link = None

    async def call(self, message: Any, version: int) -> Any:
        while True:
            if self.link is None or self.suspect:
                found = await self.finder.leader(time.monotonic() - RETRY_BACKOFF_S)
                if found is None:
                    await trio.sleep(RETRY_BACKOFF_S)
                    continue
                self.suspect = False
                if self.link is not None and found[0] != self.node:
                    await self.drop()
                if self.link is None:
                    try:
                        self.link = await Link.open(self.finder.voters[found[0]], self.name)
                    except FAILURES:
                        await trio.sleep(RETRY_BACKOFF_S)
                        continue
                    self.node = found[0]
            try:
                response = await self.link.call(message, version, REQUEST_TIMEOUT_S)
            except FAILURES:
                await self.drop()
                await trio.sleep(RETRY_BACKOFF_S)
                continue
            if response.error_code == NOT_CONTROLLER:
                self.suspect = True
                await trio.sleep(RETRY_BACKOFF_S)
                continue
            return response


class Fleet:
    """`count` simulated brokers of one quorum, in a thread of their own (a trio loop):
    registered and heartbeating from `start` to `close`, asking for blocks while `allocating`."""

    def __init__(self, name: str, voters: dict[int, tuple[str, int]], cluster_id: str,
                 count: int) -> None:
        self.name = name
        self.voters = voters
        self.cluster_id = cluster_id
        self.count = count
        self.answers: list[Answer] = []
        self.heartbeat_errors: dict[int, int] = {}
        self.ready = threading.Event()
        self.failure: BaseException | None = None
        self.token: trio.lowlevel.TrioToken | None = None
        self._go = trio.Event()
        self._cancel: trio.CancelScope | None = None
        self._unfenced = 0
        self.thread = threading.Thread(target=self._run, name=f"brokers-{name}", daemon=True)

    # --- from the main thread ------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> None:
        self.thread.start()
        if not self.ready.wait(timeout):
            raise RuntimeError(f"{self.name}: brokers not registered and unfenced in "
                               f"{timeout:.0f} s")
        self.check()

    def check(self) -> None:
        if self.failure is not None:
            raise RuntimeError(f"{self.name}: the brokers stopped") from self.failure

    def _in_loop(self, fn: Callable[[], None]) -> None:
        assert self.token is not None
        trio.from_thread.run_sync(fn, trio_token=self.token)

    def allocate(self, on: bool) -> None:
        def flip() -> None:
            if on:
                self._go.set()
            elif self._go.is_set():
                self._go = trio.Event()
        self._in_loop(flip)

    def close(self) -> None:
        if self.token is not None and self._cancel is not None and self.thread.is_alive():
            with contextlib.suppress(trio.RunFinishedError):
                self._in_loop(self._cancel.cancel)
        self.thread.join(30)

    # --- in the brokers' loop ------------------------------------------------------------
    def _run(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # noqa: BLE001 - reported to the main thread by check()
            self.failure = exc
            self.ready.set()

    async def _main(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        with trio.CancelScope() as scope:
            self._cancel = scope
            async with trio.open_nursery() as nursery:
                for i in range(self.count):
                    nursery.start_soon(self._broker, FIRST_BROKER_ID + i)

    async def _broker(self, broker_id: int) -> None:
        from kraftpy.protocol.messages.allocate_producer_ids_request import (
            AllocateProducerIdsRequest,
        )
        from kraftpy.protocol.messages.broker_registration_request import (
            BrokerRegistrationRequest,
            Feature,
            Listener,
        )

        finder = Finder(self.voters, self.cluster_id, broker_id)
        lifecycle = Channel(finder, f"broker-{broker_id}-heartbeat-channel-manager")
        forwarding = Channel(finder, f"broker-{broker_id}-forwarding-channel-manager")
        try:
            reg = await lifecycle.call(BrokerRegistrationRequest(
                broker_id=broker_id, cluster_id=self.cluster_id, incarnation_id=uuid.uuid4(),
                listeners=[Listener(name="PLAINTEXT", host=HOST, port=20000 + broker_id,
                                    security_protocol=0)],
                features=[Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                          for n, lo, hi in FEATURES],
                log_dirs=[uuid.uuid4()]), 4)
            if reg.error_code:
                raise RuntimeError(f"{self.name} broker {broker_id}: BrokerRegistration "
                                   f"error {reg.error_code}")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._heartbeats, lifecycle, broker_id, reg.broker_epoch)
                request = AllocateProducerIdsRequest(broker_id=broker_id,
                                                     broker_epoch=reg.broker_epoch)
                while True:
                    await self._go.wait()
                    sent = time.monotonic()
                    answer = await forwarding.call(request, 0)
                    self.answers.append(Answer(sent, time.monotonic(), answer.error_code,
                                               forwarding.node, broker_id))
        finally:
            with trio.CancelScope(shield=True):
                await lifecycle.drop()
                await forwarding.drop()
                await finder.aclose()

    async def _heartbeats(self, channel: Channel, broker_id: int, epoch: int) -> None:
        from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest

        fenced = True
        while True:
            beat = await channel.call(BrokerHeartbeatRequest(
                broker_id=broker_id, broker_epoch=epoch, want_fence=False,
                current_metadata_offset=1 << 40), 1)
            if beat.error_code:
                self.heartbeat_errors[beat.error_code] = (
                    self.heartbeat_errors.get(beat.error_code, 0) + 1)
            elif fenced and not beat.is_fenced:
                fenced = False
                self._unfenced += 1
                if self._unfenced == self.count:
                    self.ready.set()
            await trio.sleep(0.1 if fenced else HEARTBEAT_INTERVAL_S)


# --- the two quorums -------------------------------------------------------------------------

@dataclass
class Quorum:
    """Three voters of one implementation: node id -> node (KraftpyServer or KafkaNode)."""

    name: str
    cluster_id: str
    nodes: dict[int, Any]
    voters: dict[int, tuple[str, int]] = field(default_factory=dict)

    def cpu(self) -> float:
        """CPU seconds so far of every running voter's process tree."""
        return sum(tree_cpu(n.pid) for n in self.nodes.values() if n.running and n.pid)

    def restart(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if self.name == "kraftpy":
            node.start(60)
        else:
            node.start(timeout=120)

    def stop(self) -> None:
        for node in self.nodes.values():
            node.stop()


def kraftpy_quorum(root: Path, overrides: dict[str, str]) -> Quorum:
    from support.server import quorum_servers, start_quorum

    servers = quorum_servers(root, 3, overrides)
    start_quorum(servers)
    return kraftpy_side(servers)


def kraftpy_side(servers: Sequence[Any]) -> Quorum:
    """Started `kraftpy serve` voters (tests/support/server.py) as one side."""
    nodes = {int(s.properties["node.id"]): s for s in servers}
    return Quorum("kraftpy", servers[0].cluster_id(), nodes,
                  {i: (HOST, s.controller_port) for i, s in nodes.items()})


def kafka_quorum(root: Path, overrides: dict[str, str]) -> Quorum:
    from support.kafka import KafkaNode, random_cluster_id
    from support.server import free_port

    cluster_id = random_cluster_id()
    ports = {i: free_port() for i in (1, 2, 3)}
    voters = [f"{i}@{HOST}:{p}" for i, p in ports.items()]
    nodes = {i: KafkaNode(root / f"kafka{i}", roles="controller", node_id=i,
                          cluster_id=cluster_id, voters=voters, controller_port=p,
                          overrides=overrides, jvm_opts=KAFKA_JVM) for i, p in ports.items()}
    for node in nodes.values():
        node.format()
    for node in nodes.values():
        node.start(wait=False)
    for node in nodes.values():
        node.wait_started(120)
    return Quorum("Kafka", cluster_id, nodes, {i: (HOST, p) for i, p in ports.items()})


# --- the measurements ------------------------------------------------------------------------

def measure(quorum: Quorum, fleet: Fleet, seconds: float) -> Window:
    """One round: the brokers ask for blocks for `seconds`, the controllers' CPU around it."""
    fleet.check()
    cpu0 = quorum.cpu()
    start = time.monotonic()
    fleet.allocate(True)
    time.sleep(seconds)
    fleet.allocate(False)
    end = time.monotonic()
    cpu1 = quorum.cpu()
    window = summarize(fleet.answers, start, end, cpu1 - cpu0)
    time.sleep(0.2)  # the requests in flight are answered
    fleet.answers.clear()
    return window


def wait_until(check: Callable[[], bool], timeout: float, what: str, step: float = 0.01
               ) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout:.0f} s")
        time.sleep(step)


def failover(quorum: Quorum, fleet: Fleet, brokers: int) -> tuple[float, float]:
    """kill -9 of the leader under load; (s to the first block from a new leader, s until
    every broker had one). The node is restarted and the quorum settles before returning."""
    fleet.check()
    fleet.answers.clear()
    fleet.allocate(True)
    wait_until(lambda: sum(a.error == 0 for a in fleet.answers) >= 2 * brokers, 60,
               f"{quorum.name} blocks before the kill")
    victim = fleet.answers[-1].node
    killed_at = time.monotonic()
    quorum.nodes[victim].kill()
    times: list[tuple[float | None, float | None]] = []

    def served() -> bool:
        times[:] = [failover_times(fleet.answers, killed_at, victim, brokers)]
        return times[0][1] is not None

    wait_until(served, 120, f"{quorum.name} blocks for every broker after the kill")
    first, every = times[0]
    assert first is not None and every is not None
    fleet.allocate(False)
    quorum.restart(victim)
    time.sleep(1.0)
    fleet.answers.clear()
    # settled: the restarted node back in the quorum, blocks flowing again for a moment
    fleet.allocate(True)
    wait_until(lambda: sum(a.error == 0 for a in fleet.answers) >= 4 * brokers, 60,
               f"{quorum.name} blocks after the restart")
    time.sleep(2.0)
    fleet.allocate(False)
    fleet.answers.clear()
    return first, every


def fmt_ms(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.1f}"


def rate_rows(quorums: dict[str, Quorum], fleets: dict[str, Fleet], setting: str,
              rounds: int, seconds: float) -> str:
    for side in quorums:  # warm-up: the JIT, the first connections and segments
        measure(quorums[side], fleets[side], seconds)
    runs: dict[str, list[Window]] = {side: [] for side in quorums}
    for r in range(rounds):
        order = list(quorums) if r % 2 == 0 else list(reversed(quorums))
        for side in order:
            runs[side].append(w := measure(quorums[side], fleets[side], seconds))
            print(f"  {setting} round {r + 1} {side}: {w.rate:,.0f}/s p50 {fmt_ms(w.p50_ms)} "
                  f"p99 {fmt_ms(w.p99_ms)} ms, {fmt_ms(w.cpu_us)} us CPU/commit, "
                  f"{w.errors} errors", flush=True)
    k, j = runs["kraftpy"], runs["Kafka"]
    ratios = [a.rate / max(b.rate, 1e-9) for a, b in zip(k, j, strict=True)]

    def med(ws: list[Window]) -> str:
        return (f"{statistics.median(w.rate for w in ws):,.0f} | "
                f"{fmt_ms(statistics.median(w.p50_ms for w in ws))} | "
                f"{fmt_ms(statistics.median(w.p99_ms for w in ws))} | "
                f"{fmt_ms(statistics.median(w.cpu_us for w in ws))}")

    ratio = statistics.median(ratios)
    errors = sum(w.errors for w in k + j)
    return (f"| AllocateProducerIds, {setting} | {med(k)} | {med(j)} | {ratio:.2f}x "
            f"[{min(ratios):.2f}-{max(ratios):.2f}] | >= 1x {'met' if ratio >= 1 else 'MISSED'}"
            f"{f' ({errors} error answers)' if errors else ''} |")


def failover_rows(quorums: dict[str, Quorum], fleets: dict[str, Fleet], kills: int,
                  brokers: int) -> list[str]:
    out: dict[str, list[tuple[float, float]]] = {side: [] for side in quorums}
    for k in range(kills):
        order = list(quorums) if k % 2 == 0 else list(reversed(quorums))
        for side in order:
            out[side].append(failover(quorums[side], fleets[side], brokers))
            first, every = out[side][-1]
            print(f"  kill {k + 1} {side}: first block {first:.2f} s, every broker "
                  f"{every:.2f} s", flush=True)
    rows = []
    for i, what in enumerate(("next block answered", f"all {brokers} brokers served")):
        k = [t[i] for t in out["kraftpy"]]
        j = [t[i] for t in out["Kafka"]]
        ratio = statistics.median(k) / statistics.median(j)
        rows.append(f"| failover: kill -9 to {what} | {statistics.median(k):.2f} s | "
                    f"{max(k):.2f} s | {statistics.median(j):.2f} s | {max(j):.2f} s | "
                    f"{ratio:.2f}x | <= 1x {'met' if ratio <= 1 else 'MISSED'} |")
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per measured round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per side and setting")
    parser.add_argument("--kills", type=int, default=10, help="kill -9 of the leader, per side")
    parser.add_argument("--settings", default="default,linger0")
    parser.add_argument("--brokers", type=int, default=16)
    args = parser.parse_args(argv)

    rate_lines: list[str] = []
    failover_lines: list[str] = []
    print(f"{args.rounds} alternating rounds of {args.seconds:g} s per side and setting, "
          f"{args.brokers} brokers per side, {args.kills} kills per side; "
          f"{os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory(prefix="kraftpy-vs-kafka-quorum-") as tmp:
        for setting in args.settings.split(","):
            overrides = SETTINGS[setting]
            root = Path(tmp) / setting
            quorums: dict[str, Quorum] = {}
            fleets: dict[str, Fleet] = {}
            try:
                quorums["kraftpy"] = kraftpy_quorum(root / "kraftpy", overrides)
                quorums["Kafka"] = kafka_quorum(root / "kafka", overrides)
                for side, quorum in quorums.items():
                    fleets[side] = Fleet(side, quorum.voters, quorum.cluster_id, args.brokers)
                    fleets[side].start()
                rate_lines.append(rate_rows(quorums, fleets, setting, args.rounds,
                                            args.seconds))
                print(rate_lines[-1], flush=True)
                if setting == "default" and args.kills:
                    failover_lines = failover_rows(quorums, fleets, args.kills, args.brokers)
                    print("\n".join(failover_lines), flush=True)
            finally:
                for fleet in fleets.values():
                    fleet.close()
                for quorum in quorums.values():
                    quorum.stop()
    print(f"\n{args.brokers} brokers per side, AllocateProducerIds one in flight each; "
          "median of the rounds (ratio: median of per-round kraftpy/Kafka rates [min-max])\n")
    print("| row | kraftpy blocks/s | p50 ms | p99 ms | CPU us/commit | Kafka blocks/s | p50 ms "
          "| p99 ms | CPU us/commit | ratio | target |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rate_lines))
    if failover_lines:
        print(f"\n{args.kills} kills per side, Kafka's default timeouts on both\n")
        print("| row | kraftpy p50 | kraftpy max | Kafka p50 | Kafka max | p50 ratio | target |")
        print("|---|---|---|---|---|---|---|")
        print("\n".join(failover_lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
