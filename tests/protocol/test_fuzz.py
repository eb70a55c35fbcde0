"""Mutated frames (flips, truncations, insertions, length changes) only ever raise DecodeError,
quickly and without allocating more than the input could hold."""

from __future__ import annotations

import time
import tracemalloc
import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.framing import FrameReader, decode_request, encode_request
from kraftpy.protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from kraftpy.protocol.messages.broker_registration_request import (
    BrokerRegistrationRequest,
    Feature,
    Listener,
)
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.messages.metadata_response import (
    MetadataResponse,
    MetadataResponsePartition,
    MetadataResponseTopic,
)
from kraftpy.protocol.metadata_frame import decode_metadata_record, encode_metadata_record
from kraftpy.protocol.records.register_broker_record import BrokerEndpoint, RegisterBrokerRecord

SEEDS = [
    (InitProducerIdRequest, 4, InitProducerIdRequest(transactional_id="t", transaction_timeout_ms=9)),
    (InitProducerIdRequest, 0, InitProducerIdRequest(transactional_id="txn", transaction_timeout_ms=9)),
    (ApiVersionsResponse, 3, ApiVersionsResponse(api_keys=[ApiVersion(api_key=k, max_version=3) for k in range(5)],
                                                 finalized_features_epoch=7)),
    (MetadataResponse, 12, MetadataResponse(topics=[MetadataResponseTopic(
        name="a", topic_id=uuid.UUID(int=9), partitions=[MetadataResponsePartition(replica_nodes=[1, 2])])])),
    (BrokerRegistrationRequest, 4, BrokerRegistrationRequest(
        broker_id=1, cluster_id="c", incarnation_id=uuid.UUID(int=3),
        listeners=[Listener(name="P", host="h", port=9)], features=[Feature(name="f", max_supported_version=2)],
        log_dirs=[uuid.UUID(int=4)])),
    (RegisterBrokerRecord, 3, RegisterBrokerRecord(broker_id=1, end_points=[BrokerEndpoint(name="P", host="h")],
                                                   log_dirs=[uuid.UUID(int=4)])),
]

mutation = st.tuples(st.sampled_from(["flip", "truncate", "insert", "delete", "set"]),
                     st.integers(0, 10_000), st.integers(0, 255))


def _mutate(data: bytes, ops: list[tuple[str, int, int]]) -> bytes:
    buf = bytearray(data)
    for op, where, byte in ops:
        if not buf:
            break
        i = where % len(buf)
        if op == "flip":
            buf[i] ^= 1 << (byte % 8)
        elif op == "truncate":
            del buf[i:]
        elif op == "insert":
            buf.insert(i, byte)
        elif op == "delete":
            del buf[i]
        else:
            buf[i] = byte
    return bytes(buf)


def _bounded(fn, data: bytes) -> None:
    tracemalloc.start()
    start = time.perf_counter()
    try:
        fn(data)
    except DecodeError:
        pass
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert time.perf_counter() - start < 1.0
    assert peak < 64 * 1024 + 64 * len(data), peak


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(SEEDS), st.lists(mutation, min_size=1, max_size=4))
def test_mutated_messages(seed, ops) -> None:
    cls, version, obj = seed
    data = _mutate(obj.encode(version), ops)
    _bounded(lambda d: cls.decode(d, version), data)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(mutation, min_size=1, max_size=4))
def test_mutated_request_frames(ops) -> None:
    frame = encode_request(InitProducerIdRequest(transactional_id="tx"), 5, 42, "client")
    data = _mutate(frame, ops)

    def run(d: bytes) -> None:
        reader = FrameReader(max_size=1 << 20)
        reader.feed(d)
        while (f := reader.next_frame()) is not None:
            decode_request(f)

    _bounded(run, data)


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(SEEDS[-1:]), st.lists(mutation, min_size=1, max_size=4))
def test_mutated_metadata_records(seed, ops) -> None:
    _, version, obj = seed
    data = _mutate(encode_metadata_record(obj, version), ops)
    _bounded(decode_metadata_record, data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_random_bytes(data: bytes) -> None:
    for cls, version, _ in SEEDS:
        _bounded(lambda d, cls=cls, version=version: cls.decode(d, version), data)


def _log_sample() -> bytes:
    from kraftpy.protocol.record_batch import build_record_batch

    values = [encode_metadata_record(obj, version) for _, version, obj in SEEDS[-1:]] * 3
    return build_record_batch(values, base_offset=5, partition_leader_epoch=1, timestamp=1) * 2


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(mutation, min_size=1, max_size=4))
def test_mutated_record_batches(ops) -> None:
    from kraftpy.protocol.record_batch import iter_record_batches

    def run(d: bytes, verify: bool) -> None:
        for batch in iter_record_batches(d, verify_crc=verify):
            for value in batch.values():
                decode_metadata_record(value)

    data = _mutate(_log_sample(), ops)
    _bounded(lambda d: run(d, True), data)
    _bounded(lambda d: run(d, False), data)  # past the CRC, into records and payloads
