"""kraftpy beside Kafka 4.1's own tools: a directory `kafka-storage format` writes with its
defaults runs under `kraftpy serve`, `kraftpy storage format` writes the same bootstrap, and
`kafka-features describe / upgrade / downgrade` work against kraftpy on both listeners.

Runs Kafka's tools through tests/support/kafka.py, one JVM at a time.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kraftpy.controller.log.snapshots import read_snapshot
from kraftpy.protocol.metadata_frame import decode_metadata_record
from kraftpy.tools.cli import main
from support.kafka import run_tool
from support.server import KraftpyServer, running_server

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"

pytestmark = pytest.mark.usefixtures("kafka_jars")

# `kafka-features describe` of a Kafka 4.1 combined node formatted with the defaults (the same
# lines from its client and CONTROLLER listeners, whose ApiVersions v4 answers were recorded),
# the Epoch column left out.
KAFKA_41_DESCRIBE = [
    "Feature: eligible.leader.replicas.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1"
    "\tFinalizedVersionLevel: 1",
    "Feature: group.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1"
    "\tFinalizedVersionLevel: 1",
    "Feature: kraft.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1"
    "\tFinalizedVersionLevel: 0",
    "Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\tSupportedMaxVersion: 4.1-IV1"
    "\tFinalizedVersionLevel: 4.1-IV1",
    "Feature: share.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1"
    "\tFinalizedVersionLevel: 0",
    "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2"
    "\tFinalizedVersionLevel: 2",
]


def _java(tool: str, *args: str, check: bool = True) -> Any:
    run = run_tool(tool, *args)
    return run.check() if check else run


def _kafka_format(srv: KraftpyServer, *args: str) -> None:
    props = dict(srv.properties)
    props["controller.quorum.voters"] = f"1@{srv.controller}"
    props["log.dirs"] = props["metadata.log.dir"]  # else Kafka formats /tmp/kafka-logs too
    config = srv.root / "kafka.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    _java("StorageTool", "format", "--config", str(config),
          "--cluster-id", CLUSTER, *args)


def _records(path: Path) -> list[tuple[str, object]]:
    snap = read_snapshot(path)
    out: list[tuple[str, object]] = [("control", t) for t, _ in snap.control]
    for value in snap.values:
        record, version = decode_metadata_record(value)
        out.append((type(record).__name__, record.to_json(version)))
    return out


def _log_payloads(srv: KraftpyServer) -> list[dict]:
    proc = subprocess.run([sys.executable, "-m", "kraftpy.tools", "dump-log", "--json",
                           "--no-progress", str(srv.data_dir / "__cluster_metadata-0")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]


def _describe(*bootstrap: str) -> list[str]:
    out = _java("FeatureCommand", *bootstrap, "describe").stdout
    return [line.rsplit("\tEpoch:", 1)[0] for line in out.splitlines() if line.strip()]


def test_kraftpy_formats_the_bootstrap_kafka_formats(tmp_path: Path) -> None:
    kafka = KraftpyServer(tmp_path / "kafka")
    _kafka_format(kafka)
    ours = KraftpyServer(tmp_path / "ours")
    assert main(["storage", "format", "--config", str(ours.config_path),
                 "--cluster-id", CLUSTER]) == 0
    assert _records(ours.data_dir / "bootstrap.checkpoint") == _records(
        kafka.data_dir / "bootstrap.checkpoint")
    for release in ("3.9", "4.0-IV1"):
        kafka = KraftpyServer(tmp_path / f"kafka-{release}")
        _kafka_format(kafka, "--release-version", release)
        ours = KraftpyServer(tmp_path / f"ours-{release}")
        assert main(["storage", "format", "--config", str(ours.config_path),
                     "--cluster-id", CLUSTER, "--release-version", release]) == 0
        assert _records(ours.data_dir / "bootstrap.checkpoint") == _records(
            kafka.data_dir / "bootstrap.checkpoint"), release


def test_a_directory_kafka_formats_runs_and_features_work_as_kafkas(tmp_path: Path) -> None:
    srv = KraftpyServer(tmp_path)
    _kafka_format(srv)
    with running_server(tmp_path) as srv:
        client, controller = ("--bootstrap-server", srv.bootstrap), (
            "--bootstrap-controller", srv.controller)
        assert _describe(*client) == KAFKA_41_DESCRIBE
        assert _describe(*controller) == KAFKA_41_DESCRIBE
        out = _java("FeatureCommand", *controller, "downgrade",
                    "--feature", "transaction.version=0").stdout
        assert out.strip() == "transaction.version was downgraded to 0."
        out = _java("FeatureCommand", *client, "upgrade", "--feature",
                    "transaction.version=2", "--dry-run").stdout
        assert out.strip() == "transaction.version can be upgraded to 2."
        assert [line for line in _describe(*client) if "transaction.version" in line] == [
            "Feature: transaction.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 2"
            "\tFinalizedVersionLevel: 0"]
        refused = _java("FeatureCommand", *client, "downgrade",
                        "--feature", "metadata.version=21", check=False)
        assert refused.returncode == 1
        assert refused.stdout.strip() == (
            "Could not downgrade metadata.version to 21. The update failed for all features "
            "since the following feature had an error: Invalid metadata.version 21. Refusing "
            "to perform the requested downgrade because it might delete metadata information.")
    # The log holds Kafka's bootstrap (with the cluster-level min.insync.replicas), then the
    # downgrade's record.
    payloads = [(r.get("record_type"), r.get("payload")) for r in _log_payloads(srv)
                if r.get("record_type") and r.get("record_type") != "NO_OP_RECORD"]
    types = [t for t, _ in payloads]
    start = types.index("BEGIN_TRANSACTION_RECORD")
    assert types[start:start + 7] == [
        "BEGIN_TRANSACTION_RECORD", "FEATURE_LEVEL_RECORD", "FEATURE_LEVEL_RECORD",
        "FEATURE_LEVEL_RECORD", "FEATURE_LEVEL_RECORD", "CONFIG_RECORD",
        "END_TRANSACTION_RECORD"]
    assert {"name": "transaction.version", "featureLevel": 0} in [
        p for t, p in payloads if t == "FEATURE_LEVEL_RECORD"]

