"""Metric names as the JMX exporter renders Kafka's MBeans; the quantiles and windows of the
node's timings; the listener property."""

from __future__ import annotations

import math

import pytest
from kraftpy.controller.config import ConfigError, load_config
from kraftpy.controller.metrics import CATALOG, default_name, exported_names, yammer_name
from kraftpy.controller.metrics_http import MetricsAddress, metrics_address
from kraftpy.controller.metrics_stats import Timings

P = "kafka_controller_kafkacontroller_"


@pytest.mark.parametrize(("mbean", "name"), [
    ("kafka.controller:type=KafkaController,name=ActiveControllerCount",
     "kafka_controller_kafkacontroller_activecontrollercount"),
    ("kafka.controller:type=ControllerEventManager,name=EventQueueTimeMs",
     "kafka_controller_controllereventmanager_eventqueuetimems"),
    ("kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Produce,version=9",
     "kafka_network_requestmetrics_requests_total"),
    ("kafka.server:type=SnapshotEmitter,name=LatestSnapshotGeneratedAgeMs",
     "kafka_server_snapshotemitter_latestsnapshotgeneratedagems"),
])
def test_yammer_mbeans_take_the_exporters_kafka_rules(mbean: str, name: str) -> None:
    assert yammer_name(mbean) == name


def test_kafka_metrics_take_the_exporters_default_names() -> None:
    assert default_name("kafka.server:type=raft-metrics", "current-leader") == \
        "kafka_server_raft_metrics_current_leader"
    assert default_name("kafka.server:type=raft-metrics", "commit-latency-avg") == \
        "kafka_server_raft_metrics_commit_latency_avg"


def test_the_catalog_holds_kip_631s_list_once_each() -> None:
    names = [e.name for e in CATALOG]
    assert len(names) == len(set(names))
    for kafka_name in ("ActiveControllerCount", "GlobalTopicCount", "GlobalPartitionCount",
                       "OfflinePartitionsCount", "FencedBrokerCount", "ActiveBrokerCount",
                       "LastAppliedRecordOffset", "LastCommittedRecordOffset",
                       "LastAppliedRecordLagMs", "MetadataErrorCount",
                       "TimedOutBrokerHeartbeatCount", "NewActiveControllersCount"):
        assert P + kafka_name.lower() in names
    for attribute in ("current-leader", "current-epoch", "high-watermark", "log-end-offset",
                      "commit-latency-avg", "commit-latency-max", "append-records-rate",
                      "fetch-records-rate", "election-latency-avg"):
        assert "kafka_server_raft_metrics_" + attribute.replace("-", "_") in names
    assert "kafka_controller_controllereventmanager_eventqueueprocessingtimems_count" in \
        exported_names()


def test_quantiles_interpolate_as_a_yammer_snapshot() -> None:
    t = Timings()
    assert t.quantiles()[0] == ("0.50", 0.0)  # empty: zeros, as an empty histogram
    for i, v in enumerate([1.0, 2.0, 3.0, 4.0]):
        t.observe(v, float(i))
    q = dict(t.quantiles())
    # Yammer: pos = q * (n + 1) = 2.5 for the median of 4 -> between the 2nd and 3rd value.
    assert q["0.50"] == 2.5
    assert q["0.75"] == 3.75
    assert q["0.99"] == 4.0
    assert (t.count, t.sum) == (4, 10.0)


def test_window_average_and_max_forget_old_samples() -> None:
    t = Timings()
    t.observe(9.0, 0.0)
    t.observe(1.0, 100.0)
    t.observe(3.0, 130.0)
    assert t.window(140.0) == (2.0, 3.0)
    avg, top = t.window(1000.0)
    assert math.isnan(avg) and math.isnan(top)  # nothing in the last 60 s: NaN, as Kafka


def test_the_listener_property() -> None:
    def address(value: str) -> MetricsAddress | None:
        return metrics_address(load_config(None, [f"kraftpy.metrics.listener={value}"]))

    assert metrics_address(load_config(None, [])) is None  # off by default
    assert address("") is None
    assert address("http://127.0.0.1:9404") == MetricsAddress("127.0.0.1", 9404)
    assert address("http://[::1]:0/") == MetricsAddress("::1", 0)
    assert str(address("http://0.0.0.0:9404")) == "http://0.0.0.0:9404"
    for bad in ("127.0.0.1:9404", "https://h:1", "http://h", "http://h:99999"):
        with pytest.raises(ConfigError, match="kraftpy.metrics.listener"):
            address(bad)
