"""A fixed run read together with the next string's int16 length (the request header's
ClientId) decodes as before, and a cut anywhere names the same field at the same offset."""

from __future__ import annotations

import pytest
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.messages.request_header import RequestHeader


def _expected(cut: int, version: int) -> tuple[str, int]:
    """Field and offset the reads one after the other report for a header cut at `cut`."""
    if cut < 8:
        return "RequestApiKey", 0
    if cut < 10:
        return "ClientId", 8
    if cut < 15:  # the 5 bytes of "bench"
        return "ClientId", 10
    assert version == 2
    return "", 15  # the tag section


@pytest.mark.parametrize("version", [1, 2])
def test_header_cut_anywhere(version: int) -> None:
    header = RequestHeader(request_api_key=22, request_api_version=4, correlation_id=-9,
                           client_id="bench")
    data = header.encode(version)
    assert RequestHeader.decode(data, version) == header
    assert RequestHeader.decode_from(data + b"xyz", 0, version) == (header, len(data))
    for cut in range(len(data)):
        with pytest.raises(DecodeError) as info:
            RequestHeader.decode(data[:cut], version)
        field, offset = _expected(cut, version)
        assert (info.value.field or "", info.value.offset) == (field, offset), cut


@pytest.mark.parametrize("client_id", [None, "", "x" * 300])
def test_null_empty_and_long_client_ids(client_id: str | None) -> None:
    header = RequestHeader(request_api_key=18, request_api_version=3, correlation_id=1,
                           client_id=client_id)
    for version in (1, 2):
        assert RequestHeader.decode(header.encode(version), version) == header


def test_a_negative_length_is_refused() -> None:
    data = b"\x00\x16\x00\x04\x00\x00\x00\x01" + b"\xff\xfe"
    with pytest.raises(DecodeError, match="negative string length -2"):
        RequestHeader.decode(data, 1)
