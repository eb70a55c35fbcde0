"""Bad bytes raise DecodeError saying what and where; bad values raise EncodeError."""

from __future__ import annotations

import uuid

import pytest
from kraftpy.protocol.errors import DecodeError, EncodeError
from kraftpy.protocol.messages.api_versions_response import ApiVersionsResponse
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.messages.metadata_response import MetadataResponse, MetadataResponseBroker
from kraftpy.protocol.messages.request_header import RequestHeader
from kraftpy.protocol.metadata_frame import decode_metadata_record, encode_metadata_record
from kraftpy.protocol.records.producer_ids_record import ProducerIdsRecord
from kraftpy.protocol.records.register_broker_record import RegisterBrokerRecord


def test_truncated_input_names_field_and_offset() -> None:
    data = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=1).encode(4)
    with pytest.raises(DecodeError) as err:
        InitProducerIdRequest.decode(data[:5], 4)
    assert err.value.field == "TransactionTimeoutMs" and err.value.offset == 3


def test_trailing_bytes() -> None:
    data = InitProducerIdRequest().encode(4) + b"\x00"
    with pytest.raises(DecodeError, match="trailing") as err:
        InitProducerIdRequest.decode(data, 4)
    assert err.value.offset == len(data) - 1


def test_null_in_non_nullable_string() -> None:
    # MetadataResponse v12: Brokers[0].Host is a non-nullable compact string; 0 means null
    resp = MetadataResponse(brokers=[MetadataResponseBroker(host="h")])
    data = bytearray(resp.encode(12))
    pos = data.index(b"\x02h")  # compact length of "h" is 2
    data[pos:pos + 2] = b"\x00"
    with pytest.raises(DecodeError, match="non-nullable") as err:
        MetadataResponse.decode(bytes(data), 12)
    assert err.value.field == "Brokers"  # small structs are decoded inline: the array is named


def test_absurd_array_length_is_refused_before_allocating() -> None:
    # ApiVersionsResponse v0: error code, then int32 array length
    data = b"\x00\x00" + b"\x7f\xff\xff\xff" + b"\x00" * 10
    with pytest.raises(DecodeError, match="cannot fit") as err:
        ApiVersionsResponse.decode(data, 0)
    assert err.value.field == "ApiKeys"


def test_negative_length() -> None:
    data = b"\x00\x00" + b"\xff\xff\xff\xfe"
    with pytest.raises(DecodeError, match="negative"):
        ApiVersionsResponse.decode(data, 0)


def test_over_long_varint() -> None:
    data = b"\x00\x00" + b"\xff\xff\xff\xff\xff\x01"
    with pytest.raises(DecodeError, match="too long"):
        ApiVersionsResponse.decode(data, 3)


def test_tag_outside_its_versions() -> None:
    # RegisterBrokerRecord: LogDirs is tag 0 from v3 only; the same bytes at v2 are refused
    rec = RegisterBrokerRecord(broker_id=1, log_dirs=[uuid.uuid4()])
    data = rec.encode(3)
    assert RegisterBrokerRecord.decode(data, 3) == rec
    with pytest.raises(DecodeError, match="not valid for version 2"):
        RegisterBrokerRecord.decode(data, 2)


def test_unknown_tags_round_trip_in_order() -> None:
    rec = RegisterBrokerRecord(broker_id=1, log_dirs=[uuid.UUID(int=5)],
                               unknown_tagged_fields={9: b"x", 3: b"yz"})
    data = rec.encode(3)
    back = RegisterBrokerRecord.decode(data, 3)
    assert back == rec and back.encode(3) == data
    log_dirs = b"\x00\x11" + b"\x02" + uuid.UUID(int=5).bytes  # tag 0, 17 bytes: one uuid
    assert data.endswith(b"\x03" + log_dirs + b"\x03\x02yz" + b"\x09\x01x")


def test_non_default_field_missing_from_version_is_an_encode_error() -> None:
    with pytest.raises(EncodeError, match="ProducerId at version 2"):
        InitProducerIdRequest(producer_id=5).encode(2)
    InitProducerIdRequest(producer_id=-1).encode(2)  # the default is fine


def test_ignorable_field_is_dropped() -> None:
    # RequestHeader.ClientId is ignorable: writing it at v0 silently drops it
    assert RequestHeader(client_id="x").encode(0) == b"\x00" * 8


def test_unknown_tags_at_non_flexible_version_are_refused() -> None:
    with pytest.raises(EncodeError, match="flexible"):
        InitProducerIdRequest(unknown_tagged_fields={5: b""}).encode(1)


def test_out_of_range_value_is_an_encode_error() -> None:
    with pytest.raises(EncodeError):
        InitProducerIdRequest(transaction_timeout_ms=2**31).encode(4)


def test_unsupported_version() -> None:
    with pytest.raises(DecodeError, match="no version 9"):
        InitProducerIdRequest.decode(b"", 9)
    with pytest.raises(EncodeError):
        InitProducerIdRequest().encode(9)


def test_metadata_frame_errors() -> None:
    good = encode_metadata_record(ProducerIdsRecord(broker_id=1, broker_epoch=2, next_producer_id=3000), 0)
    assert good[:3] == b"\x01\x0f\x00"
    assert decode_metadata_record(good)[0].next_producer_id == 3000
    with pytest.raises(DecodeError, match="frame version 0"):
        decode_metadata_record(b"\x00" + good[1:])
    with pytest.raises(DecodeError, match="unknown metadata record type 99"):
        decode_metadata_record(b"\x01\x63\x00")
    with pytest.raises(DecodeError, match="no version 7"):
        decode_metadata_record(b"\x01\x0f\x07" + good[3:])
    with pytest.raises(DecodeError, match="trailing"):
        decode_metadata_record(good + b"\x00")


def test_metadata_frame_encoding_errors() -> None:
    record = ProducerIdsRecord(broker_id=1, broker_epoch=2, next_producer_id=3000)
    with pytest.raises(EncodeError, match="not a metadata record"):
        encode_metadata_record(InitProducerIdRequest(), 0)
    with pytest.raises(EncodeError, match="no version 5"):
        encode_metadata_record(record, 5)
    for version in ("0", [0], None):
        with pytest.raises(EncodeError, match="not an integer"):
            encode_metadata_record(record, version)  # type: ignore[arg-type]
    with pytest.raises(EncodeError, match="out of range|int64|cannot encode"):
        encode_metadata_record(ProducerIdsRecord(next_producer_id=2**63), 0)
    assert encode_metadata_record(record, 0) == b"\x01\x0f\x00" + record.encode(0)
