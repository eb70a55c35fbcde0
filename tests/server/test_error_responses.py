"""A request its handler fails on gets the API's error response (UNKNOWN_SERVER_ERROR, built as
Kafka's getErrorResponse builds it), one log line without a traceback, and the connection stays
open for the next request."""

from __future__ import annotations

import logging
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraftpy.controller import api
from kraftpy.controller.api import errors
from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
from kraftpy.protocol.messages.describe_cluster_request import DescribeClusterRequest
from kraftpy.protocol.messages.describe_cluster_response import DescribeClusterResponse
from kraftpy.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kraftpy.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from kraftpy.protocol.registry import API_KEYS
from support.kafka_strategies import message_strategy
from support.server_shell import Client, running_shell

USE = -1  # UNKNOWN_SERVER_ERROR
SERVED = sorted({(key, v) for kind in (api.BROKER, api.CONTROLLER)
                 for key, lo, hi in api.served(kind) for v in range(lo, hi + 1)})
# APIs whose error response mirrors the request's entries: how many entries get the error.
MIRRORED = {
    1: lambda r: sum(len(t.partitions) for t in r.topics),
    3: lambda r: len(r.topics or ()),
    10: lambda r: len(r.coordinator_keys),
    30: lambda r: len(r.creations),
    31: lambda r: len(r.filters),
    61: lambda r: sum(len(t.partition_indexes) for t in r.topics),
    65: lambda r: len(r.transactional_ids),
    19: lambda r: len(r.topics),
    20: lambda r: len(r.topics or ()) + len(r.topic_names or ()),
    32: lambda r: len(r.resources),
    33: lambda r: len(r.resources),
    37: lambda r: len(r.topics),
    44: lambda r: len(r.resources),
    43: lambda r: sum(len(t.partitions) for t in r.topic_partitions or ()),
    45: lambda r: sum(len(t.partitions) for t in r.topics),
}
V3 = {"client_software_name": "test", "client_software_version": "1"}


def _codes(message: Any) -> list[int]:
    """Every error_code in a message, depth first."""
    found = []
    for spec in message._FIELDS:
        value = getattr(message, spec.attr)
        if spec.attr == "error_code":
            found.append(value)
        elif spec.kind == "struct" and value is not None:
            found.extend(_codes(value))
        elif spec.kind == "array" and spec.elem == "struct":
            for item in value or ():
                found.extend(_codes(item))
    return found


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_every_served_api_has_an_error_response_that_encodes(data: st.DataObject) -> None:
    api_key, version = data.draw(st.sampled_from(SERVED))
    request = data.draw(message_strategy(API_KEYS[api_key].request, version))
    response = errors.error_response(api_key, request, version)
    cls = API_KEYS[api_key].response
    back = cls.decode(response.encode(version), version)
    codes = _codes(back)
    assert set(codes) <= {USE, 0}
    if api_key in MIRRORED and not (api_key == 10 and version < 4):
        # Each entry asked for comes back with the error (Metadata v13+, Fetch v7+,
        # ElectLeaders v1+ and AlterPartitionReassignments have it on top too).
        on_top = (api_key == 3 and version >= 13) or (api_key == 1 and version >= 7) or (
            api_key == 43 and version >= 1) or api_key == 45
        assert codes.count(USE) == MIRRORED[api_key](request) + on_top
    else:
        assert codes[:1] == [USE]


def test_every_served_api_key_has_kafkas_builder() -> None:
    assert {key for key, _ in SERVED} <= set(errors.BUILDERS)


def test_entries_are_mirrored_as_kafka_does() -> None:
    md = errors.error_response(3, MetadataRequest(topics=[
        MetadataRequestTopic(name=None), MetadataRequestTopic(name="a")]), 13)
    assert [(t.name, t.error_code) for t in md.topics] == [("", USE), ("a", USE)]
    assert md.error_code == USE and md.brokers == [] and md.controller_id == -1
    assert errors.error_response(3, MetadataRequest(topics=[]), 12).error_code == 0  # v13+
    fc = errors.error_response(10, FindCoordinatorRequest(key_type=1, coordinator_keys=["x", "y"]), 4)
    assert [(c.key, c.error_code, c.node_id, c.error_message) for c in fc.coordinators] == [
        ("x", USE, -1, errors.UNKNOWN_SERVER_ERROR_MESSAGE),
        ("y", USE, -1, errors.UNKNOWN_SERVER_ERROR_MESSAGE)]
    old = errors.error_response(10, FindCoordinatorRequest(key="x"), 1)
    assert (old.error_code, old.node_id, old.host, old.port) == (USE, -1, "", -1)


async def test_an_answer_that_does_not_encode_gets_the_error_response(caplog) -> None:
    """EndpointType exists only from DescribeCluster v1: an answer carrying a non-default one
    at v0 cannot be sent."""
    def answer(request, version, ctx):
        return DescribeClusterResponse(endpoint_type=2, cluster_id="c")

    caplog.set_level(logging.INFO)
    async with running_shell(answer) as (server, _):
        c = await Client.connect(server, "PLAINTEXT")
        r = await c.request(DescribeClusterRequest(), 0)
        assert r.error_code == USE and r.brokers == []
        assert (await c.request(DescribeClusterRequest(), 1)).endpoint_type == 2  # still open
        errors_logged = [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
        assert len(errors_logged) == 1, caplog.text
        assert errors_logged[0].exc_info is None and "Traceback" not in caplog.text
        assert "describe_cluster v0" in errors_logged[0].getMessage()
        assert "EncodeError" in errors_logged[0].getMessage()


async def test_a_handler_that_raises_gets_the_error_response(caplog) -> None:
    """ApiVersions v3 asks the node for its features; a node that fails there."""
    caplog.set_level(logging.INFO)
    async with running_shell() as (server, node):
        def broken() -> api.Features:
            raise RuntimeError("feature table unreadable")

        node.features = broken  # type: ignore[method-assign]
        c = await Client.connect(server, "CONTROLLER")
        r = await c.request(ApiVersionsRequest(**V3), 3)
        assert (r.error_code, r.api_keys) == (USE, [])
        assert (await c.request(ApiVersionsRequest(), 0)).error_code == 0  # still open
        lines = [rec.getMessage() for rec in caplog.records if rec.levelno >= logging.ERROR]
        assert len(lines) == 1 and "RuntimeError: feature table unreadable" in lines[0]
        assert "Traceback" not in caplog.text


async def test_a_controller_failure_is_one_line_too(caplog) -> None:
    caplog.set_level(logging.INFO)
    async with running_shell() as (server, _):  # no controller: submit raises
        c = await Client.connect(server, "PLAINTEXT")
        r = await c.request(DescribeClusterRequest(), 1)
        assert r.error_code == USE
        lines = [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
        assert len(lines) == 1 and lines[0].exc_info is None
        assert "failed in the controller" in lines[0].getMessage()


async def test_metadata_by_topic_id_before_v12_is_invalid_request() -> None:
    """As Kafka's KafkaApis: v10/v11 carry topic ids on the wire but do not take them."""
    async with running_shell() as (server, _):
        c = await Client.connect(server, "PLAINTEXT")
        import uuid
        tid = uuid.UUID(int=5)
        for version in (10, 11):
            r = await c.request(MetadataRequest(topics=[MetadataRequestTopic(
                topic_id=tid, name=None)]), version)
            assert [(t.error_code, t.name, t.topic_id) for t in r.topics] == [(42, "", tid)]
            assert (r.brokers, r.controller_id) == ([], -1)
            r = await c.request(MetadataRequest(topics=[MetadataRequestTopic(
                topic_id=tid, name="a")]), version)
            assert [t.error_code for t in r.topics] == [42]
        r = await c.request(MetadataRequest(topics=[
            MetadataRequestTopic(topic_id=tid, name=None),
            MetadataRequestTopic(name="ignored"), MetadataRequestTopic(topic_id=tid)]), 12)
        assert [(t.error_code, t.name, t.topic_id) for t in r.topics] == [(100, None, tid)]
        assert r.brokers[0].node_id == 1
        r = await c.request(MetadataRequest(topics=[MetadataRequestTopic(name="a"),
                                                    MetadataRequestTopic(name="a")]), 11)
        assert [(t.error_code, t.name) for t in r.topics] == [(3, "a")]
