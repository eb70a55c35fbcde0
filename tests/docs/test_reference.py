"""The reference pages are generated, and what they are generated from is whole.

docs/configuration.md and docs/metrics.md are what `python -m kraftpy.tools.reference docs/`
writes (from `controller/properties.py`, `controller/kafka_configs.py` and the metrics
catalog). The property table must hold every property-shaped name the node's code reads, with
the default the code runs with, and Kafka's default as Kafka 4.1's own table has it.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kraftpy.controller.config import build_config
from kraftpy.controller.feature_control import FEATURES, METADATA_VERSION
from kraftpy.controller.kafka_configs import BROKER_CONFIGS, TOPIC_CONFIGS
from kraftpy.controller.properties import (
    CLIENT_PROPERTIES,
    PROPERTIES,
    SERVER_PROPERTIES,
    default,
)
from kraftpy.controller.raft.config import PREFIX, RaftConfig
from kraftpy.controller.security.authorizer import AuthorizerSettings
from kraftpy.controller.security.quotas import LimitSettings
from kraftpy.tools import reference
from support.paths import PROJECT

PROPERTY_NAME = re.compile(r"[a-z][a-z0-9]*(\.[a-z0-9]+)+")
# Modules whose dotted names are not properties read from a node's configuration: Kafka's
# config tables, topic config validation, feature names, logger and module names.
NOT_READERS = {"controller/kafka_configs.py", "controller/config_schema.py",
               "controller/feature_control.py", "controller/properties.py",
               "tools/local_cluster.py",  # writes Kafka brokers' properties, reads none
               "tools/reference.py"}
# Dotted names that are something else: files, meta.properties keys, features, topic configs
# written into records, a broker's default read back from a ConfigRecord by the audit.
NOT_PROPERTIES = ({"partition.metadata", "directory.id", "meta.properties", "bootstrap.checkpoint",
                   "pom.xml", "log.cleanup.policy"} | set(FEATURES)
                  | {METADATA_VERSION} | set(TOPIC_CONFIGS))


def _literals(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.value for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and PROPERTY_NAME.fullmatch(node.value) and not node.value.startswith("kraftpy.")}


def test_the_reference_pages_are_what_the_generator_writes(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert reference.main(["--check", str(PROJECT / "docs")]) == 0, capsys.readouterr().err


def test_a_stale_page_is_named(tmp_path: Path) -> None:
    assert reference.main([str(tmp_path)]) == 0
    (tmp_path / "metrics.md").write_text("old\n")
    done = subprocess.run([sys.executable, "-m", "kraftpy.tools.reference", "--check",
                           str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "stale: " in done.stderr
    assert "metrics.md" in done.stderr and "configuration.md" not in done.stderr


@pytest.mark.parametrize("root", ["controller", "tools"])
def test_every_property_the_code_reads_is_in_the_table(root: str) -> None:
    missing = {}
    for path in sorted((PROJECT / root).rglob("*.py")):
        rel = path.relative_to(PROJECT).as_posix()
        if rel in NOT_READERS or "/spark/" in rel:  # Spark's own settings of a local session
            continue
        names = _literals(path) - NOT_PROPERTIES - set(SERVER_PROPERTIES) - set(CLIENT_PROPERTIES)
        names -= {"sasl.mechanisms"}  # librdkafka's spelling of sasl.mechanism, same entry
        if rel == "controller/raft/config.py":  # keys under its PREFIX
            names = {n for n in names if PREFIX + n not in SERVER_PROPERTIES}
        if names:
            missing[rel] = sorted(names)
    assert missing == {}


def test_each_entry_names_a_module_that_reads_it() -> None:
    for prop in PROPERTIES:
        source = (PROJECT / prop.read_by).read_text(encoding="utf-8")
        assert f'"{prop.name}"' in source or f'"{prop.name.split(".", 2)[-1]}"' in source \
            or prop.name == "kraftpy.metrics.listener", (prop.name, prop.read_by)


def test_kafkas_defaults_are_kafka_41s() -> None:
    for prop in SERVER_PROPERTIES.values():
        key = BROKER_CONFIGS.get(prop.name)
        if not prop.kafka:
            assert key is None, prop.name
            continue
        if key is None:  # a Kafka plugin's key (the authorizer's): its default is given
            assert prop.kafka_default is not None, prop.name
            continue
        shown = prop.kafka_default if prop.kafka_default is not None else prop.default
        assert shown == key.default or (shown is None and key.default in ("", None)), (
            prop.name, shown, key.default)


def test_the_code_runs_with_the_tables_defaults() -> None:
    config = build_config({"process.roles": "controller", "node.id": "1",
                           "listeners": "CONTROLLER://127.0.0.1:0",
                           "controller.listener.names": "CONTROLLER",
                           "metadata.log.dir": "/nonexistent"})
    assert config.broker_session_timeout_ms == int(default("broker.session.timeout.ms"))
    assert config.metadata_log_segment_bytes == int(default("metadata.log.segment.bytes"))
    assert config.queued_max_request_bytes == int(default("queued.max.request.bytes"))
    assert config.producer_id_quota_per_broker == float(
        default("producer.id.allocation.quota.per.broker"))
    assert config.metadata_max_retention_bytes is None  # unset: no default filled in
    assert config.security_protocol("CONTROLLER") == "PLAINTEXT"
    raft = RaftConfig.from_properties({})
    assert raft.append_linger_ms == int(default("controller.quorum.append.linger.ms"))
    assert raft.election_timeout_ms == int(default("controller.quorum.election.timeout.ms"))
    limits = LimitSettings.from_properties({})
    assert limits.window_num == int(default("quota.window.num"))
    assert limits.max_connections == int(default("max.connections"))
    assert AuthorizerSettings.from_properties({}) == AuthorizerSettings()
