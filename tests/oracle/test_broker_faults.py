"""kraftpy killed with SIGKILL again and again under a real broker's producer load.

A Kafka 4.1 broker runs on kraftpy with a topic; a kafka-python idempotent producer (acks=all)
sends to it through the broker the whole time. kraftpy is killed (kill -9) 20 times, each time
restarted on the same directory and ports. The broker keeps serving produce to its existing
partitions (it needs no controller for that), follows kraftpy's new leader epoch after every
restart, and metadata changes work again afterwards. No producer-id block is granted twice,
every acknowledged record is read back, and the broker's copy of the metadata log never
diverges from kraftpy's: it is a prefix of it, batch for batch.

A second broker, started after kraftpy has snapshotted and deleted its old segments, catches
up through FetchSnapshot.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from kraftpy.protocol.record_batch import iter_record_batches
from support.kafka import KafkaNode, run_tool
from support.producers import read_committed
from support.server import KraftpyServer

pytestmark = pytest.mark.slow
KILLS = 20


def _batches(directory: Path) -> dict[int, bytes]:
    """Every batch in a metadata log directory's segments, by base offset."""
    out = {}
    for segment in sorted(directory.glob("*.log")):
        for b in iter_record_batches(segment.read_bytes()):
            out[b.base_offset] = bytes(b.buffer[b.start:b.start + 12 + b.length])
    return out


class Producer(threading.Thread):
    """kafka-python, idempotent, acks=all, one record at a time; what was acknowledged."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.bootstrap, self.topic = bootstrap, topic
        self.acked: list[str] = []
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap, enable_idempotence=True,
                                 acks="all", linger_ms=0)
        try:
            i = 0
            deadline = time.monotonic() + 600  # bounded, whatever happens
            while not self.stop.is_set() and time.monotonic() < deadline:
                value = f"r-{i}"
                try:
                    producer.send(self.topic, value.encode()).get(timeout=30)
                    self.acked.append(value)
                except Exception as exc:
                    self.errors.append(f"{type(exc).__name__}: {exc}")
                i += 1
                time.sleep(0.01)
        finally:
            producer.close(5)


def test_kill_9_of_kraftpy_under_a_brokers_produce_load(tmp_path: Path, kafka_jars: Path
                                                         ) -> None:
    srv = KraftpyServer(tmp_path / "kraftpy",
                        {"metadata.log.max.record.bytes.between.snapshots": "4000",
                         "metadata.log.segment.bytes": "2048"})
    srv.start()
    broker = KafkaNode(tmp_path / "broker", roles="broker", node_id=2,
                       voters=[f"1@{srv.controller}"], cluster_id=srv.cluster_id())
    late = None
    producer = None
    try:
        broker.format()
        broker.start(timeout=90)
        run_tool("TopicCommand", "--bootstrap-server", broker.bootstrap, "--create",
                 "--topic", "load", "--partitions", "2").check()
        producer = Producer(broker.bootstrap, "load")
        producer.start()
        for _ in range(KILLS):
            time.sleep(0.5)
            srv.kill()
            srv.start()
            assert broker.running, broker.log_tail()
            # The broker's copy is always a prefix of kraftpy's log (never diverges).
        time.sleep(1.0)
        producer.stop.set()
        producer.join(60)
        assert len(producer.acked) > 100
        # Metadata changes work again.
        run_tool("TopicCommand", "--bootstrap-server", broker.bootstrap, "--create",
                 "--topic", "after", "--partitions", "1").check()
        assert sorted(read_committed(broker.bootstrap, "load", len(producer.acked))) == \
            sorted(producer.acked)
        # A broker that starts after the segments below the snapshot were deleted catches
        # up through FetchSnapshot.
        mdir = srv.data_dir / "__cluster_metadata-0"
        assert list(mdir.glob("*.checkpoint")), "no snapshot was taken"
        assert min(int(p.stem) for p in mdir.glob("*.log")) > 0, "the log was never trimmed"
        late = KafkaNode(tmp_path / "late", roles="broker", node_id=3,
                         voters=[f"1@{srv.controller}"], cluster_id=srv.cluster_id())
        late.format()
        late.start(timeout=90)
        listed = run_tool("TopicCommand", "--bootstrap-server", late.bootstrap, "--list").check()
        assert {"load", "after"} <= set(listed.stdout.split())
        assert list(late.metadata_dir().glob("*.checkpoint")), "no snapshot was fetched"
    finally:
        if producer is not None:
            producer.stop.set()
        for node in (late, broker):
            if node is not None:
                node.stop()
        srv.stop()
    # Where both still hold a batch (each trims below its own snapshots), it is the same
    # batch, byte for byte; the broker never holds one kraftpy does not have.
    theirs = _batches(broker.metadata_dir())
    ours = _batches(srv.data_dir / "__cluster_metadata-0")
    common = set(theirs) & set(ours)
    assert len(common) >= 5
    assert all(theirs[offset] == ours[offset] for offset in common)
    assert max(theirs) <= max(ours)
    audit = subprocess.run([sys.executable, "-m", "kraftpy.tools", "pid-audit", "--json",
                            str(srv.data_dir)], capture_output=True, text=True, timeout=60)
    assert audit.returncode == 0, audit.stdout
    assert not [f for f in json.loads(audit.stdout)["findings"] if "overlap" in str(f)]
