"""Wire primitives against kafka-python's independent implementations and Kafka's limits."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kraftpy.protocol import primitives as p
from kraftpy.protocol.errors import DecodeError, EncodeError
from kraftpy.protocol.uuid import kafka_uuid_str, parse_kafka_uuid, random_kafka_uuid


@given(st.integers(0, 2**32 - 1))
def test_uvarint_matches_kafka_python(n: int) -> None:
    from kafka.protocol.old.types import UnsignedVarInt32

    data = p.uvarint_bytes(n)
    assert data == UnsignedVarInt32.encode(n)
    assert p.read_uvarint(data, 0) == (n, len(data))
    assert p.UVarInt.parse(data) == n and p.UVarInt.build(n) == data


@given(st.integers(-(2**31), 2**31 - 1))
def test_varint_matches_kafka_python(n: int) -> None:
    from kafka.record.util import decode_varint, encode_varint

    out = bytearray()
    encode_varint(n, out.append)
    assert p.varint_bytes(n) == bytes(out)
    assert p.read_varint(bytes(out), 0) == (n, len(out))
    assert decode_varint(p.varint_bytes(n), 0) == (n, len(out))


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_round_trip(n: int) -> None:
    data = p.varlong_bytes(n)
    assert p.read_varlong(data, 0) == (n, len(data)) and len(data) <= 10


def test_varint_limits() -> None:
    with pytest.raises(DecodeError, match="too long"):
        p.read_uvarint(b"\xff" * 5 + b"\x01", 0)
    with pytest.raises(DecodeError, match="truncated"):
        p.read_uvarint(b"\x80", 0)
    with pytest.raises(DecodeError, match="too long"):
        p.read_varint(b"\xff" * 6, 0)
    with pytest.raises(DecodeError, match="truncated"):
        p.read_varlong(b"\xff", 0)
    with pytest.raises(EncodeError):
        p.varint_bytes(2**31)
    with pytest.raises(EncodeError):
        p.uvarint_bytes(-1)


def test_strings_and_bytes() -> None:
    assert p.string_bytes(None, compact=True) == b"\x00"
    assert p.string_bytes(None, compact=False) == b"\xff\xff"
    assert p.string_bytes("é", compact=True) == b"\x03\xc3\xa9"
    assert p.read_string(b"\x00\x02hi", 0, compact=False, nullable=False) == ("hi", 4)
    with pytest.raises(DecodeError, match="non-nullable"):
        p.read_string(b"\x00", 0, compact=True, nullable=False)
    with pytest.raises(DecodeError, match="truncated"):
        p.read_bytes(b"\x00\x00\x00\x09ab", 0, compact=False, nullable=True)
    assert p.CompactNullableString.parse(b"\x00") is None
    assert p.Bytes.build(b"ab") == b"\x00\x00\x00\x02ab"


def test_tagged_fields_section() -> None:
    data = p.tagged_fields_bytes({5: b"x", 1: b""})
    assert data == b"\x02\x01\x00\x05\x01x"
    assert p.read_tagged_fields(data, 0) == ({1: b"", 5: b"x"}, len(data))
    with pytest.raises(DecodeError, match="cannot fit"):
        p.read_tagged_fields(b"\x7f", 0)


def test_constructs_compile_to_the_same_codec() -> None:
    for con, value in ((p.UVarInt, 300), (p.VarLong, -5), (p.CompactString, "abc"), (p.Uuid, random_kafka_uuid())):
        data = con.build(value)
        compiled = con.compile()
        assert compiled.parse(data) == value and compiled.build(value) == data
        assert con.parse_stream(io.BytesIO(data)) == value


def test_kafka_uuid_text() -> None:
    from uuid import UUID

    assert kafka_uuid_str(UUID(int=1)) == "AAAAAAAAAAAAAAAAAAAAAQ"
    value = random_kafka_uuid()
    assert parse_kafka_uuid(kafka_uuid_str(value)) == value
    assert not kafka_uuid_str(value).startswith("-")
    with pytest.raises(ValueError):
        parse_kafka_uuid("nope")
