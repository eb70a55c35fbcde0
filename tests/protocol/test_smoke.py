"""First checks of the generated codecs against real Kafka bytes."""

from __future__ import annotations

import json

from support.paths import reference

from kraftpy.protocol.framing import decode_response, encode_request, encode_response, read_request_header
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.protocol.registry import API_KEYS


def test_init_producer_id_round_trip_every_version() -> None:
    req = InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000)
    for version in range(7):
        assert InitProducerIdRequest.decode(req.encode(version), version) == req


def test_capture_frames_reencode_identically() -> None:
    path = reference("real-captures", "kafka-4.1", "wire-4.1.jsonl")
    checked = 0
    for line in path.read_text().splitlines():
        ex = json.loads(line)
        if ex["closed"] or not ex["response_hex"]:
            continue
        request = bytes.fromhex(ex["request_hex"])
        header, key, version, offset = read_request_header(request[4:])
        spec = API_KEYS[key]
        if not spec.valid_versions[0] <= version <= spec.valid_versions[1]:
            continue
        body = spec.request.decode(request[4 + offset:], version)
        again = encode_request(body, version, header.correlation_id, header.client_id,
                               header_tags=header.unknown_tagged_fields)
        assert again == request, ex["name"]
        response = bytes.fromhex(ex["response_hex"])
        corr, resp = decode_response(response[4:], key, version)
        assert encode_response(corr, key, version, resp) == response, ex["name"]
        checked += 1
    assert checked >= 30
