"""Every valid request gets an answer: for each (API key, version) that each listener advertises
in ApiVersions, requests drawn from the schema (any field values the version can carry) are sent
to a real `kraftpy serve` process. Each must get a response that decodes at that version, with
its correlation id, on the same connection; the server log must show no traceback, no closed
connection and no unexpected error."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraftpy.controller import api
from kraftpy.protocol.framing import decode_response, encode_request
from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
from kraftpy.protocol.registry import API_KEYS
from kraftpy.tools.kafka_connection import KafkaConnection
from support.kafka_strategies import message_strategy
from support.server import KraftpyServer

LISTENERS = {"client": api.BROKER, "controller": api.CONTROLLER}
CASES = [(listener, key, version)
         for listener, kind in LISTENERS.items()
         for key, lo, hi in api.served(kind)
         for version in range(lo, hi + 1)]
EXAMPLES = 20
METADATA = "__cluster_metadata"


def typical(api_key: int, version: int) -> list[object]:
    """Requests sent before the drawn ones, so that the paths a client takes are always
    reached (random draws seldom name __cluster_metadata-0 or leave a name out)."""
    if api_key == 55:
        from kraftpy.protocol.messages.describe_quorum_request import (
            DescribeQuorumRequest,
            PartitionData,
            TopicData,
        )
        return [DescribeQuorumRequest(topics=[TopicData(
            topic_name=METADATA, partitions=[PartitionData(partition_index=0)])])]
    if api_key == 3 and version >= 10:
        from kraftpy.protocol.messages.metadata_request import (
            MetadataRequest,
            MetadataRequestTopic,
        )
        by_id = MetadataRequestTopic(topic_id=uuid.UUID(int=7), name=None)
        both = MetadataRequestTopic(topic_id=uuid.UUID(int=8), name="t")
        return [MetadataRequest(topics=[by_id]), MetadataRequest(topics=[both, by_id]),
                MetadataRequest(topics=[MetadataRequestTopic(name=None)])]
    return []
# What would show a request the server failed to answer properly.
BAD_LOG_LINES = ("Traceback", "closing connection", "unexpected error", "failed in the controller")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KraftpyServer]:
    srv = KraftpyServer(tmp_path_factory.mktemp("answers"))
    srv.start()
    try:
        yield srv
    finally:
        assert srv.stop() == 0, srv.log_tail()


class Connections:
    """One connection per listener, reopened only after a test saw it fail."""

    def __init__(self, srv: KraftpyServer) -> None:
        self.srv = srv
        self.open: dict[str, KafkaConnection] = {}
        self.correlation = 0

    def get(self, listener: str) -> KafkaConnection:
        conn = self.open.get(listener)
        if conn is None:
            port = self.srv.client_port if listener == "client" else self.srv.controller_port
            conn = self.open[listener] = KafkaConnection(("127.0.0.1", port), timeout=10)
        return conn

    def ask(self, listener: str, request: object, version: int) -> object:
        conn = self.get(listener)
        self.correlation += 1
        try:
            conn.send_raw(encode_request(request, version, self.correlation, "every-request"))
            frame = conn.recv_frame()
        except Exception:
            self.open.pop(listener).close()
            raise
        correlation, response = decode_response(frame, request.API_KEY, version)  # type: ignore[attr-defined]
        assert correlation == self.correlation
        return response


@pytest.fixture(scope="module")
def connections(server: KraftpyServer) -> Iterator[Connections]:
    conns = Connections(server)
    yield conns
    for conn in conns.open.values():
        conn.close()


@pytest.mark.parametrize("listener", sorted(LISTENERS))
def test_api_versions_advertises_what_is_tested(connections: Connections, listener: str) -> None:
    """The cases below are the registry's; the live ApiVersions answer lists the same."""
    response = connections.ask(listener, ApiVersionsRequest(
        client_software_name="kraftpy", client_software_version="1"), 3)
    advertised = sorted((k.api_key, k.min_version, k.max_version)
                        for k in response.api_keys)  # type: ignore[attr-defined]
    assert advertised == api.served(LISTENERS[listener])
    assert {(key, v) for lst, key, v in CASES if lst == listener} == {
        (key, v) for key, lo, hi in advertised for v in range(lo, hi + 1)}


@pytest.mark.parametrize(("listener", "api_key", "version"), CASES,
                         ids=[f"{lst}-{API_KEYS[k].request.__name__[:-7]}-v{v}"
                              for lst, k, v in CASES])
def test_every_valid_request_gets_a_decodable_answer(
        server: KraftpyServer, connections: Connections, listener: str, api_key: int,
        version: int) -> None:
    cls = API_KEYS[api_key].request
    log_before = len(server.log_text())
    sent: list[object] = []

    @settings(max_examples=EXAMPLES, deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def answered(data: st.DataObject) -> None:
        request = data.draw(message_strategy(cls, version))
        connections.ask(listener, request, version)
        sent.append(request)

    for request in typical(api_key, version):
        connections.ask(listener, request, version)
    answered()
    assert sent  # hypothesis ran the body (a fieldless request has one distinct example)
    new_lines = server.log_text()[log_before:]
    assert not [line for line in new_lines.splitlines()
                if any(bad in line for bad in BAD_LOG_LINES)], new_lines[-3000:]


def test_the_server_stays_up(server: KraftpyServer) -> None:
    """After every case: still running, and not one traceback in its whole log."""
    assert server.running
    assert "Traceback" not in server.log_text()


def test_cases_cover_both_listeners() -> None:
    keys = {(lst, key) for lst, key, _ in CASES}
    assert ("client", 3) in keys and ("controller", 62) in keys
    assert len(CASES) > 80
