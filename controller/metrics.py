"""The node's metrics, named as Kafka operators' dashboards and alerts know them.

Kafka exposes its controller's metrics as JMX MBeans, and Prometheus reads them through the
JMX exporter. Names here are what the exporter makes of Kafka 4.1's MBeans:

- Yammer metrics (`kafka.controller`, `kafka.server` gauges, `kafka.network` request
  metrics) by the rules of the exporter's Kafka example (`example_configs/kafka-2_0_0.yml`,
  `lowercaseOutputName: true`): a gauge's Value is `kafka_<domain>_<type>_<name>`, a
  `...PerSec` meter's Count is `kafka_<domain>_<type>_<name without PerSec>_total`, a
  histogram's percentiles are `kafka_<domain>_<type>_<name>{quantile="0.99"}` beside
  `..._count`; further MBean keys (request, version, broker) become labels;
- Kafka's own metrics (`kafka.server:type=raft-metrics`), which those rules leave out, by
  the exporter's default naming: `<domain>_<type>_<attribute>` with every character that
  may not be in a name made `_` (`kafka_server_raft_metrics_current_leader`), as the Strimzi
  and Confluent setups name them too.

kraftpy's own metrics, where Kafka has none, are `kraftpy_*`. `CATALOG` lists them all with
the MBean each comes from. Everything is read when scraped (`NodeCollector.collect`, on the
event loop, where the state is never half-changed), from state the node keeps anyway; the few
counters the hot paths keep for it are in `metrics_stats` and `metrics_requests`.
"""

from __future__ import annotations

import math
import re
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kraftpy.controller import metrics_requests
from kraftpy.controller.metrics_stats import WINDOW_S, Timings
from kraftpy.protocol.registry import API_KEYS
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

GAUGE, COUNTER, SUMMARY = "gauge", "counter", "summary"


def yammer_name(mbean: str) -> str:
    """The exporter's Kafka rules on a Yammer MBean `kafka.D:type=T,name=N[,k=v...]`:
    `kafka_d_t_n` (a meter `NPerSec` gives `kafka_d_t_n_total`), lowercased."""
    domain, _, keys = mbean.partition(":")
    props = dict(item.split("=", 1) for item in keys.split(","))
    name = props["name"]
    if "PerSec" in name:
        return f"{domain}_{props['type']}_{name[:name.index('PerSec')]}_total".replace(
            ".", "_").lower()
    return f"{domain}_{props['type']}_{name}".replace(".", "_").lower()


def default_name(mbean: str, attribute: str) -> str:
    """The exporter's default naming of `domain:type=T` attribute `A`: `domain_T_A` with each
    character outside [a-zA-Z0-9:_] made `_`, runs of `_` made one."""
    domain, _, keys = mbean.partition(":")
    raw = f"{domain}_{keys.split('=', 1)[1]}_{attribute}"
    return re.sub(r"_+", "_", re.sub(r"[^a-zA-Z0-9:_]", "_", raw)).lower()


@dataclass(frozen=True)
class Entry:
    """One exported metric: its name, type, the Kafka MBean it renders (None: kraftpy's own),
    what it means here, and the labels it carries."""

    name: str
    type: str
    kafka: str | None
    help: str
    labels: tuple[str, ...] = ()


_KC = "kafka.controller:type=KafkaController,name="
_CEM = "kafka.controller:type=ControllerEventManager,name="
_RAFT = "kafka.server:type=raft-metrics"
_RM = "kafka.network:type=RequestMetrics,name="


def _y(mbean: str, type_: str, help_: str, labels: tuple[str, ...] = ()) -> Entry:
    return Entry(yammer_name(mbean), type_, mbean, help_, labels)


def _raft(attribute: str, help_: str) -> Entry:
    return Entry(default_name(_RAFT, attribute), GAUGE, f"{_RAFT} {attribute}", help_)


CATALOG: tuple[Entry, ...] = (
    _y(_KC + "ActiveControllerCount", GAUGE,
       "1 while this node is the active controller (recovered, running), else 0"),
    _y(_KC + "NewActiveControllersCount", GAUGE,
       "Times this node saw a new active controller (itself, once activated)"),
    _y(_KC + "GlobalTopicCount", GAUGE, "Topics in the metadata"),
    _y(_KC + "GlobalPartitionCount", GAUGE, "Partitions in the metadata"),
    _y(_KC + "OfflinePartitionsCount", GAUGE, "Partitions without a leader"),
    _y(_KC + "PreferredReplicaImbalanceCount", GAUGE,
       "Partitions whose leader is not their first replica"),
    _y(_KC + "ActiveBrokerCount", GAUGE, "Registered brokers that are not fenced"),
    _y(_KC + "FencedBrokerCount", GAUGE, "Registered brokers that are fenced"),
    _y(_KC + "ControlledShutdownBrokerCount", GAUGE, "Brokers in controlled shutdown"),
    _y(_KC + "BrokerRegistrationState,broker=B", GAUGE,
       "Per broker: 10 fenced, 20 controlled shutdown, 30 active (Kafka's codes)",
       ("broker",)),
    _y(_KC + "TimeSinceLastHeartbeatReceivedMs,broker=B", GAUGE,
       "Per broker: ms since its last heartbeat, at most broker.session.timeout.ms",
       ("broker",)),
    _y(_KC + "LastAppliedRecordOffset", GAUGE, "Offset of the last metadata record applied"),
    _y(_KC + "LastCommittedRecordOffset", GAUGE,
       "Offset of the last metadata record made durable (high watermark - 1)"),
    _y(_KC + "LastAppliedRecordTimestamp", GAUGE,
       "Append time (ms) of the batch holding the last record applied"),
    _y(_KC + "LastAppliedRecordLagMs", GAUGE,
       "0 on the active controller, which applies records as it appends them (as Kafka)"),
    _y(_KC + "MetadataErrorCount", GAUGE,
       "Metadata errors met; always 0 while serving (a replay error stops the node)"),
    _y(_KC + "TimedOutBrokerHeartbeatCount", GAUGE,
       "Heartbeats that timed out in the queue; kraftpy answers every one (0)"),
    _y(_CEM + "EventQueueTimeMs", SUMMARY,
       "Per drain pass of the write queue: how long its first request waited (ms)"),
    _y(_CEM + "EventQueueProcessingTimeMs", SUMMARY,
       "Per drain pass of the write queue: how long handling it took (ms)"),
    _raft("current-leader", "The quorum leader's id (this node once active), -1 unknown"),
    _raft("current-vote", "The id voted for in this epoch (this node), -1 none"),
    _raft("current-epoch", "The quorum's leader epoch"),
    _raft("high-watermark", "The metadata log's high watermark, -1 unknown"),
    _raft("log-end-offset", "The metadata log's end offset"),
    _raft("log-end-epoch", "The leader epoch of the metadata log's end"),
    _raft("number-of-voters", "Voters in the quorum"),
    _raft("number-unknown-voter-connections", "Voters not connected (kraftpy: 0)"),
    _raft("commit-latency-avg", "Average ms of a commit round's fsync over the last 60 s"),
    _raft("commit-latency-max", "Longest commit round fsync (ms) in the last 60 s"),
    _raft("append-records-rate", "Records appended to the metadata log per second"),
    _raft("fetch-records-rate", "Records this node fetched as a follower per second (it leads: 0)"),
    _raft("election-latency-avg", "Average election ms in the window (none held: NaN)"),
    _raft("election-latency-max", "Longest election ms in the window (none held: NaN)"),
    _y("kafka.server:type=SnapshotEmitter,name=LatestSnapshotGeneratedAgeMs", GAUGE,
       "ms since the newest snapshot file was written (since start when there is none)"),
    _y("kafka.server:type=SnapshotEmitter,name=LatestSnapshotGeneratedBytes", GAUGE,
       "Size of the newest snapshot file (0 when there is none)"),
    _y("kafka.server:type=MetadataLoader,name=CurrentMetadataVersion", GAUGE,
       "The finalized metadata.version feature level"),
    _y("kafka.server:type=MetadataLoader,name=CurrentControllerId", GAUGE,
       "The active controller's id (this node once active), -1 unknown"),
    _y(_RM + "RequestsPerSec,request=R,version=V", COUNTER,
       "Requests answered, by API and version", ("request", "version")),
    _y(_RM + "TotalTimeMs,request=R", SUMMARY,
       "ms from a request's decode to its answer, timed for one request in 8 per API and "
       "version (quick InitProducerId answers are counted, not timed)", ("request",)),
    Entry("kraftpy_producer_id_blocks_granted_total", COUNTER, None,
          "Producer-id blocks granted, by broker id, in the records this node replayed "
          "(its log since the newest snapshot, then every grant)", ("broker_id",)),
    Entry("kraftpy_idempotent_producer_ids_total", COUNTER, None,
          "Producer ids this node handed to idempotent producers since it started"),
    Entry("kraftpy_group_commit_records", SUMMARY, None,
          "Records made durable per commit round (both logs): _count rounds, _sum records"),
    Entry("kraftpy_commit_fsync_seconds", SUMMARY, None,
          "Each commit round's fsync (both logs), quantiles over the recent rounds"),
    Entry("kraftpy_node_ready", GAUGE, None,
          "1 when /ready answers 200: log recovered, controller active"),
)


def exported_names() -> set[str]:
    """Every series name the endpoint can show (a summary's `_count`/`_sum` included)."""
    names: set[str] = set()
    for entry in CATALOG:
        names.add(entry.name)
        if entry.type == SUMMARY:
            names.update((entry.name + "_count", entry.name + "_sum"))
    return names


def _key(entry: Entry) -> str:
    """How the collector names an entry: Kafka's metric name (ActiveControllerCount,
    current-leader), or kraftpy's own metric's name."""
    if entry.kafka is None:
        return entry.name
    if "name=" in entry.kafka:
        return entry.kafka.split("name=")[1].split(",")[0]
    return entry.kafka.split(" ")[1]


_BY_KEY = {_key(e): e for e in CATALOG}
assert len(_BY_KEY) == len(CATALOG)


def _entry(key: str) -> Entry:
    return _BY_KEY[key]


class NodeCollector(Collector):
    """Reads a node's state when scraped. Before recovery ends it knows no node yet and shows
    what is true then (not active, not ready); `attach` hands it the running node."""

    def __init__(self, node_id: int, log_dir: Path) -> None:
        self.node_id = node_id
        self.log_dir = Path(log_dir)
        self.started_ms = time.time_ns() // 1_000_000
        self.node: Any = None  # controller/node.RunningNode once recovered
        self._first_hwm = (0, 0)
        self._log_ends: deque[tuple[float, int]] = deque()

    def attach(self, node: Any) -> None:
        self.node = node
        quorum = node.quorum
        self._first_hwm = quorum.hwm
        self._log_ends.append((time.perf_counter(), quorum.storage.metadata.log_end_offset))

    # --- readiness --------------------------------------------------------------------------
    def readiness(self) -> tuple[bool, str]:
        """(ready, why): the log is recovered and the leader known (this node, active)."""
        node = self.node
        if node is None:
            return False, "recovering the metadata log"
        quorum = node.quorum
        if not quorum.running:
            return False, "the controller is not running (stopping, or a write failed)"
        if not quorum.controller.active:
            return False, "no active controller"
        return True, "ready"

    # --- collection -------------------------------------------------------------------------
    def collect(self) -> Iterator[Metric]:
        ready, _ = self.readiness()
        yield _gauge("kraftpy_node_ready", 1 if ready else 0)
        node = self.node
        active = 1 if ready else 0
        yield _gauge("ActiveControllerCount", active)
        yield _gauge("NewActiveControllersCount", 1 if node is not None else 0)
        leader = node.quorum.raft.leader_id if node is not None else None
        leader = -1 if leader is None else leader
        yield _gauge("CurrentControllerId", leader)
        yield _gauge("current-leader", leader)
        if node is None:
            return
        now = time.perf_counter()
        quorum = node.quorum
        controller, storage = quorum.controller, quorum.storage
        yield from self._controller(controller, quorum.clock_ms())
        yield from self._raft(quorum, controller, storage, now)
        yield from self._snapshots()
        yield from _requests()
        yield from self._kraftpy(quorum, controller)

    def _controller(self, controller: Any, now_ms: int) -> Iterator[Metric]:
        cluster, replication = controller.cluster, controller.replication
        brokers = cluster.brokers
        fenced = sum(1 for reg in brokers.values() if reg.fenced)
        shutting = sum(1 for reg in brokers.values() if reg.in_controlled_shutdown)
        yield _gauge("ActiveBrokerCount", len(brokers) - fenced)
        yield _gauge("FencedBrokerCount", fenced)
        yield _gauge("ControlledShutdownBrokerCount", shutting)
        states = _family("BrokerRegistrationState")
        since = _family("TimeSinceLastHeartbeatReceivedMs")
        timeout = cluster.heartbeats.session_timeout_ms
        for broker_id, reg in sorted(brokers.items()):
            code = 10 if reg.fenced else 20 if reg.in_controlled_shutdown else 30
            states.add_metric([str(broker_id)], code)
            beat = cluster.heartbeats.brokers.get(broker_id)
            waited = timeout if beat is None else min(now_ms - beat.last_contact_ms, timeout)
            since.add_metric([str(broker_id)], max(waited, 0))
        yield states
        yield since
        # Counts replay keeps (as Kafka's controller metrics are): a scrape never walks the
        # partitions.
        yield _gauge("GlobalTopicCount", len(replication.topics))
        yield _gauge("GlobalPartitionCount", replication.partition_count)
        yield _gauge("OfflinePartitionsCount", replication.brokers_to_isrs.offline_count())
        yield _gauge("PreferredReplicaImbalanceCount", replication.imbalanced.size)
        yield _gauge("LastAppliedRecordOffset", controller.log_end_offset - 1)
        yield _gauge("LastCommittedRecordOffset", controller.high_watermark - 1)
        yield _gauge("LastAppliedRecordLagMs", 0)
        yield _gauge("MetadataErrorCount", 0)
        yield _gauge("TimedOutBrokerHeartbeatCount", 0)
        yield _gauge("CurrentMetadataVersion", controller.features.metadata_version)

    def _raft(self, quorum: Any, controller: Any, storage: Any, now: float
              ) -> Iterator[Metric]:
        end = storage.metadata.log_end_offset
        last_ts = getattr(getattr(storage, "metadata", None), "last_append_timestamp", None)
        yield _gauge("LastAppliedRecordTimestamp", last_ts if last_ts is not None else 0)
        raft = quorum.raft
        voted = getattr(raft.state, "voted", None)
        vote = (voted.id if voted is not None
                else self.node_id if raft.leader_id == self.node_id else -1)
        epoch, end_epoch = raft.epoch, raft.log.last_fetched_epoch
        voters = len(raft.voters.ids)
        yield _gauge("current-vote", vote)
        yield _gauge("current-epoch", epoch)
        yield _gauge("high-watermark", quorum.hwm[0])
        yield _gauge("log-end-offset", end)
        yield _gauge("log-end-epoch", end_epoch)
        yield _gauge("number-of-voters", voters)
        yield _gauge("number-unknown-voter-connections", 0)
        avg, top = quorum.fsync_timings.window(now)
        yield _gauge("commit-latency-avg", avg * 1000)
        yield _gauge("commit-latency-max", top * 1000)
        yield _gauge("append-records-rate", self._rate(now, end))
        yield _gauge("fetch-records-rate", 0.0)
        yield _gauge("election-latency-avg", math.nan)
        yield _gauge("election-latency-max", math.nan)
        yield _summary("EventQueueTimeMs", quorum.queue_timings, 1000)
        yield _summary("EventQueueProcessingTimeMs", quorum.pass_timings, 1000)

    def _rate(self, now: float, value: int) -> float:
        """Per second over Kafka's window, from the values seen at scrapes (and at start)."""
        samples = self._log_ends
        while len(samples) > 1 and samples[1][0] <= now - WINDOW_S:
            samples.popleft()
        then, before = samples[0] if samples else (now, value)
        samples.append((now, value))
        return (value - before) / (now - then) if now > then else 0.0

    def _snapshots(self) -> Iterator[Metric]:
        newest = None
        try:
            for path in (self.log_dir / "__cluster_metadata-0").glob("*.checkpoint"):
                stat = path.stat()
                if newest is None or path.name > newest[0]:
                    newest = (path.name, stat.st_mtime_ns // 1_000_000, stat.st_size)
        except OSError:  # deleted by retention while we looked: the next scrape sees it
            pass
        now_ms = time.time_ns() // 1_000_000
        written_ms, size = (self.started_ms, 0) if newest is None else newest[1:]
        yield _gauge("LatestSnapshotGeneratedAgeMs", max(now_ms - written_ms, 0))
        yield _gauge("LatestSnapshotGeneratedBytes", size)

    def _kraftpy(self, quorum: Any, controller: Any) -> Iterator[Metric]:
        granted = _family("kraftpy_producer_id_blocks_granted_total")
        for broker_id, blocks in sorted(controller.producer_ids.granted.items()):
            if broker_id >= 0:  # -1: a snapshot's counter, not a grant
                granted.add_metric([str(broker_id)], blocks)
        yield granted
        own = controller.own_ids
        cur = own.current
        left = max(cur.first + cur.size - cur.next_id, 0) if cur is not None else 0
        usable = left + len(own.ready) * own.block_size
        yield _counter("kraftpy_idempotent_producer_ids_total",
                       own.usable_blocks * own.block_size - usable)
        first, first_txn = self._first_hwm
        records = quorum.hwm[0] - first + quorum.hwm[1] - first_txn
        entry = _entry("kraftpy_group_commit_records")
        rounds = Metric(entry.name, entry.help, SUMMARY)
        rounds.add_sample(entry.name + "_count", {}, quorum.fsyncs)
        rounds.add_sample(entry.name + "_sum", {}, records)
        yield rounds
        yield _summary("kraftpy_commit_fsync_seconds", quorum.fsync_timings, 1)


def _requests() -> Iterator[Metric]:
    counts = metrics_requests.counts()
    total = _family("RequestsPerSec")
    per_key: dict[int, int] = {}
    for key, version, answered in counts:
        total.add_metric([_api_name(key), str(version)], answered)
        per_key[key] = per_key.get(key, 0) + answered
    yield total
    entry = _entry("TotalTimeMs")
    times = Metric(entry.name, entry.help, SUMMARY)
    for key, answered in sorted(per_key.items()):
        labels = {"request": _api_name(key)}
        timings = metrics_requests.TIMINGS.get(key) or Timings()
        for q, value in timings.quantiles():
            times.add_sample(entry.name, {**labels, "quantile": q}, value * 1000)
        times.add_sample(entry.name + "_count", labels, answered)
        times.add_sample(entry.name + "_sum", labels, timings.sum * 1000)
    yield times


def _api_name(key: int) -> str:
    spec = API_KEYS.get(key)
    return spec.name if spec is not None else str(key)


def _family(key: str) -> Any:
    entry = _entry(key)
    cls = CounterMetricFamily if entry.type == COUNTER else GaugeMetricFamily
    return cls(entry.name, entry.help, labels=list(entry.labels))


def _gauge(key: str, value: float) -> GaugeMetricFamily:
    entry = _entry(key)
    return GaugeMetricFamily(entry.name, entry.help, value=value)


def _counter(key: str, value: float) -> CounterMetricFamily:
    entry = _entry(key)
    return CounterMetricFamily(entry.name, entry.help, value=value)


def _summary(key: str, timings: Timings, scale: float) -> Metric:
    """Kafka's histogram as the exporter shows it (quantiles and `_count`), with `_sum`."""
    entry = _entry(key)
    metric = Metric(entry.name, entry.help, SUMMARY)
    for q, value in timings.quantiles():
        metric.add_sample(entry.name, {"quantile": q}, value * scale)
    metric.add_sample(entry.name + "_count", {}, timings.count)
    metric.add_sample(entry.name + "_sum", {}, timings.sum * scale)
    return metric
