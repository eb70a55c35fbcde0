"""The conformance suite against a live Kafka 4.1 node and kraftpy, answers compared field by field.

Recorded bytes are no longer the only oracle: the same checks run against both servers in one
test, every typed answer is kept (`Target.transcript`), and the two transcripts must agree in
every field but those that differ between any two clusters (ids, ports, offsets, timestamps,
epochs of unrelated state). Producer ids are compared by the order they were first handed out,
so "the same id again" and "a fresh id" still count. Answers a client retries (the transaction
coordinator still loading) are transient and left out.
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from kraftpy.tools.conformance import Target, run_checks
from kraftpy.tools.conformance.checks import COORDINATOR_RETRIABLE, Exchange
from support.kafka import KafkaNode
from support.server import running_server

pytestmark = pytest.mark.slow

# Fields whose values belong to one cluster, not to the protocol's behaviour.
MASKED = {"port", "clusterId", "lastFetchTimestamp", "lastCaughtUpTimestamp", "logEndOffset",
          "highWatermark", "brokerEpoch", "finalizedFeaturesEpoch"}
API_VERSIONS = 18


def _retried(response: dict[str, Any]) -> bool:
    codes = [response.get("errorCode")] + [c.get("errorCode") for c in
                                           response.get("coordinators", [])]
    return any(code in COORDINATOR_RETRIABLE for code in codes)


class _Normalizer:
    def __init__(self) -> None:
        self.producer_ids: dict[int, str] = {}

    def __call__(self, value: Any, field: str = "") -> Any:
        if isinstance(value, dict):
            return {k: ("MASKED" if k in MASKED else self(v, k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self(v, field) for v in value]
        if field == "producerId" and isinstance(value, int) and value >= 0:
            return self.producer_ids.setdefault(value, f"P{len(self.producer_ids)}")
        return value


def _by_check(transcript: list[Exchange]) -> dict[tuple[str, str], list[tuple]]:
    normalize = _Normalizer()
    out: dict[tuple[str, str], list[tuple]] = defaultdict(list)
    for e in transcript:
        response = e.response.to_json(e.version)
        if _retried(response):
            continue
        out[(e.check, e.listener)].append((e.api_key, e.version, normalize(response)))
    return out


def _api_versions_agree(kafka: dict[str, Any], ours: dict[str, Any], where: str) -> None:
    """kraftpy serves a subset of Kafka's APIs, each at exactly Kafka's versions."""
    theirs = {a["apiKey"]: a for a in kafka.pop("apiKeys")}
    for api in ours.pop("apiKeys"):
        assert theirs.get(api["apiKey"]) == api, f"{where}: {api}"
    assert ours == kafka, where


def test_kafka_and_kraftpy_answer_the_suite_alike(kafka_oracle: KafkaNode, tmp_path: Path
                                                  ) -> None:
    run_id = uuid.uuid4().hex[:10]  # the same names on both, so keys in answers agree
    with running_server(tmp_path / "kraftpy") as srv:
        transcripts = {}
        for name, client, controller in (
                ("kafka", kafka_oracle.broker_port, kafka_oracle.controller_port),
                ("kraftpy", srv.client_port, srv.controller_port)):
            transcript: list[Exchange] = []
            results = run_checks(Target(client=("127.0.0.1", client),
                                        controller=("127.0.0.1", controller),
                                        incomplete_wait=0.5, transcript=transcript,
                                        run_id=run_id))
            failed = [f"{r.listener} {r.name}: {r.detail}" for r in results if r.status != "pass"]
            assert not failed, f"{name}:\n" + "\n".join(failed)
            transcripts[name] = _by_check(transcript)
    kafka, ours = transcripts["kafka"], transcripts["kraftpy"]
    assert set(ours) == set(kafka)
    compared = 0
    for where, exchanges in kafka.items():
        assert [e[:2] for e in ours[where]] == [e[:2] for e in exchanges], where
        for (key, version, theirs), (_, _, mine) in zip(exchanges, ours[where], strict=True):
            label = f"{where[1]} / {where[0]} / api {key} v{version}"
            if key == API_VERSIONS:
                _api_versions_agree(theirs, mine, label)
            else:
                assert mine == theirs, label
            compared += 1
    assert compared >= 60
