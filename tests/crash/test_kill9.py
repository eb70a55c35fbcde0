"""kill -9 under load: nothing acknowledged before a kill is lost or handed out again.

One kraftpy process is killed with SIGKILL and restarted, over and over, while client threads
ask for idempotent producer ids, transactional producers bump their epochs, and brokers take
producer-ID blocks. Every answer that reached a client counts as acknowledged. After each
kill, the data dir recovered as the next start recovers it holds every block and producer id
acknowledged so far (the recovered next producer id is past them all). Across the whole
run: no producer id is acknowledged twice, no block overlaps another, no client id falls in a
broker's block, and a transactional id keeps its producer id while its epoch only grows.

Bounded by count and time: KRAFTPY_CRASH_KILLS kills (default 50) or KRAFTPY_CRASH_SECONDS
(default 150) of wall time, whichever comes first; at least 50 kills are required by default.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kraftpy.controller import replay
from kraftpy.controller.log.storage import MetadataStorage
from kraftpy.controller.quorum_controller import QuorumController
from kraftpy.controller.settings import ControllerSettings
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.tools.kafka_connection import Closed, KafkaConnection, NoAnswer
from support.broker_sim import BrokerError, BrokerSim
from support.server import KraftpyServer

pytestmark = pytest.mark.slow

KILLS = int(os.environ.get("KRAFTPY_CRASH_KILLS", "50"))
SECONDS = float(os.environ.get("KRAFTPY_CRASH_SECONDS", "150"))
DOWN = (OSError, Closed, NoAnswer, ConnectionError)


@dataclass
class Ledger:
    """Everything acknowledged to a client or broker, across every restart."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    pids: dict[int, str] = field(default_factory=dict)
    blocks: list[tuple[int, int, int]] = field(default_factory=list)  # start, len, broker
    txn: dict[str, tuple[int, int]] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)
    answers: int = 0

    def pid(self, pid: int, who: str) -> None:
        with self.lock:
            self.answers += 1
            if pid in self.pids:
                self.violations.append(f"producer id {pid} handed out twice "
                                       f"({self.pids[pid]} and {who})")
            self.pids[pid] = who

    def block(self, start: int, length: int, broker: int) -> None:
        with self.lock:
            self.answers += 1
            for s, n, b in self.blocks:
                if start < s + n and s < start + length:
                    self.violations.append(f"block {start}+{length} of broker {broker} overlaps "
                                           f"{s}+{n} of broker {b}")
            self.blocks.append((start, length, broker))

    def epoch(self, txn: str, pid: int, epoch: int) -> None:
        with self.lock:
            self.answers += 1
            if txn in self.txn:
                old_pid, old_epoch = self.txn[txn]
                if pid != old_pid or epoch <= old_epoch:
                    self.violations.append(f"{txn}: ({old_pid}, {old_epoch}) acknowledged, "
                                           f"then ({pid}, {epoch})")
            self.txn[txn] = (pid, epoch)


def client_loop(srv: KraftpyServer, ledger: Ledger, stop: threading.Event, n: int) -> None:
    txn = f"crash-txn-{n}"
    conn: KafkaConnection | None = None
    while not stop.is_set():
        try:
            if conn is None:
                conn = KafkaConnection((srv.host, srv.client_port), timeout=3.0)
            r = conn.request(InitProducerIdRequest(transactional_id=None,
                                                   transaction_timeout_ms=60000), 4)
            if r.error_code == 0:
                ledger.pid(r.producer_id, f"client {n}")
            pid, epoch = ledger.txn.get(txn, (-1, -1))
            r = conn.request(InitProducerIdRequest(
                transactional_id=txn, transaction_timeout_ms=60000, producer_id=pid,
                producer_epoch=epoch), 4)
            if r.error_code == 90:  # a bump was persisted but its answer lost in a kill
                r = conn.request(InitProducerIdRequest(
                    transactional_id=txn, transaction_timeout_ms=60000), 4)
            if r.error_code == 0:
                ledger.epoch(txn, r.producer_id, r.producer_epoch)
        except DOWN:
            if conn is not None:
                conn.close()
            conn = None
            time.sleep(0.02)


def broker_loop(srv: KraftpyServer, ledger: Ledger, stop: threading.Event, broker_id: int,
                cluster_id: str) -> None:
    broker: BrokerSim | None = None
    while not stop.is_set():
        try:
            if broker is None:
                broker = BrokerSim((srv.host, srv.controller_port), broker_id, cluster_id,
                                   timeout=3.0)
                broker.register()
            start, length = broker.allocate()
            ledger.block(start, length, broker_id)
        except BrokerError:
            broker.register()
        except DOWN:
            if broker is not None:
                broker.close()
            broker = None
            time.sleep(0.02)


def recovered_next_producer_id(data: Path, cluster_id: str) -> int:
    """The next producer id of the data dir of a killed node, recovered and replayed as its
    next start does (a torn tail cut); left to look unclean, as after the kill."""
    storage = MetadataStorage.open(data, node_id=1)
    try:
        controller = QuorumController(ControllerSettings(cluster_id=cluster_id, node_id=1))
        replay.replay_snapshot_and_log([controller], storage.snapshot, storage.metadata, None)
        return controller.producer_ids.next_producer_id
    finally:
        storage.close()
        (data / ".kafka_cleanshutdown").unlink(missing_ok=True)


def lost(ledger: Ledger, next_id: int) -> list[str]:
    """What the ledger holds as acknowledged that a log ending at `next_id` does not hold."""
    with ledger.lock:
        blocks = [f"block {s}+{n} of broker {b}" for s, n, b in ledger.blocks
                  if s + n > next_id]
        pids = [f"producer id {pid} of {who}" for pid, who in ledger.pids.items()
                if pid >= next_id]
    return blocks + pids


def test_kill9_under_load_never_hands_out_an_acknowledged_id_again(tmp_path) -> None:
    # Small snapshot, segment and retention limits: kills also land inside snapshot writes
    # (worker thread), segment rolls and retention's deletions.
    srv = KraftpyServer(tmp_path, {"broker.session.timeout.ms": "30000",
                                   "metadata.log.max.record.bytes.between.snapshots": "8000",
                                   "metadata.log.segment.bytes": "16384",
                                   "metadata.max.retention.bytes": "60000"},
                        log_level="WARNING")
    srv.start()
    cluster_id = srv.cluster_id()
    ledger = Ledger()
    stop = threading.Event()
    threads = [threading.Thread(target=client_loop, args=(srv, ledger, stop, n), daemon=True)
               for n in range(4)]
    threads += [threading.Thread(target=broker_loop, args=(srv, ledger, stop, 900 + b,
                                                         cluster_id), daemon=True)
                for b in range(2)]
    for t in threads:
        t.start()
    rng = random.Random(20261121)
    kills = 0
    checking = 0.0  # seconds spent recovering the killed node's log to check it
    started = time.monotonic()
    try:
        while kills < KILLS and time.monotonic() - started < SECONDS:
            before = ledger.answers
            deadline = time.monotonic() + 10
            time.sleep(rng.uniform(0.05, 0.4))
            while ledger.answers == before and time.monotonic() < deadline:
                time.sleep(0.01)  # kill only under load: something was acknowledged
            srv.kill()
            kills += 1
            # Down: nothing more can be acknowledged, so all the ledger holds must be there.
            began = time.monotonic()
            next_id = recovered_next_producer_id(srv.data_dir, cluster_id)
            checking += time.monotonic() - began
            missing = lost(ledger, next_id)
            assert not missing, (f"kill {kills}: acknowledged, but the recovered log only "
                                 f"reaches producer id {next_id}: {missing[:5]}")
            srv.start()
            assert not ledger.violations, ledger.violations[:5]
    finally:
        stop.set()
        for t in threads:
            t.join(10)
        code = srv.stop()
    print(f"{kills} kills in {time.monotonic() - started:.0f}s: {len(ledger.pids)} ids, "
          f"{len(ledger.blocks)} blocks, {len(ledger.txn)} transactional ids acknowledged; "
          f"{checking:.1f}s checking the recovered logs")
    assert not ledger.violations, ledger.violations[:5]
    assert code == 0
    assert kills >= min(KILLS, 50), f"only {kills} kills in {SECONDS}s"
    assert len(ledger.pids) > kills and len(ledger.blocks) > kills and ledger.txn
    client_pids = set(ledger.pids)
    for start, length, broker in ledger.blocks:
        inside = [p for p in client_pids if start <= p < start + length]
        assert not inside, (start, length, broker, inside[:5])
    # The log itself agrees: Kafka-format records, no overlapping or repeated block.
    audit = subprocess.run([sys.executable, "-m", "kraftpy.tools", "pid-audit",
                            str(srv.data_dir)], capture_output=True, text=True, timeout=120)
    assert audit.returncode == 0, audit.stdout[-2000:] + audit.stderr[-2000:]


def test_the_ledger_catches_what_the_run_must_not_do() -> None:
    ledger = Ledger()
    ledger.pid(5, "a")
    ledger.pid(5, "b")
    ledger.block(1000, 1000, 1)
    ledger.block(1500, 1000, 2)
    ledger.epoch("t", 7, 3)
    ledger.epoch("t", 7, 3)
    ledger.epoch("t", 8, 4)
    assert len(ledger.violations) == 4
    assert lost(ledger, 2500) == [] and lost(ledger, 2499) == ["block 1500+1000 of broker 2"]
    assert lost(ledger, 5) == ["block 1000+1000 of broker 1", "block 1500+1000 of broker 2",
                               "producer id 5 of b"]
