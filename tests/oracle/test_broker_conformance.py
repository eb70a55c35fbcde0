"""The broker suite (`kraftpy conformance --broker`) against real Kafka 4.1 brokers.

Two clusters of one broker each, started side by side: one on a kraftpy controller, one on a
Kafka 4.1 controller. Every check passes on both, and every answer a check observed is the
same on both. Then each check is run once more against the kraftpy cluster's broker through a
fault proxy that makes the broker behave wrongly in one way (a retried batch appended again,
markers lost, an error code rewritten), and must fail where that fault shows.

The broker has a second listener, FAULTY, advertised at the proxy's port, and uses it between
brokers too: a client that bootstraps at the proxy is sent there for every broker and
coordinator, and the coordinator's WriteTxnMarkers to the partition leader cross the proxy as
well. Without a fault the proxy forwards every byte as it came (the suite's own runs use the
PLAINTEXT listener and do not cross it, except for markers and verification between the
broker and itself).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kraftpy.tools.conformance.broker import BrokerTarget
from kraftpy.tools.conformance.broker_suite import (
    BROKER_SUITE,
    BrokerCheckResult,
    run_broker_checks,
)
from support.fault_proxy import FaultProxy
from support.kafka_cluster import Cluster, start_cluster, stop_cluster
from support.server import HOST, free_port
from support.wire_faults import (
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    INIT_PRODUCER_ID,
    OFFSET_FETCH,
    PRODUCE,
    TXN_OFFSET_COMMIT,
    DropMarkers,
    DuplicateRetries,
    RewriteError,
    WireFault,
)

pytestmark = pytest.mark.slow

BROKER = 2
KINDS = ("kraftpy", "kafka")


@dataclass
class Setup:
    cluster: Cluster
    proxy: FaultProxy
    proxied: tuple[str, int]  # the FAULTY listener, through the proxy

    @property
    def direct(self) -> tuple[str, int]:
        host, port = self.cluster.bootstrap().split(":")
        return host, int(port)


def _start(root: Path, kind: str) -> Setup:
    proxy = FaultProxy()
    plain, faulty = free_port(), free_port()
    proxied = proxy.link(kind, (HOST, faulty), kafka=True)
    props = {
        "listeners": f"PLAINTEXT://{HOST}:{plain},FAULTY://{HOST}:{faulty}",
        "advertised.listeners": f"PLAINTEXT://{HOST}:{plain},FAULTY://{HOST}:{proxied}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                          "FAULTY:PLAINTEXT",
        "inter.broker.listener.name": "FAULTY",
    }
    try:
        cluster = start_cluster(root, kind, {}, {BROKER: props}, brokers=(BROKER,),
                                broker_ports={BROKER: plain})
    except BaseException:
        proxy.close()
        raise
    return Setup(cluster, proxy, (HOST, proxied))


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory, kafka_jars: Path
             ) -> Iterator[dict[str, Setup]]:
    """Both clusters, started at once (each JVM's start is mostly waiting)."""
    started: dict[str, Setup] = {}
    failed: list[BaseException] = []

    def start(kind: str) -> None:
        try:
            started[kind] = _start(tmp_path_factory.mktemp(f"eos-{kind}"), kind)
        except BaseException as exc:  # pytest.fail raises a BaseException
            failed.append(exc)

    threads = [threading.Thread(target=start, args=(kind,)) for kind in KINDS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        if failed:
            raise failed[0]
        yield started
    finally:
        for setup in started.values():
            stop_cluster(setup.cluster)
            setup.proxy.close()


@pytest.fixture(scope="module")
def clean_runs(clusters: dict[str, Setup]) -> dict[str, list[BrokerCheckResult]]:
    runs: dict[str, list[BrokerCheckResult]] = {}

    def run(kind: str) -> None:
        runs[kind] = run_broker_checks(BrokerTarget(bootstrap=[clusters[kind].direct]))

    threads = [threading.Thread(target=run, args=(kind,)) for kind in KINDS]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return runs


@pytest.mark.parametrize("kind", KINDS)
def test_every_check_passes_on_brokers_of_each_controller(
        clean_runs: dict[str, list[BrokerCheckResult]], kind: str) -> None:
    results = clean_runs[kind]
    assert [r.check for r in results] == [c.slug for c in BROKER_SUITE]
    failed = [f"{r.check}: {r.detail}" for r in results if r.status != "pass"]
    assert not failed, "\n".join(failed)
    assert not [r.cleanup for r in results if r.cleanup]


def test_both_clusters_answer_every_check_alike(
        clean_runs: dict[str, list[BrokerCheckResult]]) -> None:
    ours = {r.check: r.observed for r in clean_runs["kraftpy"]}
    theirs = {r.check: r.observed for r in clean_runs["kafka"]}
    assert ours.keys() == theirs.keys()
    for check in theirs:
        assert ours[check] == theirs[check], check
    assert sum(map(len, theirs.values())) >= 140  # every answer the checks compare


def test_the_proxy_without_a_fault_changes_nothing(clusters: dict[str, Setup]) -> None:
    setup = clusters["kraftpy"]
    results = run_broker_checks(BrokerTarget(bootstrap=[setup.proxied]),
                                lambda c: c.slug != "kip360-epoch-exhaustion")
    assert [r.status for r in results] == ["pass"] * (len(BROKER_SUITE) - 1), [
        r.detail for r in results if r.status != "pass"]


def _ours(topic: str) -> bool:
    return topic.startswith("kraftpy-conformance-")


def _base_sequence(request: Any) -> int:
    from kraftpy.protocol.record_batch import RecordBatch

    return RecordBatch(request.topic_data[0].partition_data[0].records).base_sequence


# check -> (the wrong broker, the step whose answer shows it)
WRONG_BROKERS: dict[str, tuple[Callable[[], WireFault], str]] = {
    "idempotence-retry": (DuplicateRetries, "retry of seq 0-2"),
    "idempotence-gap": (
        lambda: RewriteError(PRODUCE, "OUT_OF_ORDER_SEQUENCE_NUMBER", "NONE"),
        "seq 5 after 1 (a gap)"),
    "idempotence-window": (  # a broker keeping only the latest batch, as the draft KIP has it
        lambda: RewriteError(PRODUCE, "OUT_OF_ORDER_SEQUENCE_NUMBER",
                             "DUPLICATE_SEQUENCE_NUMBER"),
        "retry of seq 0 (6 back, outside the window)"),
    "idempotence-epoch": (
        lambda: RewriteError(PRODUCE, "INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"),
        "epoch +0, seq 1"),
    "kip360-delete-records": (  # what a broker before KIP-360 answered
        lambda: RewriteError(PRODUCE, "OUT_OF_ORDER_SEQUENCE_NUMBER", "UNKNOWN_PRODUCER_ID"),
        "seq 0-1 in one batch"),
    "kip360-unknown-producer": (
        lambda: RewriteError(PRODUCE, "NONE", "UNKNOWN_PRODUCER_ID",
                             when=lambda request: _base_sequence(request) == 7),
        "first batch at seq 7"),
    "kip360-epoch-bump": (  # PRODUCER_FENCED to every version
        lambda: RewriteError(INIT_PRODUCER_ID, "INVALID_PRODUCER_EPOCH", "PRODUCER_FENCED"),
        "InitProducerId v3 with the fenced epoch 0"),
    "kip360-epoch-exhaustion": (
        lambda: RewriteError(INIT_PRODUCER_ID, "PRODUCER_FENCED", "NONE"),
        "InitProducerId (old id, 32765)"),
    "kip447-generation": (
        lambda: RewriteError(TXN_OFFSET_COMMIT, "ILLEGAL_GENERATION", "NONE"),
        "TxnOffsetCommit v3 with a stale generation"),
    "kip447-require-stable": (
        lambda: RewriteError(OFFSET_FETCH, "UNSTABLE_OFFSET_COMMIT", "NONE"),
        "OffsetFetch RequireStable while 5 is pending"),
    "txn-commit": (lambda: DropMarkers(_ours), "1 transaction marker(s)"),
    "txn-abort": (lambda: DropMarkers(_ours), "1 transaction marker(s)"),
    "txn-unadded-partition": (
        lambda: RewriteError(PRODUCE, "TRANSACTION_ABORTABLE", "INVALID_TXN_STATE"),
        "Produce v11 without AddPartitionsToTxn"),
    "tv2-produce-adds-partition": (  # the coordinator refuses what Produce v12 adds
        lambda: RewriteError(ADD_PARTITIONS_TO_TXN, "NONE", "INVALID_TXN_STATE"),
        "Produce v12+ seq 0, no AddPartitionsToTxn"),
    "tv2-epoch-bump": (
        lambda: RewriteError(END_TXN, "INVALID_TXN_STATE", "NONE"),
        "EndTxn v5 commit at epoch 1 after its abort"),
    "tv2-late-produce": (
        lambda: RewriteError(PRODUCE, "INVALID_PRODUCER_EPOCH", "NONE"),
        "late Produce v12+ at the old epoch, seq 1"),
}


def test_every_check_has_a_wrong_broker() -> None:
    assert sorted(WRONG_BROKERS) == sorted(c.slug for c in BROKER_SUITE)


@pytest.mark.parametrize("check", list(WRONG_BROKERS))
def test_each_check_fails_against_a_broker_that_behaves_wrongly(
        clusters: dict[str, Setup], check: str) -> None:
    make, step = WRONG_BROKERS[check]
    setup = clusters["kraftpy"]
    fault = make()
    setup.proxy.set_fault("kraftpy", fault)
    try:
        (result,) = run_broker_checks(
            BrokerTarget(bootstrap=[setup.proxied], wait_timeout=4.0),
            lambda c: c.slug == check)
    finally:
        setup.proxy.set_fault("kraftpy", None)
    assert result.status == "fail", result.observed
    assert fault.fired > 0
    assert result.detail.startswith(step), result.detail
    assert not result.cleanup


def test_the_command_prints_json_with_expected_and_actual(
        clusters: dict[str, Setup], capsys: pytest.CaptureFixture[str]) -> None:
    from kraftpy.tools.cli import main

    setup = clusters["kraftpy"]
    direct = "{}:{}".format(*setup.direct)
    assert main(["conformance", "--broker", direct, "-k", "KIP-447", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)["broker"]
    assert (report["bootstrap"], report["pass"], report["fail"]) == (direct, 2, 0)
    assert [(r["check"], r["kip"], r["status"]) for r in report["results"]] == [
        ("kip447-generation", "KIP-447", "pass"), ("kip447-require-stable", "KIP-447", "pass")]
    assert report["results"][0]["observed"]["TxnOffsetCommit v3 with a stale generation"] == \
        "ILLEGAL_GENERATION"

    setup.proxy.set_fault("kraftpy", RewriteError(PRODUCE, "OUT_OF_ORDER_SEQUENCE_NUMBER",
                                                  "NONE"))
    try:
        status = main(["conformance", "--broker", "{}:{}".format(*setup.proxied), "-k",
                       "idempotence-gap", "--json"])
    finally:
        setup.proxy.set_fault("kraftpy", None)
    (result,) = json.loads(capsys.readouterr().out)["broker"]["results"]
    assert status == 1
    assert {k: result[k] for k in ("check", "status", "expected", "actual")} == {
        "check": "idempotence-gap", "status": "fail",
        "expected": "OUT_OF_ORDER_SEQUENCE_NUMBER", "actual": "NONE"}
    assert result["detail"] == ("seq 5 after 1 (a gap): got 'NONE', expected "
                                "'OUT_OF_ORDER_SEQUENCE_NUMBER'")
