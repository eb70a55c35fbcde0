"""`kraftpy serve` as a real process: start, answer, SIGTERM, restart, refuse bad setups."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.tools.kafka_connection import KafkaConnection
from support.server import KraftpyServer, free_port, probe, running_server


def init_pid(srv: KraftpyServer, txn: str | None = None, pid: int = -1, epoch: int = -1):
    with KafkaConnection((srv.host, srv.client_port), timeout=5.0) as conn:
        deadline = time.monotonic() + 10
        while True:
            r = conn.request(InitProducerIdRequest(
                transactional_id=txn, transaction_timeout_ms=60000, producer_id=pid,
                producer_epoch=epoch), 4)
            if r.error_code != 14 or time.monotonic() > deadline:
                return r
            time.sleep(0.05)


def test_bare_serve_formats_its_data_dir_once_and_says_so(tmp_path: Path) -> None:
    ports = (free_port(), free_port())
    cmd = [sys.executable, "-m", "kraftpy.tools", "serve", "--override",
           f"listeners=PLAINTEXT://127.0.0.1:{ports[0]},CONTROLLER://127.0.0.1:{ports[1]}"]
    for run in range(2):
        log_path = tmp_path / f"run{run}.log"
        with log_path.open("wb") as log:
            proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while not probe("127.0.0.1", ports[0]) and time.monotonic() < deadline:
                assert proc.poll() is None, log_path.read_text()
                time.sleep(0.05)
        finally:
            proc.terminate()
            assert proc.wait(20) == 0, log_path.read_text()
        text = log_path.read_text()
        assert "embedded default configuration" in text
        assert ("formatted" in text) == (run == 0), text
        assert "stopped cleanly" in text
    assert (tmp_path / "kraftpy-data" / "meta.properties").exists()
    assert (tmp_path / "kraftpy-data" / "__cluster_metadata-0").is_dir()


def test_sigterm_exits_zero_and_a_restart_bumps_the_leader_epoch(tmp_path: Path) -> None:
    srv = KraftpyServer(tmp_path)
    srv.start()
    first = init_pid(srv)
    assert first.error_code == 0
    txn = init_pid(srv, "serve-test")
    assert (txn.error_code, txn.producer_epoch) == (0, 0)
    assert srv.stop() == 0
    quorum = (srv.data_dir / "__cluster_metadata-0" / "quorum-state").read_text()
    assert '"leaderEpoch":1' in quorum
    srv.start()
    try:
        assert '"leaderEpoch":2' in (srv.data_dir / "__cluster_metadata-0"
                                     / "quorum-state").read_text()
        again = init_pid(srv, "serve-test", txn.producer_id, txn.producer_epoch)
        assert (again.error_code, again.producer_id, again.producer_epoch) == (
            0, txn.producer_id, 1)
        fresh = init_pid(srv)
        assert fresh.producer_id >= first.producer_id + 1000 - first.producer_id % 1000
    finally:
        assert srv.stop() == 0
    text = srv.log_text()
    assert "received SIGTERM" in text and "stopped cleanly" in text


def test_a_node_stopped_as_it_starts_commits_what_it_wrote(tmp_path: Path) -> None:
    # SIGTERM at once: the bootstrap records (still lingering in the Raft core, which waits
    # controller.quorum.append.linger.ms for more) are committed before the node stops, so
    # the next start finds the cluster bootstrapped and does not bootstrap it again.
    srv = KraftpyServer(tmp_path, {"controller.quorum.append.linger.ms": "500"})
    srv.start()
    assert srv.stop() == 0
    from kraftpy.controller.log.partition_log import PartitionLog
    from kraftpy.protocol.metadata_frame import decode_metadata_record

    log = PartitionLog.open(srv.data_dir / "__cluster_metadata-0", read_only=True)
    names = [type(decode_metadata_record(v)[0]).__name__
             for b in log.read() if not b.is_control for v in b.values()]
    log.close()
    assert "FeatureLevelRecord" in names, names
    srv.start()
    assert srv.stop() == 0
    assert srv.log_text().count("Bootstrapping metadata.version") == 1


def test_a_locked_data_dir_and_a_busy_port_are_refused_clearly(tmp_path: Path) -> None:
    with running_server(tmp_path / "a") as srv:
        twin = KraftpyServer(tmp_path / "b", {"metadata.log.dir": str(srv.data_dir)})
        proc = subprocess.run(twin.command(), capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1
        assert "cannot start" in proc.stderr and "lock" in proc.stderr.lower(), proc.stderr
        clash = KraftpyServer(tmp_path / "c", client_port=srv.client_port)
        proc = subprocess.run(clash.command(), capture_output=True, text=True, timeout=60)
        assert proc.returncode == 1
        assert "cannot listen" in proc.stderr, proc.stderr
        assert probe(srv.host, srv.client_port)


def test_bad_configuration_exits_two_naming_the_key(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kraftpy.tools", "serve", "--override", "node.id=abc"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "node.id" in proc.stderr
    assert not (tmp_path / "kraftpy-data").exists()


def test_snapshots_follow_the_policy_and_a_restart_loads_them(tmp_path: Path) -> None:
    from support.broker_sim import BrokerSim

    srv = KraftpyServer(tmp_path, {"metadata.log.max.record.bytes.between.snapshots": "2000",
                                   "metadata.log.segment.bytes": "4096"})
    srv.start()
    try:
        broker = BrokerSim((srv.host, srv.controller_port), 3, srv.cluster_id())
        broker.register()
        broker.wait_unfenced()
        blocks = [broker.allocate()[0] for _ in range(150)]
        time.sleep(0.5)
        broker.close()
    finally:
        assert srv.stop() == 0
    mdir = srv.data_dir / "__cluster_metadata-0"
    snapshots = sorted(mdir.glob("*.checkpoint"))
    assert snapshots, sorted(p.name for p in mdir.iterdir())
    assert "snapshot" in srv.log_text()
    srv.start()
    try:
        last_start = srv.log_text().rsplit("=== start", 1)[1]
        loaded = re.search(r"recovered .*?: (\d+) snapshot records \((\S+)\)", last_start)
        assert loaded and int(loaded[1]) > 0, last_start
        broker = BrokerSim((srv.host, srv.controller_port), 3, srv.cluster_id(),
                           incarnation=broker.incarnation)
        broker.register()
        broker.wait_unfenced()
        assert broker.allocate()[0] > max(blocks)
        assert init_pid(srv).producer_id > max(blocks)
    finally:
        assert srv.stop() == 0
