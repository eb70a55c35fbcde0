"""kraftpy beside Apache Kafka 4.1 itself: the same RPCs from the same load generator, one run.

    python benchmarks/vs_kafka.py [--seconds 2] [--rounds 5] [--settings default,linger0]
                                  [--conf KEY=VALUE ...] [--kraftpy-conf KEY=VALUE ...]
                                  [--rows init,allocate]

Each side is one combined node (broker and controller, a static voter set) on this machine:
`kraftpy serve`, and Kafka 4.1.0 started from the jars the test suite uses (fetched on first
use) with the JVM flags of Kafka's own `kafka-server-start.sh` (1 GiB heap, G1). Rows:
- idempotent InitProducerId v4 on the client listener from 64 connections, one request in
  flight on each and 16 pipelined on each (Kafka's broker answers from the producer-id blocks
  it takes from its controller; kraftpy from its own);
- AllocateProducerIds v0 on the CONTROLLER listener from 16 registered brokers, one in flight
  each (each block is a committed metadata record on both sides).
Both sides run once with Kafka's defaults and once with `controller.quorum.append.linger.ms=0`
(the default linger of 25 ms bounds how often a controller commits; kraftpy honours it too).
`--conf` sets a property on both sides in every setting; `--kraftpy-conf` on kraftpy alone
(`kraftpy.quick.answers=false` measures kraftpy's full path alone).
The JVM is warmed up first (a few seconds of every row, not measured). Runs alternate round by
round, who goes first alternating too. Printed per row and setting: error-free answers/s, the
share of answers with an error code (COORDINATOR_LOAD_IN_PROGRESS above all: a broker waiting
for its next block), server CPU time per answer (the whole process tree), and the median of
the per-round ratios of error-free rates (kraftpy / Kafka) with their spread.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import trio

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

from server import (  # noqa: E402  (benchmarks/server.py: the load generator)
    HOST,
    FrameStream,
    cpu_seconds,
    init_request,
    load,
)

# kafka-server-start.sh's KAFKA_HEAP_OPTS and KAFKA_JVM_PERFORMANCE_OPTS.
KAFKA_JVM = ("-Xmx1G", "-Xms1G", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
             "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent",
             "-Djava.awt.headless=true")
# What a Kafka 4.1 broker declares it supports; Kafka's controller refuses a broker that does
# not support a finalized level.
FEATURES = (("metadata.version", 7, 27), ("kraft.version", 0, 1), ("transaction.version", 0, 2),
            ("group.version", 0, 1), ("eligible.leader.replicas.version", 0, 1),
            ("share.version", 0, 1))


def tree_cpu(pid: int) -> float:
    """CPU seconds of a process and every process below it."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry))
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            total += cpu_seconds(p)
        except OSError:
            continue
        todo.extend(children.get(p, ()))
    return total


@dataclass
class Run:
    rate: float  # error-free answers per second
    error_share: float
    cpu_us: float


def measure_init(pid: int, port: int, conns: int, depth: int, seconds: float) -> Run:
    cpu0, t0 = tree_cpu(pid), time.perf_counter()
    done, _, errors = load(port, conns, depth, seconds, init_request())
    elapsed = time.perf_counter() - t0
    return Run((done - errors) / elapsed, errors / max(done, 1),
               (tree_cpu(pid) - cpu0) / max(done, 1) * 1e6)


async def _brokers(port: int, cluster_id: str, count: int, seconds: float
                   ) -> tuple[int, int]:
    """Register `count` brokers, unfence them, then AllocateProducerIds one at a time each."""
    from kraftpy.protocol.framing import decode_response, encode_request
    from kraftpy.protocol.messages.allocate_producer_ids_request import (
        AllocateProducerIdsRequest,
    )
    from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
    from kraftpy.protocol.messages.broker_registration_request import (
        BrokerRegistrationRequest,
        Feature,
        Listener,
    )

    ok = errors = 0
    ready: list[float] = []

    async def broker(broker_id: int) -> None:
        nonlocal ok, errors
        stream = await trio.open_tcp_stream(HOST, port)
        frames = FrameStream(stream)
        await stream.send_all(encode_request(BrokerRegistrationRequest(
            broker_id=broker_id, cluster_id=cluster_id, incarnation_id=uuid.uuid4(),
            listeners=[Listener(name="PLAINTEXT", host=HOST, port=1, security_protocol=0)],
            features=[Feature(name=n, min_supported_version=lo, max_supported_version=hi)
                      for n, lo, hi in FEATURES],
            log_dirs=[uuid.uuid4()]), 4, 1, "bench"))
        _, reg = decode_response(await frames.frame(), 62, 4)
        if reg.error_code:
            raise RuntimeError(f"BrokerRegistration: error {reg.error_code}")
        for attempt in range(50):  # heartbeat until unfenced
            await stream.send_all(encode_request(BrokerHeartbeatRequest(
                broker_id=broker_id, broker_epoch=reg.broker_epoch, want_fence=False,
                current_metadata_offset=1 << 40), 1, 2 + attempt, "bench"))
            _, beat = decode_response(await frames.frame(), 63, 1)
            if not beat.is_fenced:
                break
            await trio.sleep(0.1)
        request = encode_request(AllocateProducerIdsRequest(
            broker_id=broker_id, broker_epoch=reg.broker_epoch), 0, 99, "bench")
        while not ready:
            await trio.sleep(0.01)
        end = ready[0] + seconds
        while trio.current_time() < end:
            await stream.send_all(request)
            _, answer = decode_response(await frames.frame(), 67, 0)
            if answer.error_code:
                errors += 1
            else:
                ok += 1
        await stream.aclose()

    base = 100 + int(time.time() * 1000) % 10_000 * 16  # new broker ids every run
    async with trio.open_nursery() as nursery:
        for b in range(count):
            nursery.start_soon(broker, base + b)
        await trio.sleep(1.5)
        ready.append(trio.current_time())
    return ok, errors


def measure_allocate(pid: int, port: int, cluster_id: str, seconds: float) -> Run:
    cpu0 = tree_cpu(pid)
    t0 = time.perf_counter()
    ok, errors = trio.run(_brokers, port, cluster_id, 16, seconds)
    elapsed = time.perf_counter() - t0 - 1.5  # registration and unfencing are not measured
    done = ok + errors
    return Run(ok / seconds if elapsed > 0 else 0.0, errors / max(done, 1),
               (tree_cpu(pid) - cpu0) / max(done, 1) * 1e6)


ROWS = (("InitProducerId 64 x 1", "init", 64, 1), ("InitProducerId 64 x 16", "init", 64, 16),
        ("AllocateProducerIds 16 brokers", "allocate", 16, 1))


def compare(args: argparse.Namespace, name: str, kraftpy: object, kafka: object) -> None:
    """Every row against both running sides, rounds alternating; one line per row."""
    sides = {"kraftpy": (kraftpy.pid, kraftpy.client_port,  # type: ignore[attr-defined]
                         kraftpy.controller_port, kraftpy.cluster_id()),  # type: ignore[attr-defined]
             "kafka": (kafka.pid, kafka.broker_port, kafka.controller_port,  # type: ignore[attr-defined]
                       kafka.cluster_id)}  # type: ignore[attr-defined]

    def run(side: str, kind: str, conns: int, depth: int, seconds: float) -> Run:
        pid, client, controller, cluster = sides[side]
        if kind == "init":
            return measure_init(pid, client, conns, depth, seconds)
        return measure_allocate(pid, controller, cluster, seconds)

    rows = [r for r in ROWS if r[1] in args.rows.split(",")]
    for _, kind, conns, depth in rows:  # warm-up, the JVM above all
        for side in sides:
            run(side, kind, conns, depth, 2.0)
    for row, kind, conns, depth in rows:
        runs: dict[str, list[Run]] = {"kraftpy": [], "kafka": []}
        for r in range(args.rounds):
            for side in (("kraftpy", "kafka") if r % 2 == 0 else ("kafka", "kraftpy")):
                runs[side].append(run(side, kind, conns, depth, args.seconds))
        ratios = [k.rate / max(j.rate, 1e-9)
                  for k, j in zip(runs["kraftpy"], runs["kafka"], strict=True)]
        med = {side: Run(statistics.median(x.rate for x in rs),
                         statistics.median(x.error_share for x in rs),
                         statistics.median(x.cpu_us for x in rs))
               for side, rs in runs.items()}
        k, j = med["kraftpy"], med["kafka"]
        print(f"{row:<31} {name:<14} | {k.rate:>10,.0f} {k.error_share:>5.0%} "
              f"{k.cpu_us:>6.1f} | {j.rate:>10,.0f} {j.error_share:>5.0%} "
              f"{j.cpu_us:>6.1f} | {statistics.median(ratios):.2f}x "
              f"[{min(ratios):.2f}-{max(ratios):.2f}]", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="per measured run")
    parser.add_argument("--rounds", type=int, default=5, help="runs per side, row and setting")
    parser.add_argument("--settings", default="default,linger0")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a property for both sides (repeatable)")
    parser.add_argument("--kraftpy-conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a property for kraftpy alone (repeatable)")
    parser.add_argument("--rows", default="init,allocate",
                        help="init (InitProducerId), allocate (AllocateProducerIds)")
    args = parser.parse_args()
    both = dict(kv.split("=", 1) for kv in args.conf)
    kraftpy_only = dict(kv.split("=", 1) for kv in args.kraftpy_conf)

    from support.kafka import KafkaNode
    from support.server import KraftpyServer

    settings = {"default": {}, "linger0": {"controller.quorum.append.linger.ms": "0"}}
    print(f"{args.rounds} alternating rounds of {args.seconds:g} s per side, row and "
          f"setting; {os.cpu_count()} cores; both sides {both or 'as below'}"
          f"{f', kraftpy {kraftpy_only}' if kraftpy_only else ''}. rate = median error-free "
          "answers/s; err = share of "
          "answers with an error code; CPU = server CPU us per answer (process tree); "
          "ratio = median of per-round kraftpy/Kafka rates [min-max]")
    print(f"{'row':<31} {'setting':<14} | {'kraftpy/s':>10} {'err':>5} "
          f"{'CPU':>6} | {'Kafka/s':>10} {'err':>5} {'CPU':>6} | ratio")
    with tempfile.TemporaryDirectory(prefix="kraftpy-vs-kafka-") as tmp:
        root = Path(tmp)
        for name in args.settings.split(","):
            # Both sides run with the same settings: kraftpy honours Kafka's linger too.
            kraftpy = KraftpyServer(root / f"kraftpy-{name}",
                                    {**settings[name], **both, **kraftpy_only},
                                    log_level="WARNING")
            kafka = KafkaNode(root / f"kafka-{name}", static_voter=True,
                              overrides={**settings[name], **both}, jvm_opts=KAFKA_JVM)
            kraftpy.start()
            try:
                kafka.format()
                kafka.start()
                compare(args, name, kraftpy, kafka)
            finally:
                kafka.stop()
                kraftpy.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
