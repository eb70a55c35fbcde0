"""Frames recorded from a real Apache Kafka 4.1 decode with ours and re-encode identically;
the malformed ones it closed the connection on are DecodeErrors here."""

from __future__ import annotations

import json

import pytest
from kraftpy.protocol.errors import DecodeError
from kraftpy.protocol.framing import (
    FrameReader,
    decode_response,
    encode_request,
    encode_response,
    read_request_header,
)
from kraftpy.protocol.registry import API_KEYS
from support.paths import reference


def _exchanges() -> list[dict]:
    path = reference("real-captures", "kafka-4.1", "wire-4.1.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def _served(key: int | None, version: int | None) -> bool:
    spec = API_KEYS.get(key)
    return spec is not None and spec.valid_versions[0] <= version <= spec.valid_versions[1]


def test_answered_frames_reencode_identically() -> None:
    checked = 0
    for ex in _exchanges():
        if ex["closed"] or not ex["response_hex"] or not _served(ex["api_key"], ex["api_version"]):
            continue
        request = bytes.fromhex(ex["request_hex"])
        reader = FrameReader()
        reader.feed(request)
        frame = reader.next_frame()
        header, key, version, offset = read_request_header(frame)
        body = API_KEYS[key].request.decode(frame[offset:], version)
        assert encode_request(body, version, header.correlation_id, header.client_id,
                              header_tags=header.unknown_tagged_fields) == request, ex["name"]
        response = bytes.fromhex(ex["response_hex"])
        corr, resp = decode_response(response[4:], key, version)
        assert corr == header.correlation_id
        assert encode_response(corr, key, version, resp) == response, ex["name"]
        checked += 1
    assert checked >= 35


def test_kip_511_answer_to_a_future_api_versions_parses() -> None:
    """ApiVersions v99 with a v2 header: the header parses; the answer is a v0 body."""
    seen = 0
    for ex in _exchanges():
        if ex["api_key"] == 18 and ex["api_version"] == 99 and not ex["closed"]:
            frame = bytes.fromhex(ex["request_hex"])[4:]
            header, key, version, _ = read_request_header(frame)
            assert (key, version) == (18, 99)
            corr, resp = decode_response(bytes.fromhex(ex["response_hex"])[4:], 18, 0)
            assert corr == header.correlation_id and resp.error_code == 35
            assert [(k.api_key, k.min_version, k.max_version) for k in resp.api_keys] == [(18, 0, 4)]
            seen += 1
    assert seen == 4


def test_bad_frames_kafka_closed_on_are_decode_errors() -> None:
    bad = 0
    for ex in _exchanges():
        if not ex["closed"] or _served(ex["api_key"], ex["api_version"]) and ex["api_key"] != 18:
            continue
        data = bytes.fromhex(ex["request_hex"])
        reader = FrameReader(max_size=104857600)
        with pytest.raises(DecodeError):
            reader.feed(data)
            frame = reader.next_frame()
            if frame is None:
                raise DecodeError("incomplete")  # the connection would wait; Kafka closed on a timeout
            header, key, version, offset = read_request_header(frame)
            spec = API_KEYS.get(key)
            if spec is None or not _served(key, version):
                raise DecodeError("not served")  # the dispatcher closes these
            spec.request.decode(frame[offset:], version)
        bad += 1
    assert bad >= 20
