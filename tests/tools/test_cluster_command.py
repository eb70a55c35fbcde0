"""`kraftpy cluster`: three kraftpy controllers and three real Kafka 4.1 brokers in one command.

The cluster is the one docs/getting-started.md starts: the module runs that page's examples
as written (its `kraftpy serve` part too), then checks what a person would: a real producer
and consumer through the printed bootstrap servers, `status` naming three voters and three
brokers, and Ctrl-C leaving no process behind. Cheaper checks of bad starts, and of the
kernel killing every node when the command itself dies, run on controllers alone.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kraftpy.tools.local_cluster import STATE_FILE, pid_alive
from support.doc_examples import CLUSTER_PAGE as PAGE
from support.doc_examples import PageRun, cluster_base_port, examples
from support.kafka import LIBS

pytestmark = pytest.mark.slow


def _kraftpy(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 60
             ) -> subprocess.CompletedProcess[str]:
    # Kafka's jars are the suite's, never a copy in the user's cache.
    return subprocess.run([sys.executable, "-m", "kraftpy.tools", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "KRAFTPY_KAFKA_LIBS": str(LIBS), **(env or {})})


def _state(run: PageRun) -> dict:
    return json.loads((run.workdir / "kraftpy-cluster" / STATE_FILE).read_text())


def _processes_under(directory: Path) -> list[str]:
    """Command lines of every process that names `directory` (none may outlive the cluster)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(directory) in cmdline:
            found.append(f"{proc.name}: {cmdline[:200]}")
    return found


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory, kafka_jars: Path) -> Iterator[PageRun]:
    run = PageRun(tmp_path_factory.mktemp("getting-started"), kafka_libs=kafka_jars)
    try:
        for example in examples(PAGE):
            run.run(example)
        yield run
    finally:
        run.stop()


def test_the_page_starts_a_cluster_and_its_examples_run(page: PageRun) -> None:
    starts = [e for e in examples(PAGE) if e.long_running]
    assert [e.command for e in starts] == ["kraftpy serve",
                                           "kraftpy cluster --controllers 3 --brokers 3"]
    state = _state(page)
    assert [c["node_id"] for c in state["controllers"]] == [1, 2, 3]
    assert [b["node_id"] for b in state["brokers"]] == [4, 5, 6]
    printed = page.background[-1].output.read_text()
    assert f"bootstrap servers:    {state['bootstrap_servers']}" in printed
    for node in state["controllers"] + state["brokers"]:
        assert f"data {node['root']}/data" in printed


def test_a_producer_and_a_consumer_round_trip_through_the_bootstrap_servers(
        page: PageRun) -> None:
    from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
    from kafka.admin import NewTopic

    bootstrap = _state(page)["bootstrap_servers"]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30_000)
    try:
        admin.create_topics([NewTopic("round-trip", 3, 3)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True,
                             request_timeout_ms=30_000)
    sent = [f"record-{i}".encode() for i in range(30)]
    try:
        for value in sent:
            producer.send("round-trip", value)
        producer.flush(60)
    finally:
        producer.close(10)
    consumer = KafkaConsumer("round-trip", bootstrap_servers=bootstrap, group_id="round-trip",
                             auto_offset_reset="earliest", consumer_timeout_ms=30_000)
    try:
        got: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(got) < len(sent) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=1000).values():
                got += [r.value for r in records]
    finally:
        consumer.close()
    assert sorted(got) == sorted(sent)


def test_status_shows_three_voters_and_three_running_brokers(page: PageRun) -> None:
    done = _kraftpy("cluster", "status", "--json", cwd=page.workdir)
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    assert info["running"] and info["leader"] is not None
    nodes = {n["node_id"]: n for n in info["nodes"]}
    assert info["leader"]["node_id"] in (1, 2, 3)
    assert [i for i, n in nodes.items() if n["quorum"] == "voter"] == [1, 2, 3]
    for broker in (4, 5, 6):
        assert nodes[broker]["process"] == "running"
        assert nodes[broker]["registration"] == "unfenced"
        assert nodes[broker]["quorum"] == "observer"  # brokers fetch the log without a vote
        assert nodes[broker]["lag"] is not None
    text = _kraftpy("cluster", "status", cwd=page.workdir).stdout
    assert re.search(rf"quorum: leader {info['leader']['node_id']}, epoch \d+", text), text
    assert len(re.findall(r"^controller \d .* voter ", text, re.M)) == 3, text
    assert len(re.findall(r"^broker \d .* observer .* unfenced$", text, re.M)) == 3, text


def test_a_second_cluster_in_the_same_directory_or_on_its_ports_is_refused(
        page: PageRun, tmp_path: Path) -> None:
    again = _kraftpy("cluster", "--controllers", "3", "--brokers", "3", cwd=page.workdir)
    assert again.returncode == 2
    assert "a cluster is already running in" in again.stderr, again.stderr
    base = str(_state(page)["brokers"][0]["port"])
    ports = _kraftpy("cluster", "--brokers", "0", "--base-port", base, cwd=tmp_path)
    assert ports.returncode == 2
    assert "ports in use: controller 1 on" in ports.stderr, ports.stderr


def test_ctrl_c_stops_every_node_and_leaves_no_process(page: PageRun) -> None:
    state = _state(page)
    pids = [n["pid"] for n in state["controllers"] + state["brokers"]]
    started = time.monotonic()
    codes = page.stop()
    assert [code for _, code in codes] == [0, 0]  # the cluster, then the lone `serve`
    assert time.monotonic() - started < 90
    assert not [p for p in pids if pid_alive(p)]
    assert _processes_under(page.workdir / "kraftpy-cluster") == []
    stopped = _kraftpy("cluster", "status", cwd=page.workdir)
    assert "not running" in stopped.stdout
    # every broker stopped by a controlled shutdown the quorum's leader granted, then every
    # controller stopped cleanly
    controller_logs = "".join(Path(c["root"], "server.log").read_text(errors="replace")
                              for c in state["controllers"])
    for broker in state["brokers"]:
        log = Path(broker["root"], "kafka.log").read_text(errors="replace")
        assert f"[BrokerServer id={broker['node_id']}] shut down completed" in log, log[-2000:]
        assert re.search(rf"Broker {broker['node_id']} \(epoch \d+\): CONTROLLED_SHUTDOWN -> "
                         "SHUTDOWN_NOW", controller_logs)
    assert controller_logs.count("stopped cleanly") == 3


# --- cheaper: controllers alone, and starts that are refused -----------------------------------

def test_every_node_dies_with_the_command_even_on_kill_9(tmp_path: Path) -> None:
    base = cluster_base_port()
    out = tmp_path / "out"
    with out.open("wb") as f:
        proc = subprocess.Popen([sys.executable, "-m", "kraftpy.tools", "cluster",
                                 "--controllers", "2", "--brokers", "0", "--base-port",
                                 str(base), "--kafka-libs", str(LIBS)], cwd=tmp_path, stdout=f,
                                stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while "running; Ctrl-C" not in out.read_text():
            assert proc.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.1)
        pids = [c["pid"] for c in json.loads((tmp_path / "kraftpy-cluster" / STATE_FILE)
                                             .read_text())["controllers"]]
        assert all(pid_alive(p) for p in pids)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        deadline = time.monotonic() + 10
        while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in pids if pid_alive(p)]
        assert _processes_under(tmp_path / "kraftpy-cluster") == []
        # `status` tells the operator so; a new start runs on the same data, same ports
        status = _kraftpy("cluster", "status", cwd=tmp_path)
        assert "not running" in status.stdout and "stopped" in status.stdout
        before = json.loads((tmp_path / "kraftpy-cluster" / STATE_FILE).read_text())
        with out.open("wb") as f:
            proc = subprocess.Popen([sys.executable, "-m", "kraftpy.tools", "cluster",
                                     "--controllers", "2", "--brokers", "0", "--kafka-libs",
                                     str(LIBS)], cwd=tmp_path, stdout=f,
                                    stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 90
        while "running; Ctrl-C" not in out.read_text():
            assert proc.poll() is None, out.read_text()
            assert time.monotonic() < deadline, out.read_text()
            time.sleep(0.1)
        after = json.loads((tmp_path / "kraftpy-cluster" / STATE_FILE).read_text())
        assert after["cluster_id"] == before["cluster_id"]
        assert [c["port"] for c in after["controllers"]] == [base + 100, base + 101]
        assert json.loads(_kraftpy("cluster", "status", "--json", cwd=tmp_path).stdout
                          )["leader"] is not None
        proc.send_signal(signal.SIGINT)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
        _kraftpy("cluster", "stop", cwd=tmp_path)


def test_without_java_it_says_so_and_exits_2(tmp_path: Path) -> None:
    done = _kraftpy("cluster", cwd=tmp_path, env={"PATH": "/nonexistent"})
    assert done.returncode == 2
    assert "needs `java` on the PATH" in done.stderr, done.stderr
    assert not (tmp_path / "kraftpy-cluster").exists()  # nothing written


def test_without_maven_when_the_jars_are_missing_it_says_so_and_exits_2(tmp_path: Path) -> None:
    import shutil

    bin_dir = tmp_path / "bin"  # java, and no mvn
    bin_dir.mkdir()
    (bin_dir / "java").symlink_to(shutil.which("java") or "/nonexistent")
    done = _kraftpy("cluster", "--kafka-libs", str(tmp_path / "no-jars"), cwd=tmp_path,
                    env={"PATH": str(bin_dir)})
    assert done.returncode == 2
    assert "needs `mvn` on the PATH" in done.stderr, done.stderr
    assert not (tmp_path / "kraftpy-cluster").exists()


def test_status_of_a_directory_without_a_cluster(tmp_path: Path) -> None:
    done = _kraftpy("cluster", "status", "--dir", str(tmp_path / "none"), cwd=tmp_path)
    assert done.returncode == 2
    assert "no cluster in" in done.stderr and "kraftpy cluster --dir" in done.stderr


def test_bad_input_is_refused_with_exit_2_and_nothing_started(tmp_path: Path) -> None:
    cases = {("--controllers", "0"): "--controllers 0: kraftpy cluster runs 1 to 9",
             ("--brokers", "10"): "--brokers 10: kraftpy cluster runs 0 to 9",
             ("--broker-override", "num.partitions"): "an override expects key=value",
             ("--base-port", "80"): "--base-port 80 is not a port"}
    for args, message in cases.items():
        done = _kraftpy("cluster", "--dir", str(tmp_path / "c"), *args, cwd=tmp_path)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr, (args, done.stderr)
    assert not (tmp_path / "c" / STATE_FILE).exists()
