"""One-pack encoders (`_BYTES`) of fixed-layout requests and responses write exactly the
pieces the general encoder writes, and step aside (None) whenever that one must decide."""

from __future__ import annotations

import struct
import uuid
from typing import Any

import pytest
from kraftpy.protocol.errors import EncodeError
from kraftpy.protocol.framing import encode_response, frame_response
from kraftpy.protocol.message import FieldSpec, Message
from kraftpy.protocol.messages.init_producer_id_response import InitProducerIdResponse
from kraftpy.protocol.messages.response_header import ResponseHeader
from kraftpy.protocol.registry import response_header_version
from support.generated import generated_classes, versions

_VALUES: dict[str, Any] = {"bool": True, "int8": -7, "int16": 300, "uint16": 65000,
                           "int32": -70000, "uint32": 4_000_000_000, "int64": 1 << 40,
                           "float64": 2.5, "uuid": uuid.UUID(int=99)}


def _general(obj: Message, version: int) -> bytes:
    parts: list[bytes] = []
    obj.encode_into(parts.append, version)
    return b"".join(parts)


def _set(cls: type[Message], version: int) -> Message:
    return cls(**{f.attr: _VALUES[f.kind] for f in cls._FIELDS if f.present(version)})


def _fixed_versions() -> list[tuple[type[Message], int]]:
    return [(cls, v) for cls in generated_classes(top_only=True) for v in versions(cls)
            if v in cls._BYTES]


def test_some_answers_have_one_pack_encoders() -> None:
    assert InitProducerIdResponse._BYTES.keys() == set(range(0, 7))
    assert ResponseHeader._BYTES.keys() == {0, 1}
    assert len(_fixed_versions()) > 30


@pytest.mark.parametrize("cls,version", _fixed_versions(),
                         ids=lambda x: x.__name__ if isinstance(x, type) else str(x))
def test_one_pack_is_the_general_encoding(cls: type[Message], version: int) -> None:
    for obj in (cls(), _set(cls, version)):
        data = obj.encode_fixed(version)
        assert data is not None and data == _general(obj, version) == obj.encode(version)
    obj = _set(cls, version)
    obj.unknown_tagged_fields = {7: b"x"}
    assert obj.encode_fixed(version) is None  # tags: written, or refused, by the encoder
    if cls.FLEXIBLE_VERSIONS is not None and version >= cls.FLEXIBLE_VERSIONS[0]:
        assert obj.encode(version) == _general(obj, version)
    else:
        with pytest.raises(EncodeError):
            obj.encode(version)


def _absent(cls: type[Message], version: int) -> FieldSpec | None:
    return next((f for f in cls._FIELDS if not f.present(version) and not f.ignorable
                 and f.kind in _VALUES), None)


def test_a_field_the_version_lacks_is_refused_as_before() -> None:
    checked = 0
    for cls, version in _fixed_versions():
        f = _absent(cls, version)
        if f is None:
            continue
        obj = cls(**{f.attr: _VALUES[f.kind]})
        assert obj.encode_fixed(version) is None
        with pytest.raises(EncodeError, match=f.name):
            obj.encode(version)
        checked += 1
    assert checked > 5


def test_a_bad_value_is_the_general_encoders_error() -> None:
    bad = InitProducerIdResponse(producer_id=1 << 70)
    assert bad.encode_fixed(4) is None
    with pytest.raises(EncodeError):
        bad.encode(4)
    with pytest.raises(EncodeError):
        frame_response(1, True, bad, 4)


@pytest.mark.parametrize("version", range(0, 7))
def test_framed_answers_match_the_response_header_codec(version: int) -> None:
    response = InitProducerIdResponse(error_code=47, producer_id=12345, producer_epoch=6)
    header = ResponseHeader(correlation_id=-5).encode(response_header_version(22, version))
    body = _general(response, version)
    expected = struct.pack(">i", len(header) + len(body)) + header + body
    assert encode_response(-5, 22, version, response) == expected
    assert frame_response(-5, response_header_version(22, version) == 1, response,
                          version) == expected
