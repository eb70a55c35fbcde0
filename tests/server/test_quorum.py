"""A lone voter's release and failure rules, on a real data dir: an answer goes once the fsync
covering its records (and everything appended before them) is done, an answer that depends on
nothing uncommitted goes at once, requests are handled in arrival order, and a failed fsync
stops the node and fails every answer still waiting, never a hang."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from kraftpy.controller.host import NodeStopped
from kraftpy.controller.log.fsync_ring import FsyncRing
from kraftpy.controller.quorum import QuorumError
from kraftpy.controller.quorum_controller import QuorumController
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraftpy.protocol.messages.describe_acls_request import DescribeAclsRequest
from support.lone_quorum import (
    GatedFsync,
    broker,
    open_lone,
    record_durable,
    running_lone,
    split_writers,
    wait_for,
    without_fsync_ring,
)

ANY = 1  # ResourceType, PatternType, AclOperation and AclPermissionType ANY
# No NoOpRecord of the idle timer, and a controller only (no producer-id block of its own for
# a timer to claim): the tests count the records and rounds of their requests.
QUIET = {"metadata.max.idle.interval.ms": "0", "process.roles": "controller",
         "listeners": "CONTROLLER://127.0.0.1:0"}


def _describe_acls() -> DescribeAclsRequest:
    """A read: it writes nothing, yet answers from the committed state."""
    return DescribeAclsRequest(resource_type_filter=ANY, resource_name_filter=None,
                               pattern_type_filter=ANY, principal_filter=None, host_filter=None,
                               operation=ANY, permission_type=ANY)


async def _ask(quorum: Any, outcomes: dict[str, Any], name: str, request: Any,
               version: int = 0) -> None:
    """Submit, recording the answer or the error that came instead."""
    try:
        outcomes[name] = await quorum.submit(request, version)
    except (NodeStopped, ValueError, OSError) as exc:
        outcomes[name] = exc


async def test_answers_wait_for_the_fsync_that_covers_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quorum = open_lone(tmp_path / "data", QUIET)
    got: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        blocks = await broker(quorum, 2)
        gated = GatedFsync(monkeypatch)
        nursery.start_soon(_ask, quorum, got, "write", blocks)
        await wait_for(lambda: gated.began, "the write's fsync")
        nursery.start_soon(_ask, quorum, got, "read", _describe_acls(), 3)
        nursery.start_soon(_ask, quorum, got, "early", BrokerHeartbeatRequest(
            broker_id=2, broker_epoch=blocks.broker_epoch,
            current_metadata_offset=0, want_fence=False, want_shut_down=False), 1)
        await trio.sleep(0.2)
        # The heartbeat's answer depends on nothing uncommitted: out at once. The write and
        # the read after it wait for the fsync that covers the write.
        assert set(got) == {"early"} and got["early"].error_code == 0
        end = gated.began[0]  # the write's record is the last this fsync covers
        assert quorum.hwm[0] < end
        gated.open(0)
        await wait_for(lambda: len(got) == 3, "the write's and the read's answers")
        assert got["write"].error_code == 0 and got["read"].error_code == 0
        assert quorum.hwm[0] >= end and quorum.storage.metadata.flushed_offset >= end
        gated.release()
        quorum.stop()
    # Stopped: asked again, the answer sends the client to the next controller.
    assert (await quorum.submit(blocks, 0)).error_code == ErrorCode.NOT_CONTROLLER
    quorum.storage.close()


async def test_a_failed_fsync_stops_the_node_and_fails_every_waiter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quorum = open_lone(tmp_path / "data", QUIET)
    outcomes: dict[str, Any] = {}
    with pytest.raises(BaseExceptionGroup) as failure:
        async with trio.open_nursery() as nursery:
            await running_lone(quorum, nursery)
            requests = [await broker(quorum, broker_id) for broker_id in (2, 3, 4, 5)]
            durable = quorum.hwm
            gated = GatedFsync(monkeypatch)
            gated.fail_rounds.add(0)
            for name, request in zip("abcd", requests, strict=True):
                nursery.start_soon(_ask, quorum, outcomes, name, request)
            await wait_for(lambda: gated.began and quorum.storage.metadata.log_end_offset
                           == durable[0] + 4, "all four appended, one fsync under way")
            gated.open(0)
            await trio.sleep(5)  # the failure ends the nursery well before this
    assert failure.group_contains(QuorumError, match="fsync of the metadata log failed")
    assert sorted(outcomes) == list("abcd")
    assert all(isinstance(outcome, NodeStopped) for outcome in outcomes.values()), outcomes
    assert quorum.hwm == durable and len(gated.began) == 1  # no fsync after the failed one
    with pytest.raises(NodeStopped):
        await quorum.submit(requests[0], 0)
    quorum.storage.close()


async def test_ticks_run_while_idle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ticks = 0
    tick = QuorumController.tick

    def counting(controller: QuorumController, **kwargs: int) -> Any:
        nonlocal ticks
        ticks += 1
        return tick(controller, **kwargs)

    monkeypatch.setattr(QuorumController, "tick", counting)
    quorum = open_lone(tmp_path / "data", QUIET)
    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        before = ticks
        await trio.sleep(0.55)
        quorum.stop()
    assert ticks - before >= 3  # every 100 ms, with nothing asked
    quorum.storage.close()


@pytest.mark.parametrize("rounds", ["the runner's", "overlapped"])
async def test_concurrent_waiters_share_fsyncs_and_are_answered_after_theirs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rounds: str) -> None:
    if rounds == "overlapped":
        split_writers(monkeypatch)  # 16 writers: two halves of 8, fsynced by io_uring
    else:
        without_fsync_ring(monkeypatch)
    quorum = open_lone(tmp_path / "data", QUIET)
    durable: list[int] = []  # the metadata end each finished fsync covered
    ends: dict[int, int] = {}  # id(response) -> the log end just past its records
    acked: list[tuple[int, int]] = []

    async def writer(request: Any) -> None:
        for _ in range(20):
            reply = await quorum.submit(request, 0)
            assert reply.error_code == 0
            # Answered only after an fsync that covered this block's record.
            assert durable and max(durable) >= ends[id(reply)]
            acked.append((reply.producer_id_start, reply.producer_id_len))

    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        requests = [await broker(quorum, broker_id) for broker_id in range(2, 18)]
        apply = quorum.controller.apply

        def noting_apply(result: Any, *, offset: int, txn_offset: int) -> None:
            ends[id(result.response)] = offset + len(result.records)
            apply(result, offset=offset, txn_offset=txn_offset)

        monkeypatch.setattr(quorum.controller, "apply", noting_apply)
        record_durable(monkeypatch, quorum, durable)
        fsyncs = quorum.fsyncs
        async with trio.open_nursery() as writers:
            for request in requests:
                writers.start_soon(writer, request)
        quorum.stop()
    assert len(acked) == 320
    ordered = sorted(acked)
    # No two overlap (the node's own blocks for idempotent producers may lie between).
    assert all(s + n <= after for (s, n), (after, _) in zip(ordered, ordered[1:], strict=False))
    assert quorum.fsyncs - fsyncs == len(durable) < 320 / 2  # shared
    overlapped = quorum.runner.overlapped
    if rounds == "overlapped" and FsyncRing.open() is not None:
        assert overlapped is not None and overlapped.rounds > 0
    else:  # the runner's own rounds (or this kernel refuses io_uring: the same)
        assert overlapped is None or overlapped.rounds == 0
    assert quorum.hwm[0] == quorum.storage.metadata.log_end_offset
    quorum.storage.close()


async def test_requests_during_an_fsync_are_handled_at_once_in_arrival_order(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each sees the effects of those before it (the next block follows the last), all are
    written at once, and none is answered before the fsync that covers it."""
    quorum = open_lone(tmp_path / "data", QUIET)
    got: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        requests = [await broker(quorum, broker_id) for broker_id in range(2, 7)]
        gated = GatedFsync(monkeypatch)
        nursery.start_soon(_ask, quorum, got, "a", requests[0])
        await wait_for(lambda: gated.began, "round 1")
        first_end = gated.began[0]
        arrived: list[str] = []

        async def ask(name: str, request: Any) -> None:
            arrived.append(name)  # no checkpoint between this and the submit
            await _ask(quorum, got, name, request)

        for name, request in zip("bcde", requests[1:], strict=True):
            nursery.start_soon(ask, name, request)
        await wait_for(lambda: quorum.storage.metadata.log_end_offset == first_end + 4,
                       "the four handled")
        await trio.sleep(0.05)
        assert got == {}  # handled, not released
        gated.open(0)
        await wait_for(lambda: len(gated.began) == 2, "round 2")
        assert gated.began[1] == first_end + 4  # the four, appended during round 1
        await wait_for(lambda: "a" in got, "round 1's answer")
        await trio.sleep(0.05)
        assert set(got) == {"a"}
        gated.release()
        await wait_for(lambda: len(got) == 5, "the four answers")
        starts = [got[name].producer_id_start for name in ["a", *arrived]]
        lengths = [got[name].producer_id_len for name in ["a", *arrived]]
        assert starts == [starts[0] + sum(lengths[:i]) for i in range(5)]  # arrival order
        quorum.stop()
    quorum.storage.close()


async def test_a_caller_gone_while_waiting_leaves_its_operation_and_the_answers_behind_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As Kafka's controller when a connection drops: the operation was handled and is
    committed; only its answer is lost, and the answers after it still go."""
    quorum = open_lone(tmp_path / "data", QUIET)
    got: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        first, second = await broker(quorum, 2), await broker(quorum, 3)
        gated = GatedFsync(monkeypatch)
        end = quorum.storage.metadata.log_end_offset
        before = quorum.controller.producer_ids.next_producer_id
        with trio.move_on_after(0.05) as scope:
            await quorum.submit(first, 0)
        assert scope.cancelled_caught
        nursery.start_soon(_ask, quorum, got, "b", second)
        await wait_for(lambda: quorum.storage.metadata.log_end_offset == end + 2, "B's append")
        gated.release()
        await wait_for(lambda: "b" in got, "B's answer")
        assert got["b"].error_code == 0 and quorum.hwm[0] == end + 2
        # The gone caller's block came first, and stays taken.
        assert got["b"].producer_id_start == before + got["b"].producer_id_len
        assert quorum.controller.producer_ids.next_producer_id == before + \
            2 * got["b"].producer_id_len
        quorum.stop()
    quorum.storage.close()


async def test_a_request_whose_handling_fails_fails_only_its_caller(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quorum = open_lone(tmp_path / "data", QUIET)
    got: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        request = await broker(quorum, 2)
        handle = quorum.controller.handle

        def raising(req: Any, version: int, **kwargs: Any) -> Any:
            if req == "boom":
                raise ValueError("no such thing")
            return handle(req, version, **kwargs)

        monkeypatch.setattr(quorum.controller, "handle", raising)
        end = quorum.storage.metadata.log_end_offset
        nursery.start_soon(_ask, quorum, got, "boom", "boom")
        nursery.start_soon(_ask, quorum, got, "late", request)
        await wait_for(lambda: len(got) == 2, "both outcomes")
        assert isinstance(got["boom"], ValueError) and got["late"].error_code == 0
        assert quorum.running and quorum.hwm[0] == end + 1  # only the block's record
        quorum.stop()
    quorum.storage.close()
