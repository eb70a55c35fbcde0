"""The Raft peers' connections negotiate versions as Kafka's NetworkClient does: ApiVersions
first, then each API at the highest version both sides serve; a request the peer cannot carry
fails (the core sees no answer) instead of going out at a version that changes its meaning."""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
import trio
from kraftpy.controller.raft import messages
from kraftpy.controller.raft.peers import Peers, UnsupportedByPeer, _Connection
from kraftpy.controller.raft.voters import ReplicaKey
from kraftpy.protocol.framing import FrameReader, decode_request, encode_response
from kraftpy.protocol.messages.api_versions_response import ApiVersion, ApiVersionsResponse
from kraftpy.protocol.messages.begin_quorum_epoch_response import BeginQuorumEpochResponse

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qk"


def _vote(pre_vote: bool) -> Any:
    return messages.vote_request(CLUSTER, 3, ReplicaKey(1), ReplicaKey(2), last_epoch=2,
                                 last_offset=10, pre_vote=pre_vote)


def _begin_epoch() -> Any:
    return messages.begin_quorum_epoch_request(CLUSTER, 3, 1, (), ReplicaKey(2))


def _connection(served: dict[int, tuple[int, int]]) -> _Connection:
    connection = _Connection.__new__(_Connection)
    connection.served = served
    return connection


def test_each_api_goes_at_the_highest_version_both_serve() -> None:
    conn = _connection({52: (0, 1), 53: (0, 1), 54: (0, 0), 1: (0, 16), 59: (0, 1)})
    assert conn.version_for(_vote(pre_vote=False)) == 1
    assert conn.version_for(_begin_epoch()) == 1
    newer = _connection({52: (0, 9), 1: (4, 40)})
    assert newer.version_for(_vote(pre_vote=True)) == 2  # never above kraftpy's own


def test_a_request_the_peer_cannot_carry_is_not_sent() -> None:
    with pytest.raises(UnsupportedByPeer, match="pre-vote"):
        _connection({52: (0, 1)}).version_for(_vote(pre_vote=True))
    with pytest.raises(UnsupportedByPeer, match="API 52"):
        _connection({}).version_for(_vote(pre_vote=False))
    with pytest.raises(UnsupportedByPeer, match="API 52"):
        _connection({52: (3, 5)}).version_for(_vote(pre_vote=False))


async def test_a_peer_is_asked_its_versions_before_the_first_request() -> None:
    """A peer serving BeginQuorumEpoch v0 only: the request goes at v0, after ApiVersions."""
    seen: list[tuple[int, int]] = []

    async def peer(stream: trio.SocketStream) -> None:
        reader = FrameReader(1 << 20)
        async for data in stream:
            reader.feed(data)
            while (frame := reader.next_frame()) is not None:
                header, _request = decode_request(bytes(frame))
                seen.append((header.request_api_key, header.request_api_version))
                if header.request_api_key == 18:
                    answer: Any = ApiVersionsResponse(error_code=0, api_keys=[
                        ApiVersion(api_key=18, min_version=0, max_version=3),
                        ApiVersion(api_key=53, min_version=0, max_version=0)])
                else:
                    answer = BeginQuorumEpochResponse(error_code=0, topics=[])
                await stream.send_all(encode_response(
                    header.correlation_id, header.request_api_key,
                    header.request_api_version, answer))

    async with trio.open_nursery() as nursery:
        listeners = await nursery.start(partial(trio.serve_tcp, peer, 0, host="127.0.0.1"))
        port = listeners[0].socket.getsockname()[1]
        answers: list[tuple[int, Any]] = []
        failures: list[int] = []
        peers = Peers(1, {2: ("127.0.0.1", port)}, request_timeout_ms=2000,
                      on_response=lambda src, cid, r: answers.append((cid, r)),
                      on_failure=lambda dst, cid: failures.append(cid))
        nursery.start_soon(peers.run)
        peers.send(2, 7, _begin_epoch())
        peers.send(2, 8, _vote(pre_vote=False))  # not served at all: fails, no frame sent
        with trio.fail_after(5):
            while len(answers) + len(failures) < 2:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    assert seen[:2] == [(18, 3), (53, 0)]
    assert [cid for cid, _ in answers] == [7] and failures == [8]
    assert all(key != 52 for key, _ in seen)
