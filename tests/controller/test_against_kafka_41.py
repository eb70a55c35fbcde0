"""The control logic's answers, encoded, against the bytes a real Kafka 4.1 sent.

Requests recorded from Kafka 4.1 (wire-4.1.jsonl) are decoded with our codecs, answered by the
controller set up as that Kafka node was (node 1, its cluster id and listeners), and the encoded
frame must equal Kafka's byte for byte. DescribeQuorum is the Raft core's answer, for a node
leading alone at Kafka's epoch, log end and clock.
"""

from __future__ import annotations

import json
import random

import pytest
from kraftpy.controller.raft.config import RaftConfig
from kraftpy.controller.raft.core import RaftNode
from kraftpy.controller.raft.log_state import RaftLog
from kraftpy.controller.raft.quorum_state import ElectionState
from kraftpy.controller.raft.voters import VoterSet
from kraftpy.controller.settings import AdvertisedEndpoint, ControllerSettings
from kraftpy.protocol.framing import decode_request, decode_response, encode_response
from support.controller_harness import Harness
from support.paths import reference

CLUSTER_ID = "G0dMBTBsQ--_v26MQTG0jA"
LISTENERS = {"client": "PLAINTEXT", "controller": "CONTROLLER"}


def exchanges(api_key: int) -> list[dict]:
    path = reference("real-captures", "kafka-4.1", "wire-4.1.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return [r for r in rows if r["api_key"] == api_key and r["response_hex"]]


def kafka_node() -> Harness:
    return Harness(settings=ControllerSettings(
        cluster_id=CLUSTER_ID, node_id=1,
        advertised_listeners=(AdvertisedEndpoint("PLAINTEXT", "127.0.0.1", 39092),
                              AdvertisedEndpoint("CONTROLLER", "127.0.0.1", 39093))))


def answer(h: Harness, row: dict):
    header, request = decode_request(bytes.fromhex(row["request_hex"])[4:])
    result = h.qc.handle(request, row["api_version"], now_ms=h.now_ms, next_offset=h.end,
                         listener=LISTENERS[row["listener"]])
    h.write(result)
    return header, result.response


def frame(header, row: dict, response) -> str:
    return encode_response(header.correlation_id, row["api_key"], row["api_version"],
                           response).hex()


@pytest.mark.parametrize("api_key", [60, 62, 63, 67])
def test_same_bytes_as_kafka(api_key):
    rows = exchanges(api_key)
    assert rows
    for row in rows:
        h = kafka_node()
        header, response = answer(h, row)
        assert frame(header, row, response) == row["response_hex"], row["name"]


def test_describe_quorum_same_bytes_given_kafkas_offsets_and_clock():
    # DescribeQuorum is the Raft core's answer: node 1 leading alone, at Kafka's epoch, log end
    # and clock, its CONTROLLER listener where Kafka's was.
    for row in exchanges(55):
        expected = bytes.fromhex(row["response_hex"])
        _, kafka = decode_response(expected[4:], 55, row["api_version"])
        part = kafka.topics[0].partitions[0]
        voter = part.current_voters[0]
        assert part.high_watermark == voter.log_end_offset  # a lone voter: all of it committed
        now = voter.last_fetch_timestamp
        core = RaftNode(config=RaftConfig(), node_id=1, directory_id=voter.replica_directory_id,
                        cluster_id=CLUSTER_ID,
                        voters=VoterSet.static({1: ("127.0.0.1", 39093)}),
                        log=RaftLog(end_offset=voter.log_end_offset - 1,
                                    flushed_offset=voter.log_end_offset - 1,
                                    epochs=[(part.leader_epoch - 1, 0)]),
                        election=ElectionState(epoch=part.leader_epoch - 1), now_ms=now,
                        rng=random.Random(1), endpoints=(("CONTROLLER", "127.0.0.1", 39093),))
        core._take()  # elected alone; its LeaderChange is the log's last record
        core.on_flushed(voter.log_end_offset, now)
        assert (core.epoch, core.high_watermark) == (part.leader_epoch, part.high_watermark)
        header, request = decode_request(bytes.fromhex(row["request_hex"])[4:])
        response = core.describe_quorum(request, row["api_version"], now)
        assert frame(header, row, response) == row["response_hex"], row["name"]


def test_init_producer_id_sequence_same_bytes():
    # The whole recorded sequence, ids included: Kafka's first answer found no block ready
    # (COORDINATOR_LOAD_IN_PROGRESS) and so does ours; then both hand out 0, 1, 2, ...
    rows = exchanges(22)
    assert len(rows) >= 14
    h = kafka_node()
    for row in rows:
        header, response = answer(h, row)
        assert frame(header, row, response) == row["response_hex"], row["name"]
