"""The network shell alone (server, dispatch, handlers registry) with a scripted controller."""

from __future__ import annotations

import logging
import struct

import trio
from kraftpy.controller import api
from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
from kraftpy.protocol.messages.find_coordinator_request import FindCoordinatorRequest
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.messages.init_producer_id_response import InitProducerIdResponse
from kraftpy.protocol.messages.metadata_request import MetadataRequest, MetadataRequestTopic
from support.server_shell import CLUSTER_ID, Client, running_shell

V3 = {"client_software_name": "shell-test", "client_software_version": "1.0"}


async def test_api_versions_is_derived_from_the_registry_per_listener() -> None:
    async with running_shell() as (server, _):
        for listener, kind in (("PLAINTEXT", api.BROKER), ("CONTROLLER", api.CONTROLLER)):
            c = await Client.connect(server, listener)
            for version in (0, 3, 4):
                response = await c.request(ApiVersionsRequest(**V3), version)
                assert response.error_code == 0
                got = [(k.api_key, k.min_version, k.max_version) for k in response.api_keys]
                assert got == api.served(kind)
            assert [(f.name, f.min_version, f.max_version)
                    for f in response.supported_features] == [("metadata.version", 7, 27)]
            # The controller's epoch on CONTROLLER, the broker image's on a client listener.
            assert response.finalized_features_epoch == (5 if kind == api.CONTROLLER else 9)


async def test_client_listener_offers_the_old_versions_real_clients_use() -> None:
    ranges = {k: (lo, hi) for k, lo, hi in api.served(api.BROKER)}
    assert ranges[22][0] == 0 and ranges[22][1] >= 4  # InitProducerId v0-v1 (aiokafka, kafkajs)
    assert ranges[10][0] <= 1 and ranges[10][1] >= 4  # FindCoordinator v1-v2 and batched v4+
    assert ranges[3][0] <= 1 and ranges[3][1] >= 12  # Metadata v1-v12
    controller = {k for k, _, _ in api.served(api.CONTROLLER)}
    # 17, 36: SASL; 29-31: ACLs (security); 57: UpdateFeatures; 1, 59: raft Fetch, FetchSnapshot;
    # 19, 20, 32, 33, 37, 44, 46, 58, 73: topics, configs and the Envelope brokers forward them in
    # 43, 45, 56: ElectLeaders, AlterPartitionReassignments, AlterPartition;
    # 52-54: Vote, BeginQuorumEpoch, EndQuorumEpoch (the voters' elections);
    # 70: ControllerRegistration; 80-82: AddRaftVoter, RemoveRaftVoter, UpdateRaftVoter
    assert {18, 62, 63, 64, 67, 55, 60, 17, 36, 29, 30, 31, 57, 1, 59,
            19, 20, 32, 33, 37, 44, 46, 58, 73, 43, 45, 56, 52, 53, 54, 70,
            80, 81, 82} == controller


async def test_kip511_unknown_api_versions_version_gets_a_v0_answer_and_stays_open() -> None:
    async with running_shell() as (server, _):
        c = await Client.connect(server, "PLAINTEXT")
        body = struct.pack(">hhih", 18, 99, 7, 4) + b"test" + b"\x00"  # header v2, empty body
        await c.send(struct.pack(">i", len(body)) + body)
        raw = await c.frame()
        assert raw == struct.pack(">ihi", 7, 35, 1) + struct.pack(">hhh", 18, 0, 4)
        assert (await c.request(ApiVersionsRequest(**V3), 3)).error_code == 0


async def test_metadata_and_find_coordinator_point_at_the_listener_used() -> None:
    async with running_shell(**{"advertised.listeners": "PLAINTEXT://kraftpy.example:9092"}
                             ) as (server, _):
        c = await Client.connect(server, "PLAINTEXT")
        md = await c.request(MetadataRequest(topics=[MetadataRequestTopic(name="t")]), 12)
        assert [(b.node_id, b.host, b.port) for b in md.brokers] == [(1, "kraftpy.example", 9092)]
        assert md.controller_id == 1 and md.cluster_id == CLUSTER_ID
        assert [(t.name, t.error_code) for t in md.topics] == [("t", 3)]
        fc = await c.request(FindCoordinatorRequest(key="x", key_type=1), 1)
        assert (fc.error_code, fc.node_id, fc.host, fc.port) == (0, 1, "kraftpy.example", 9092)
        fc = await c.request(FindCoordinatorRequest(key_type=1, coordinator_keys=["a", "b"]), 4)
        assert [(x.key, x.error_code, x.port) for x in fc.coordinators] == [
            ("a", 0, 9092), ("b", 0, 9092)]
        fc = await c.request(FindCoordinatorRequest(key_type=0, coordinator_keys=["g"]), 4)
        assert fc.coordinators[0].error_code == 15  # no group coordinator here
        fc = await c.request(FindCoordinatorRequest(key_type=9, coordinator_keys=["g"]), 4)
        assert fc.coordinators[0].error_code == 42


async def test_bad_input_closes_only_that_connection_with_a_log_line(caplog) -> None:
    caplog.set_level(logging.WARNING, logger="kraftpy.server")
    async with running_shell(**{"socket.request.max.bytes": "1000"}) as (server, _):
        bystander = await Client.connect(server, "PLAINTEXT")
        cases = [
            (struct.pack(">i", 1001), "larger than the maximum"),
            (struct.pack(">i", -1), "negative frame size"),
            (struct.pack(">i", 0), "header"),
            (struct.pack(">ihhih", 10, 9999, 0, 1, 0), "not enabled"),
            (struct.pack(">ihhih", 11, 3, 999, 1, 0) + b"\x00", "not enabled"),
            (struct.pack(">ihhih", 11, 67, 0, 1, 0) + b"\x00", "not enabled"),
        ]
        for data, why in cases:
            caplog.clear()
            c = await Client.connect(server, "PLAINTEXT")
            await c.send(data)
            assert await c.closed(), data
            assert any(why in r.getMessage() for r in caplog.records), (why, caplog.text)
        assert (await bystander.request(ApiVersionsRequest(**V3), 3)).error_code == 0


async def test_controller_failure_answers_unknown_server_error() -> None:
    async with running_shell() as (server, _):
        c = await Client.connect(server, "PLAINTEXT")
        r = await c.request(InitProducerIdRequest(transactional_id=None,
                                                  transaction_timeout_ms=1000), 4)
        assert (r.error_code, r.producer_id, r.producer_epoch) == (-1, -1, -1)


async def test_producer_fenced_is_invalid_producer_epoch_before_v4() -> None:
    def answer(request, version, ctx):
        return InitProducerIdResponse(error_code=90, producer_id=-1, producer_epoch=-1)

    async with running_shell(answer) as (server, node):
        c = await Client.connect(server, "PLAINTEXT")
        req = InitProducerIdRequest(transactional_id="t", transaction_timeout_ms=1000,
                                    producer_id=1, producer_epoch=0)
        assert (await c.request(req, 3)).error_code == 47
        assert (await c.request(req, 4)).error_code == 90
        assert node.submitted[0][2].listener == "PLAINTEXT"
        assert node.submitted[0][2].principal == "User:ANONYMOUS"


async def test_pipelined_requests_are_answered_in_order_one_at_a_time() -> None:
    order: list[int] = []

    def answer(request, version, ctx):
        order.append(ctx.correlation_id)
        return InitProducerIdResponse(producer_id=ctx.correlation_id, producer_epoch=0)

    async with running_shell(answer) as (server, node):
        node.delay = 0.01
        c = await Client.connect(server, "PLAINTEXT")
        req = InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=1000)
        from kraftpy.protocol.framing import decode_response, encode_request
        await c.send(b"".join(encode_request(req, 4, i, "p") for i in range(1, 11)))
        got = []
        for _ in range(10):
            corr, resp = decode_response(await c.frame(), 22, 4)
            got.append((corr, resp.producer_id))
        assert got == [(i, i) for i in range(1, 11)]
        assert order == list(range(1, 11))


async def test_idle_connections_are_closed(caplog) -> None:
    caplog.set_level(logging.INFO, logger="kraftpy.server")
    async with running_shell(**{"connections.max.idle.ms": "200"}) as (server, _):
        c = await Client.connect(server, "CONTROLLER")
        assert (await c.request(ApiVersionsRequest(**V3), 3)).error_code == 0
        with trio.fail_after(3):
            assert await c.closed(wait=3)
        assert "idle" in caplog.text


async def test_drain_finishes_the_request_in_flight_then_closes() -> None:
    def answer(request, version, ctx):
        return InitProducerIdResponse(producer_id=42, producer_epoch=0)

    async with running_shell(answer) as (server, node):
        node.delay = 0.3
        busy = await Client.connect(server, "PLAINTEXT")
        idle = await Client.connect(server, "PLAINTEXT")
        await idle.request(ApiVersionsRequest(**V3), 3)
        await busy.send(encode_init(1))
        await trio.sleep(0.05)
        async with trio.open_nursery() as n:
            n.start_soon(server.drain)
            raw = await busy.frame()
            assert raw is not None and struct.unpack(">i", raw[:4])[0] == 1
            assert await busy.closed()
            assert await idle.closed()
        assert server.open_connections == 0


def encode_init(correlation: int) -> bytes:
    from kraftpy.protocol.framing import encode_request

    return encode_request(InitProducerIdRequest(transactional_id=None,
                                                transaction_timeout_ms=1000), 4, correlation, "x")
