"""Quick answers (idempotent InitProducerId by its bytes) answer exactly as the full path does.

Two nodes in the same state, each a lone voter (the node's quorum over a real QuorumController
and data dir) whose commits the test makes (`lone_quorum.settle`): one is served the way the server
serves a connection (receives of any size; quick answers for each receive and for the
FrameReader's frames, `dispatch` for what they hand over), the other by `dispatch` alone.
Every answer must be the same bytes and the controllers must end in the same state, over
every served version, ids running dry (COORDINATOR_LOAD_IN_PROGRESS), claims, commits, other
requests in between, and with the security layer on (ACLs, quotas), where the quick path must
leave every request to dispatch.
"""

from __future__ import annotations

import shutil
import struct
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kraftpy.controller import api
from kraftpy.controller.api import quick as quick_module
from kraftpy.controller.api.dispatch import dispatch
from kraftpy.controller.api.quick import QuickAnswers
from kraftpy.controller.committed_image import CommittedImage
from kraftpy.controller.node import RunningNode
from kraftpy.controller.producer_id_manager import NOT_READY, ProducerIdManager
from kraftpy.controller.quorum import Quorum
from kraftpy.controller.quorum_controller import QuorumController
from kraftpy.controller.security.layer import SecurityLayer
from kraftpy.controller.server import Server
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.framing import FrameReader, decode_response, encode_request
from kraftpy.protocol.messages.api_versions_request import ApiVersionsRequest
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from support.lone_quorum import lone_config, open_lone, settle
from support.server_shell import Client

NOW_MS = 1_700_000_000_000
SECURITY = {
    None: {},
    "acls": {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"},
    "quota": {"quota.request.rate.per.principal": "1000000"},
}
_OPEN: list[tuple[Quorum, str]] = []  # every world's quorum and data dir, until closed


@dataclass
class World:
    node: RunningNode
    quorum: Quorum
    ctx: api.RequestContext

    @property
    def controller(self) -> QuorumController:
        return self.quorum.controller

    def commit(self) -> None:
        """Everything written so far committed (fsynced), then the timers, whose records
        wait for the next commit."""
        settle(self.quorum, tick=True)

    def state(self) -> tuple:
        own = self.controller.own_ids
        return (self.controller.describe(), self.quorum.raft.next_offset, own.low_water,
                own.current and own.current.next_id, len(own.ready), len(own.claims))


def world(block_size: int, security: str | None = None) -> World:
    data = tempfile.mkdtemp(prefix="quick-answers-")
    config = lone_config(Path(data), SECURITY[security])
    quorum = open_lone(Path(data), SECURITY[security], clock=[NOW_MS])
    _OPEN.append((quorum, data))
    # Nothing is replayed yet (a new data dir): the controller, with this block size instead.
    host = quorum.host
    settings = replace(host.controller.settings, producer_id_block_size=block_size)
    host.make_controller = lambda: QuorumController(settings)
    controller = host.make_controller()
    controller.on_committed(0, 0)
    host.controller, host.image = controller, CommittedImage(host.make_controller(), 0)
    node = RunningNode(config, quorum.cluster_id, quorum, {"metadata.version": (7, 27)})
    w = World(node, quorum, api.RequestContext(
        listener="PLAINTEXT", listener_type=api.BROKER, security_protocol="PLAINTEXT",
        client_host="127.0.0.1", client_port=40000))
    quorum.runner.step(quorum.runner.driver.start)
    settle(quorum)  # elected: its LeaderChange committed, the controller active
    assert quorum.running
    w.commit()  # the bootstrap
    w.commit()  # the first own block's claim
    w.commit()  # ... now usable
    if security is not None:
        layer = SecurityLayer.from_config(config)
        layer.install(_Hooks(), node)
        layer.attach_acls(controller)
        assert layer.checks_requests
    return w


def close_worlds() -> None:
    while _OPEN:
        quorum, data = _OPEN.pop()
        quorum.storage.close()
        shutil.rmtree(data, ignore_errors=True)


class _Hooks:
    """What SecurityLayer.install hooks into on a server."""

    def __init__(self) -> None:
        self.connection_hooks: list = []
        self.close_hooks: list = []


async def serve_quick(w: World, frames: list[bytes], receive_size: int = 65536
                      ) -> list[bytes]:
    """As the server's connection loop does, the frames arriving `receive_size` bytes at a
    time: quick answers, the rest through dispatch."""
    data = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    reader = FrameReader()
    quick = QuickAnswers.for_connection(w.node, w.ctx, 1 << 20)
    assert quick is not None
    out: list[bytes] = []
    for at in range(0, len(data), receive_size):
        received = data[at:at + receive_size]
        if not reader.buffered:
            received = received[quick.received(received, out):]
        reader.feed(received)
        while (frame := quick.frames(reader.next_frame, out)) is not None:
            out.append(await dispatch(w.node, frame, w.ctx))
    assert not reader.buffered
    return out


async def serve_full(w: World, frames: list[bytes]) -> list[bytes]:
    return [await dispatch(w.node, frame, w.ctx) for frame in frames]


@pytest.fixture(autouse=True)
def closed_worlds() -> Any:
    yield
    close_worlds()


def init(version: int, correlation_id: int, client_id: str | None = "quick", *,
         producer_id: int = -1, producer_epoch: int = -1, transactional_id: str | None = None,
         timeout_ms: int = 60000) -> bytes:
    request = InitProducerIdRequest(transactional_id=transactional_id,
                                    transaction_timeout_ms=timeout_ms,
                                    producer_id=producer_id, producer_epoch=producer_epoch)
    return encode_request(request, version, correlation_id, client_id)[4:]


def answer(raw: bytes, version: int) -> tuple[int, Any]:
    return decode_response(raw[4:], 22, version)


async def test_a_pipelined_run_is_answered_quickly_with_the_next_ids() -> None:
    w = world(1000)
    first = await serve_quick(w, [init(4, 1)])  # the full path, which remembers it
    data = b"".join(struct.pack(">i", len(f)) + f for f in (init(4, c) for c in range(2, 50)))
    out: list[bytes] = []
    quick = QuickAnswers.for_connection(w.node, w.ctx, 1 << 20)
    assert quick is not None and quick.received(data, out) == len(data)  # every frame
    answers = [answer(raw, 4) for raw in first + out]
    assert [corr for corr, _ in answers] == list(range(1, 50))
    pids = [r.producer_id for _, r in answers]
    assert pids == list(range(pids[0], pids[0] + 49))
    assert all(r.error_code == 0 and r.producer_epoch == 0 for _, r in answers)
    assert w.controller.own_ids.current.next_id == pids[-1] + 1


async def test_other_frames_go_to_dispatch_in_order() -> None:
    w = world(1000)
    await serve_quick(w, [init(4, 0)])
    api_versions = encode_request(ApiVersionsRequest(client_software_name="q",
                                                     client_software_version="1"), 3, 3)[4:]
    frames = [init(4, 1), init(4, 2), api_versions, init(4, 4),
              init(4, 5, producer_id=7),  # INVALID_REQUEST: not idempotent, never remembered
              init(4, 6, transactional_id=None, timeout_ms=1)]  # new bytes: full path first
    out = await serve_quick(w, frames)
    assert [struct.unpack_from(">i", raw, 4)[0] for raw in out] == [1, 2, 3, 4, 5, 6]
    assert answer(out[4], 4)[1].error_code == ErrorCode.INVALID_REQUEST
    assert len(w.node.quick_table.known[api.BROKER]) == 2


async def test_a_stopped_quorum_leaves_every_request_to_dispatch() -> None:
    w = world(1000)
    await serve_quick(w, [init(4, 1)])
    w.node.quorum.stop()
    out = await serve_quick(w, [init(4, 2)])
    # The full path's answer: ask the coordinator again (this node no longer leads).
    assert answer(out[0], 4)[1].error_code == ErrorCode.NOT_COORDINATOR


def test_the_remembered_requests_are_bounded() -> None:
    table = quick_module.QuickTable()
    for i in range(quick_module.MAX_KNOWN + 10):
        frame = init(4, 1, f"client-{i}")
        table.remember(api.BROKER, frame, InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60000), 4)
    assert 0 < len(table.known[api.BROKER]) <= quick_module.MAX_KNOWN
    fresh = quick_module.QuickTable()
    long_client = init(4, 1, "c" * quick_module.MAX_KNOWN_FRAME)
    fresh.remember(api.BROKER, long_client, InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60000), 4)
    assert not fresh.known.get(api.BROKER)


def test_only_idempotent_requests_have_a_quick_answer() -> None:
    from kraftpy.controller.api.init_producer_id import quick_answer

    def q(version: int, **fields: Any) -> Any:
        return quick_answer(InitProducerIdRequest(**fields), version)

    assert all(q(v, transactional_id=None) is not None for v in range(6))
    assert q(4, transactional_id="t") is None
    assert q(3, transactional_id=None, producer_id=5) is None
    assert q(3, transactional_id=None, producer_id=5, producer_epoch=2) is not None


# A request: (version, client id, producer id and epoch given, timeout) or another API.
requests = st.one_of(
    st.tuples(st.integers(0, 5), st.sampled_from(["a", "client-b", None, ""]),
              st.sampled_from([(-1, -1), (-1, -1), (5, -1), (9, 3)]),
              st.sampled_from([60000, 1000])),
    st.just("api_versions"),
)
steps = st.lists(st.one_of(st.just("commit"), st.lists(requests, min_size=1, max_size=40)),
                 min_size=1, max_size=12)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps=steps, block_size=st.sampled_from([3, 10, 1000]),
       security=st.sampled_from([None, None, "acls", "quota"]),
       receive_size=st.sampled_from([65536, 65536, 1, 7, 36, 100]))
async def test_quick_and_full_paths_answer_the_same_bytes(steps: list, block_size: int,
                                                         security: str | None,
                                                         receive_size: int) -> None:
    close_worlds()  # the last example's
    quick_world, full_world = world(block_size, security), world(block_size, security)
    correlation = 0
    for step in steps:
        if step == "commit":
            quick_world.commit()
            full_world.commit()
            continue
        frames = []
        for request in step:
            correlation += 1
            if request == "api_versions":
                frames.append(encode_request(ApiVersionsRequest(
                    client_software_name="q", client_software_version="1"), 3, correlation)[4:])
                continue
            version, client_id, (pid, epoch), timeout = request
            if version < 3:  # no producer id and epoch in the request before v3
                pid = epoch = -1
            frames.append(init(version, correlation, client_id, producer_id=pid,
                               producer_epoch=epoch, timeout_ms=timeout))
        quick_out = await serve_quick(quick_world, frames, receive_size)
        full_out = await serve_full(full_world, frames)
        assert quick_out == full_out
        assert quick_world.state() == full_world.state()


# The manager's states: (operation, argument) applied in order, then the run is compared.
manager_ops = st.lists(st.one_of(
    st.tuples(st.just("claim"), st.integers(1, 3)),  # claims, replayed, maybe committed
    st.tuples(st.just("commit"), st.just(0)),
    st.tuples(st.just("next_id"), st.integers(1, 40)),
    st.tuples(st.just("take"), st.integers(1, 40)),
    st.tuples(st.just("exhaust"), st.just(0)),
), max_size=25)


def _drive(ops: list, block_size: int) -> ProducerIdManager:
    from kraftpy.protocol.records.producer_ids_record import ProducerIdsRecord

    own = ProducerIdManager(1, block_size, 0.9)
    offset = next_first = 0
    for op, arg in ops:
        if op == "claim":
            for _ in range(arg):
                own.claimed(offset)
                next_first += block_size
                own.on_replay(ProducerIdsRecord(broker_id=1, broker_epoch=-1,
                                                next_producer_id=next_first), offset)
                offset += 1
        elif op == "commit":
            own.on_committed(offset)
        elif op == "next_id":
            for _ in range(arg):
                own.next_id()
        elif op == "take":
            for _ in range(arg):
                own.take(1)
        else:
            own.exhausted = True
    return own


@settings(max_examples=300, deadline=None)
@given(ops=manager_ops, block_size=st.sampled_from([1, 3, 10, 50]), count=st.integers(1, 200))
def test_a_run_taken_at_once_is_what_one_at_a_time_gives(ops: list, block_size: int,
                                                         count: int) -> None:
    """`take(n)` (the quick answers' run) gives and leaves what `take(1)` (the full path's
    handle) does called once per request, until it stops."""
    one_by_one, at_once = _drive(ops, block_size), _drive(ops, block_size)
    run = at_once.take(count)
    given_ids = []
    for _ in range(count):
        got = one_by_one.take(1)
        if got is None:
            break
        given_ids.append(got[0])
    if run is None:
        assert given_ids == []
        return
    first, taken = run
    if first == NOT_READY:
        assert taken == count and given_ids == [NOT_READY] * count
        return
    assert 1 <= taken <= count and given_ids[:taken] == list(range(first, first + taken))
    if taken < count:  # the run ends where one at a time stops (a claim due, a switch)
        assert len(given_ids) == taken
    assert vars(at_once.current) == vars(one_by_one.current)
    assert at_once.take(1) == one_by_one.take(1)


async def _served_by_the_shell(w: World, data: bytes, cuts: list[int], frames: int
                               ) -> list[bytes]:
    """`data` sent to a real Server over TCP, cut at the given offsets; its answers."""
    server = Server(w.node.config, w.node)
    server.config = w.node.config.with_bound_ports(await server.bind())
    out: list[bytes] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        client = await Client.connect(server, "PLAINTEXT")
        at = 0
        for cut in cuts:
            await client.send(data[at:cut])
            at = cut
            await trio.sleep(0.002)  # apart: each piece is a receive of its own
        await client.send(data[at:])
        with trio.fail_after(10):
            while len(out) < frames:
                raw = await client.frame()
                assert raw is not None, f"closed after {len(out)} answers"
                out.append(struct.pack(">i", len(raw)) + raw)
            # and nothing more: the next answer is the one to a last request
            await client.send(encode_request(ApiVersionsRequest(), 0, 999_999))
            raw = await client.frame()
            assert raw is not None and struct.unpack_from(">i", raw)[0] == 999_999
        await client.aclose()
        await server.drain(timeout_s=5)
        nursery.cancel_scope.cancel()
    return out


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(versions=st.lists(st.integers(0, 5), min_size=20, max_size=120),
       at_frames=st.sets(st.integers(1, 119), min_size=1, max_size=8),
       in_frames=st.sets(st.integers(1, 5000), max_size=2),
       others=st.sets(st.integers(0, 119), max_size=5))
async def test_the_server_answers_as_the_full_path_over_tcp(versions: list[int],
                                                           at_frames: set[int],
                                                           in_frames: set[int],
                                                           others: set[int]) -> None:
    """The connection loop itself: receives that begin at a frame or inside one, other
    requests in between."""
    close_worlds()  # the last example's
    frames = []
    for i, version in enumerate(versions):
        if i in others:
            frames.append(encode_request(ApiVersionsRequest(
                client_software_name="q", client_software_version="1"), 3, i)[4:])
        else:
            frames.append(init(version, i, f"tcp-{version % 2}"))
    data = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    starts = [0]
    for f in frames:
        starts.append(starts[-1] + 4 + len(f))
    cuts = sorted({starts[i] for i in at_frames if i < len(frames)}
                  | {i for i in in_frames if i < len(data)})
    quick_world, full_world = world(50), world(50)
    assert await _served_by_the_shell(quick_world, data, cuts, len(frames)) == \
        await serve_full(full_world, frames)
    assert quick_world.state() == full_world.state()


async def test_receives_that_begin_at_a_frame_are_answered_from_the_receive() -> None:
    frames = [init(v % 6, i, "aligned") for i, v in enumerate(range(40))]
    data = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    starts = [0]
    for f in frames:
        starts.append(starts[-1] + 4 + len(f))
    taken = []
    received = QuickAnswers.received

    def counted(self: QuickAnswers, data: bytes, outgoing: list[bytes]) -> int:
        taken.append(received(self, data, outgoing))
        return taken[-1]

    quick_world, full_world = world(1000), world(1000)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(QuickAnswers, "received", counted)
        answers = await _served_by_the_shell(quick_world, data, starts[6:-1:5], len(frames))
    assert answers == await serve_full(full_world, frames)
    assert sum(taken) == len(data) - starts[6]  # all but the first receive's six frames


def test_quick_answers_can_be_turned_off_and_a_bad_value_is_refused(tmp_path: Path) -> None:
    from kraftpy.controller.config import ConfigError
    from kraftpy.controller.node import quick_answers

    assert quick_answers(lone_config(tmp_path)) is True  # the default
    off = lone_config(tmp_path, {"kraftpy.quick.answers": "false"})
    assert quick_answers(off) is False
    node = RunningNode(off, "c", None, {})  # type: ignore[arg-type]
    ctx = api.RequestContext(listener="PLAINTEXT", listener_type=api.BROKER,
                             security_protocol="PLAINTEXT", client_host="h", client_port=1)
    assert QuickAnswers.for_connection(node, ctx, 1 << 20) is None  # every request: dispatch
    with pytest.raises(ConfigError, match="kraftpy.quick.answers: 'maybe' is not true or false"):
        quick_answers(lone_config(tmp_path, {"kraftpy.quick.answers": "maybe"}))
