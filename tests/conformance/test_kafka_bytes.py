"""Byte-for-byte against Apache Kafka 4.1: the answers that do not depend on state.

The network shell runs with Kafka's advertised addresses and cluster id from the recorded run,
so Metadata, FindCoordinator and the KIP-511 answer must be the very bytes Kafka sent; every
bad input Kafka answered with a close must close here too; and for every API we advertise,
the version range must be Kafka's.
"""

from __future__ import annotations

import json
import re
import struct

import pytest
from support.paths import reference
from support.server_shell import Client, running_shell

KAFKA_PORTS = {"client": 39092, "controller": 39093}
LISTENER = {"client": "PLAINTEXT", "controller": "CONTROLLER"}
ADVERTISED = {"advertised.listeners": "PLAINTEXT://127.0.0.1:39092,CONTROLLER://127.0.0.1:39093"}

# Stateless exchanges whose whole response must match Kafka's bytes.
EXACT = {
    "ApiVersions v99 (header v2 + v3 body)",
    "ApiVersions v99 (header v2 incl. tagged byte, empty body)",
    "Metadata v12 (no topics)",
    "Metadata v1 (empty topic list)",
    "FindCoordinator v1 txn golden-txn (attempt 2)",
    "FindCoordinator v4 batched txn [golden-txn, golden-txn-2]",
    "FindCoordinator v4 batched group [golden-group]",
}


def exchanges() -> list[dict]:
    path = reference("real-captures", "kafka-4.1", "wire-4.1.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_the_capture_has_what_this_file_compares() -> None:
    names = {e["name"] for e in exchanges()}
    assert EXACT <= names
    assert sum(1 for e in exchanges() if e["closed"]) >= 20


@pytest.mark.parametrize("name", sorted(EXACT))
async def test_same_bytes_as_kafka(name: str) -> None:
    (ex,) = [e for e in exchanges() if e["name"] == name][:1]
    async with running_shell(**ADVERTISED) as (server, node):
        node.cluster_id = "G0dMBTBsQ--_v26MQTG0jA"
        c = await Client.connect(server, LISTENER[ex["listener"]])
        await c.send(bytes.fromhex(ex["request_hex"]))
        raw = await c.frame()
        assert raw is not None
        assert raw.hex() == bytes.fromhex(ex["response_hex"])[4:].hex()


async def test_kafka_closes_are_our_closes() -> None:
    closing = [e for e in exchanges() if e["closed"]]
    async with running_shell() as (server, _):
        for ex in closing:
            c = await Client.connect(server, LISTENER[ex["listener"]])
            await c.send(bytes.fromhex(ex["request_hex"]))
            assert await c.closed(wait=3), ex["name"]
            await c.aclose()


async def test_incomplete_frames_are_waited_for() -> None:
    waiting = [e for e in exchanges() if e["name"].startswith("incomplete frame")]
    assert len(waiting) == 2
    async with running_shell() as (server, _):
        for ex in waiting:
            assert not ex["closed"]
            c = await Client.connect(server, LISTENER[ex["listener"]])
            await c.send(bytes.fromhex(ex["request_hex"]))
            assert not await c.closed(wait=1.0), ex["name"]


def _advertised(ex: dict) -> dict[int, tuple[int, int]]:
    found = re.findall(r"ApiVersion\(api_key=(\d+), min_version=(\d+), max_version=(\d+)\)",
                       ex["decoded_response"])
    return {int(k): (int(lo), int(hi)) for k, lo, hi in found}


@pytest.mark.parametrize("listener", ["client", "controller"])
async def test_every_api_we_advertise_has_kafkas_range(listener: str) -> None:
    (ex,) = [e for e in exchanges() if e["name"] == "ApiVersions v3" and e["listener"] == listener]
    kafka = _advertised(ex)
    async with running_shell() as (server, _):
        c = await Client.connect(server, LISTENER[listener])
        body = bytes.fromhex(ex["request_hex"])
        await c.send(body)
        raw = await c.frame()
        assert raw is not None
        # Header v0, then the v3 body: error code, compact array of (key, min, max, tags).
        assert struct.unpack(">ih", raw[:6]) == (struct.unpack(">i", body[8:12])[0], 0)
    from kraftpy.protocol.messages.api_versions_response import ApiVersionsResponse

    ours = {k.api_key: (k.min_version, k.max_version)
            for k in ApiVersionsResponse.decode(raw[4:], 3).api_keys}
    assert ours, "nothing advertised"
    for key, versions in ours.items():
        assert kafka.get(key) == versions, (key, versions, kafka.get(key))
