"""The metrics endpoint of a real `kraftpy serve`: names, types and values while brokers
register and take blocks and clients take ids; readiness during recovery; JSON log lines."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from kraftpy.controller.metrics import CATALOG, exported_names
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.tools.kafka_connection import KafkaConnection
from support.broker_sim import BrokerSim
from support.metrics_scrape import get, scrape, value
from support.server import KraftpyServer, free_port, running_server

P = "kafka_controller_kafkacontroller_"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory):
    port = free_port()
    with running_server(tmp_path_factory.mktemp("metrics"),
                        {"kraftpy.metrics.listener": f"http://127.0.0.1:{port}"}) as srv:
        srv.metrics_url = f"http://127.0.0.1:{port}"  # type: ignore[attr-defined]
        yield srv


def take_ids(srv: KraftpyServer, wanted: int) -> tuple[int, int]:
    """Idempotent InitProducerId until `wanted` ids came back: (requests sent, ids)."""
    sent, ids = 0, set()
    with KafkaConnection((srv.host, srv.client_port)) as conn:
        while len(ids) < wanted:
            r = conn.request(InitProducerIdRequest(transactional_id=None,
                                                   transaction_timeout_ms=60000), 4)
            sent += 1
            if r.error_code == 0:
                ids.add(r.producer_id)
            else:
                time.sleep(0.01)  # COORDINATOR_LOAD_IN_PROGRESS: the first block's fsync
    return sent, len(ids)


def test_scrape_while_brokers_register_and_clients_take_ids(node: KraftpyServer) -> None:
    url = node.metrics_url  # type: ignore[attr-defined]
    assert get(url + "/ready") == (200, "ready\n")
    blocks = {31: 3, 32: 2}
    brokers = [BrokerSim((node.host, node.controller_port), b, node.cluster_id())
               for b in blocks]
    for b in brokers:
        b.register()
        b.wait_unfenced()
        for _ in range(blocks[b.broker_id]):
            b.allocate()
        for _ in range(8):  # one request in 8 per API and version is timed
            assert b.heartbeat().error_code == 0
    sent, ids = take_ids(node, 2500)  # past the first block: own blocks turn over
    m = scrape(url)

    # Every series shown is in the catalog (or the process's own), with the catalog's type.
    types = {e.name: e.type for e in CATALOG}
    for name, (kind, _) in m.items():
        if name.startswith(("process_", "python_")):
            continue
        assert name in exported_names(), name
        base = name.removesuffix("_count").removesuffix("_sum")
        assert kind == types.get(base, types.get(name)), name

    assert value(m, P + "activecontrollercount") == 1
    assert value(m, P + "newactivecontrollerscount") == 1
    assert value(m, "kafka_server_raft_metrics_current_leader") == 1  # node.id
    assert value(m, "kafka_server_metadataloader_currentcontrollerid") == 1
    assert value(m, P + "activebrokercount") == 2
    assert value(m, P + "fencedbrokercount") == 0
    for b in blocks:
        assert value(m, P + "brokerregistrationstate", broker=str(b)) == 30  # ACTIVE
        assert 0 <= value(m, P + "timesincelastheartbeatreceivedms", broker=str(b)) <= 9000
    hwm = value(m, "kafka_server_raft_metrics_high_watermark")
    assert value(m, P + "lastcommittedrecordoffset") == hwm - 1
    # The leader applies a record as it hands it to the Raft core, which writes it to the log
    # after the append linger: the last applied offset is never behind the log, maybe ahead.
    assert value(m, P + "lastappliedrecordoffset") >= \
        value(m, "kafka_server_raft_metrics_log_end_offset") - 1 >= hwm - 1
    assert value(m, "kafka_server_raft_metrics_commit_latency_avg") > 0
    assert value(m, "kafka_server_raft_metrics_append_records_rate") > 0
    assert value(m, "kafka_server_metadataloader_currentmetadataversion") >= 7

    # Requests by API and version, as Kafka's RequestMetrics; every InitProducerId counted,
    # quick answers included.
    requests = "kafka_network_requestmetrics_requests_total"
    assert m[requests][0] == "counter"
    assert value(m, requests, request="InitProducerId", version="4") == sent
    assert value(m, requests, request="AllocateProducerIds", version="0") == sum(blocks.values())
    assert value(m, requests, request="BrokerRegistration", version="4") == 2
    assert value(m, "kafka_network_requestmetrics_totaltimems_count",
                 request="AllocateProducerIds") == sum(blocks.values())
    beats = value(m, requests, request="BrokerHeartbeat", version="1")
    assert beats >= 16
    assert value(m, "kafka_network_requestmetrics_totaltimems_count",
                 request="BrokerHeartbeat") == beats
    assert value(m, "kafka_network_requestmetrics_totaltimems",
                 request="BrokerHeartbeat", quantile="0.99") > 0

    # Blocks per broker as pid-audit finds them in the log; the node's own ids handed out.
    audit = subprocess.run([sys.executable, "-m", "kraftpy.tools", "pid-audit", "--json",
                            str(node.data_dir)], capture_output=True, text=True, check=True)
    per_broker: dict[int, int] = {}
    for block in json.loads(audit.stdout)["blocks"]:
        per_broker[block["broker_id"]] = per_broker.get(block["broker_id"], 0) + 1
    granted = {int(dict(k)["broker_id"]): v
               for k, v in m["kraftpy_producer_id_blocks_granted_total"][1].items()}
    assert granted == per_broker
    assert granted[31] == 3 and granted[32] == 2 and granted[1] >= 3  # node 1: its own blocks
    assert value(m, "kraftpy_idempotent_producer_ids_total") == ids
    rounds = value(m, "kraftpy_group_commit_records_count")
    assert rounds >= 1 and value(m, "kraftpy_commit_fsync_seconds_count") == rounds
    assert value(m, "kraftpy_group_commit_records_sum") >= sum(blocks.values()) + 2
    for b in brokers:
        b.close()


def test_http_answers_bad_requests_without_touching_the_node(node: KraftpyServer) -> None:
    url = node.metrics_url  # type: ignore[attr-defined]
    assert get(url + "/nothing")[0] == 404
    request = urllib.request.Request(url + "/metrics", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(request, timeout=5)
    assert err.value.code == 405
    import socket

    with socket.create_connection((node.host, int(url.rsplit(":", 1)[1])), timeout=5) as s:
        s.sendall(b"not http at all\r\n\r\n")
        assert s.recv(100).startswith(b"HTTP/1.1 400 ")
    openmetrics = urllib.request.Request(
        url + "/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
    with urllib.request.urlopen(openmetrics, timeout=5) as answer:
        assert answer.headers["Content-Type"].startswith("application/openmetrics-text")
        assert answer.read().decode().endswith("# EOF\n")
    assert get(url + "/ready") == (200, "ready\n")  # and the node still serves


def build_long_log(data: Path, records: int) -> None:
    """A formatted data dir whose metadata log holds `records` NoOpRecords."""
    from kraftpy.controller.log.storage import MetadataStorage, format_storage
    from kraftpy.protocol.metadata_frame import encode_metadata_record
    from kraftpy.protocol.record_batch import build_record_batch
    from kraftpy.protocol.records.no_op_record import NoOpRecord

    format_storage(data, cluster_id="MkU3OEVBNTcwNTJENDM2Qg", node_id=1, metadata_version=27)
    storage = MetadataStorage.open(data, node_id=1)
    mlog = storage.metadata
    noop = encode_metadata_record(NoOpRecord(), 0)
    offset = mlog.log_end_offset
    while offset < records:
        n = min(2000, records - offset)
        mlog.append_batch(build_record_batch([noop] * n, base_offset=offset,
                                             partition_leader_epoch=1,
                                             timestamp=1_700_000_000_000 + offset))
        offset += n
    mlog.flush()
    storage.close()


def test_not_ready_until_recovery_ends(tmp_path: Path) -> None:
    port = free_port()
    srv = KraftpyServer(tmp_path, {"kraftpy.metrics.listener": f"http://127.0.0.1:{port}"})
    build_long_log(srv.data_dir, 600_000)
    (srv.data_dir / ".kafka_cleanshutdown").unlink(missing_ok=True)  # recovery checks all
    url = f"http://127.0.0.1:{port}"
    with srv.log_path.open("ab") as log:
        srv.proc = subprocess.Popen(srv.command(), stdout=log, stderr=subprocess.STDOUT,
                                    cwd=srv.root)
    try:
        seen, active_while_recovering = [], []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert srv.proc.poll() is None, srv.log_tail()
            try:
                status, body = get(url + "/ready", timeout=2)
            except OSError:  # not bound yet: the interpreter is still starting
                time.sleep(0.02)
                continue
            seen.append((status, body))
            if status == 200:
                break
            m = scrape(url)  # one scrape is one moment: active exactly when ready
            active_while_recovering.append((value(m, P + "activecontrollercount"),
                                            value(m, "kraftpy_node_ready")))
            time.sleep(0.02)
        assert seen and seen[-1] == (200, "ready\n"), seen[-3:]
        assert (503, "recovering the metadata log\n") in seen  # before recovery ended
        assert (0, 0) in active_while_recovering
        assert set(active_while_recovering) <= {(0, 0), (1, 1)}
        assert "recovered" in srv.log_text()
        # Ready means the listeners answer: a broker registers at once.
        broker = BrokerSim((srv.host, srv.controller_port), 5, srv.cluster_id())
        assert broker.register() > 0
        broker.close()
        assert value(scrape(url), P + "activecontrollercount") == 1
    finally:
        assert srv.stop() == 0
    assert "stopped cleanly" in srv.log_text()


def test_json_log_lines_carry_the_same_events(tmp_path: Path) -> None:
    port = free_port()
    with running_server(tmp_path, {"kraftpy.metrics.listener": f"http://127.0.0.1:{port}"},
                        extra_args=["--log-format", "json"]) as srv:
        broker = BrokerSim((srv.host, srv.controller_port), 7, srv.cluster_id())
        broker.register()
        broker.wait_unfenced()
        broker.close()
    lines = [line for line in srv.log_text().splitlines()
             if line and not line.startswith("=== start")]
    events = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= e.keys() for e in events)
    messages = [e["message"] for e in events]
    assert any(m.startswith("metrics listener on http://127.0.0.1:") for m in messages)
    assert any(m.startswith("kraftpy node 1 serving cluster ") for m in messages)
    assert any(m.startswith("Broker 7 (epoch") and "FENCED -> UNFENCED" in m for m in messages)
    assert messages[-1] == "stopped cleanly"


def test_a_json_line_holds_what_the_text_line_says() -> None:
    import logging

    from kraftpy.tools.cmd_serve import LOG_FORMAT, JsonFormatter

    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord("kraftpy.quorum", logging.WARNING, __file__, 1,
                                   "Producer ids [%d, %d] to broker %d", (0, 999, 4),
                                   sys.exc_info())
    text = logging.Formatter(LOG_FORMAT).format(record)
    line = JsonFormatter().format(record)
    assert "\n" not in line  # one line, whatever the message holds
    event = json.loads(line)
    assert event["message"] == "Producer ids [0, 999] to broker 4"
    assert f"{event['level']} {event['message']} ({event['logger']})" in text
    assert event["exception"] in text and "ValueError: boom" in event["exception"]
    assert event["time"].endswith("Z") and event["time"][:4].isdigit()


def test_a_bad_listener_property_stops_serve_with_exit_2(tmp_path: Path) -> None:
    srv = KraftpyServer(tmp_path, {"kraftpy.metrics.listener": "127.0.0.1:9404"})
    proc = subprocess.run(srv.command(), capture_output=True, text=True, cwd=tmp_path,
                          timeout=60)
    assert proc.returncode == 2
    assert "kraftpy.metrics.listener: '127.0.0.1:9404' is not http://host:port" in proc.stderr
