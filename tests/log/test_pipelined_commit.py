"""Commits of a lone voter on a real data dir, while fsyncs run in a worker thread: an answer
waits for an fsync that began after its records were written; a failed fsync fails every
answer not yet released and stops the node; an operation that cannot be written leaves no
trace, and records that cannot reach the log stop the node with nothing of them answered."""

from __future__ import annotations

import errno
import uuid
from pathlib import Path
from typing import Any

import pytest
import trio
from kraftpy.controller.host import NodeStopped
from kraftpy.controller.quorum import Quorum, QuorumError
from kraftpy.controller.result import ControllerResult
from kraftpy.controller.transaction_control import TxnPartition, TxnRecord
from kraftpy.protocol.errors import EncodeError
from kraftpy.protocol.metadata_frame import encode_metadata_record
from kraftpy.protocol.records.config_record import ConfigRecord
from kraftpy.protocol.records.transaction_log_key import TransactionLogKey
from support.lone_quorum import GatedFsync, broker, open_lone, running_lone, wait_for


async def _ask(quorum: Quorum, outcomes: dict[str, object], name: str,
               request: Any) -> None:
    """Submit, recording the answer or the error that came instead."""
    try:
        outcomes[name] = await quorum.submit(request, 0)
    except (NodeStopped, EncodeError, OSError) as exc:
        outcomes[name] = exc


async def test_an_op_written_after_a_round_began_waits_for_the_next_round(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quorum = open_lone(tmp_path / "data")
    storage = quorum.storage
    answered: dict[str, object] = {}
    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        first, second = await broker(quorum, 2), await broker(quorum, 3)
        gated = GatedFsync(monkeypatch)
        fsyncs = quorum.fsyncs
        nursery.start_soon(_ask, quorum, answered, "a", first)
        await wait_for(lambda: gated.began, "round 1 to reach its fsync")
        a_end = storage.metadata.log_end_offset
        assert gated.began == [a_end]  # round 1 covers A's record, and nothing after it
        nursery.start_soon(_ask, quorum, answered, "b", second)  # appended during round 1
        await wait_for(lambda: storage.metadata.log_end_offset == a_end + 1, "B's append")
        await trio.sleep(0.05)
        assert answered == {} and quorum.hwm[0] < a_end

        gated.open(0)  # round 1 is durable: it releases A only
        await wait_for(lambda: "a" in answered, "A's answer")
        assert quorum.hwm[0] == a_end
        await wait_for(lambda: len(gated.began) == 2, "round 2")
        assert gated.began[1] == a_end + 1
        await trio.sleep(0.05)
        assert "b" not in answered  # B's bytes came after round 1 began

        gated.open(1)
        await wait_for(lambda: "b" in answered, "B's answer")
        assert quorum.hwm[0] == a_end + 1 and quorum.fsyncs == fsyncs + 2
        a, b = answered["a"], answered["b"]
        assert a.error_code == b.error_code == 0  # type: ignore[attr-defined]
        assert b.producer_id_start == a.producer_id_start + a.producer_id_len  # type: ignore[attr-defined]
        gated.release()
        quorum.stop()
    storage.close()


async def test_a_failed_round_fails_the_answers_appended_during_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quorum = open_lone(tmp_path / "data")
    storage = quorum.storage
    outcomes: dict[str, object] = {}
    with pytest.raises(BaseExceptionGroup) as failure:
        async with trio.open_nursery() as nursery:
            await running_lone(quorum, nursery)
            first, second = await broker(quorum, 2), await broker(quorum, 3)
            durable = quorum.hwm
            gated = GatedFsync(monkeypatch)
            gated.fail_rounds.add(0)
            nursery.start_soon(_ask, quorum, outcomes, "a", first)
            await wait_for(lambda: gated.began, "round 1 to reach its fsync")
            nursery.start_soon(_ask, quorum, outcomes, "b", second)
            await wait_for(lambda: storage.metadata.log_end_offset > gated.began[0], "B's append")
            gated.open(0)
            await trio.sleep(5)  # the failure ends the nursery well before this
    assert failure.group_contains(QuorumError, match="Input/output error")
    assert isinstance(outcomes["a"], NodeStopped) and isinstance(outcomes["b"], NodeStopped)
    assert quorum.hwm == durable and len(gated.began) == 1  # no round after the failed one
    with pytest.raises(NodeStopped):
        await quorum.submit(first, 0)
    storage.close()


async def test_what_a_round_made_durable_is_answered_though_the_next_round_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quorum = open_lone(tmp_path / "data")
    storage = quorum.storage
    outcomes: dict[str, object] = {}
    with pytest.raises(BaseExceptionGroup) as failure:
        async with trio.open_nursery() as nursery:
            await running_lone(quorum, nursery)
            first, second = await broker(quorum, 2), await broker(quorum, 3)
            gated = GatedFsync(monkeypatch)
            gated.fail_rounds.add(1)
            nursery.start_soon(_ask, quorum, outcomes, "a", first)
            await wait_for(lambda: gated.began, "round 1 to reach its fsync")
            a_end = gated.began[0]
            nursery.start_soon(_ask, quorum, outcomes, "b", second)
            await wait_for(lambda: storage.metadata.log_end_offset > a_end, "B's append")
            gated.release()
            await trio.sleep(5)  # the failure ends the nursery well before this
    assert failure.group_contains(QuorumError, match="Input/output error")
    assert getattr(outcomes["a"], "error_code", None) == 0, outcomes["a"]
    assert isinstance(outcomes["b"], NodeStopped)
    assert quorum.hwm[0] == a_end and len(gated.began) == 2
    storage.close()


def _tombstone(transactional_id: str) -> TxnRecord:
    return TxnRecord(TxnPartition(uuid.UUID(int=7), 0),
                     TransactionLogKey(transactional_id=transactional_id), None)


def _config(name: str) -> tuple[ConfigRecord, int]:
    return ConfigRecord(resource_type=2, resource_name="t", name=name, value="v"), 0


# How every record of `_config` begins: frame version, ConfigRecord, version 0, topic "t".
_CONFIG_FRAME = encode_metadata_record(*_config("x"))[:6]


def _logged(storage: Any, start: int) -> list[tuple[int, bytes]]:
    """The scripted operations' records from offset `start` on, at their offsets (the
    controller's own, such as a timer's, left out)."""
    out = []
    for batch in storage.metadata.read(start):
        if batch.is_control:
            continue
        for offset, value in enumerate(batch.values(), batch.base_offset):
            if offset >= start and value[:6] == _CONFIG_FRAME:
                out.append((offset, value))
    return out


def _script(quorum: Quorum, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Requests (name, metadata records, txn records) write what they say and are answered
    with their name; where each was applied (its first record's offset) is noted."""
    applied: list[tuple[str, int]] = []
    controller = quorum.controller
    apply = controller.apply

    def handle(request: Any, api_version: int, **kwargs: Any) -> ControllerResult:
        name, records, txn_records = request
        return ControllerResult(response=name, records=list(records),
                                txn_records=list(txn_records))

    def noting_apply(result: ControllerResult, *, offset: int, txn_offset: int) -> None:
        if isinstance(result.response, str):
            applied.append((result.response, offset))
        apply(result, offset=offset, txn_offset=txn_offset)

    monkeypatch.setattr(controller, "handle", handle)
    monkeypatch.setattr(controller, "apply", noting_apply)
    return applied


async def _during_a_held_round(quorum: Quorum, monkeypatch: pytest.MonkeyPatch,
                               requests: list[tuple[str, list, list]],
                               outcomes: dict[str, object]) -> tuple[list[tuple[str, int]], int]:
    """Run the quorum; "first" in a round held by the test, `requests` handled during it,
    then every round let go; outcomes by name. Where each was applied, and the log end
    before "first"."""
    async with trio.open_nursery() as nursery:
        await running_lone(quorum, nursery)
        applied = _script(quorum, monkeypatch)
        start = quorum.storage.metadata.log_end_offset
        gated = GatedFsync(monkeypatch)
        nursery.start_soon(_ask, quorum, outcomes, "first", ("first", [_config("first")], []))
        await wait_for(lambda: gated.began, "round 1")
        for request in requests:
            nursery.start_soon(_ask, quorum, outcomes, request[0], request)
        await wait_for(lambda: len(outcomes) + quorum.host.waiting == len(requests) + 1,
                       "every request handled")
        gated.release()
        await wait_for(lambda: len(outcomes) == len(requests) + 1, "the answers")
        quorum.stop()
    return applied, start


async def test_operations_land_in_arrival_order_and_one_that_cannot_be_encoded_leaves_no_trace(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = ConfigRecord(resource_type=999, resource_name="t", name="bad", value="v")
    requests = [("a", [_config("a1"), _config("a2")], []), ("b", [_config("b"), (bad, 0)], []),
                ("c", [_config("c")], []), ("d", [], []), ("e", [_config("e")], []),
                # a transaction record too: written only with its metadata records
                ("f", [(bad, 0)], [_tombstone("f")])]
    outcomes: dict[str, object] = {}
    quorum = open_lone(tmp_path / "data")
    storage = quorum.storage
    txn_end = quorum.txn.end
    applied, start = await _during_a_held_round(quorum, monkeypatch, requests, outcomes)
    assert isinstance(outcomes["b"], EncodeError) and isinstance(outcomes["f"], EncodeError)
    assert [outcomes[n] for n in "first a c d e".split()] == "first a c d e".split()
    assert sorted(name for name, _ in applied) == ["a", "c", "e", "first"]  # d wrote nothing
    records = {"first": ["first"], "a": ["a1", "a2"], "c": ["c"], "e": ["e"]}
    # From "first" on, the log holds each operation's records whole, in the order they were
    # handled, each at the offset it was applied at; nothing of b or f.
    logged = _logged(storage, start)
    expected = []
    for name, at in applied:
        expected += [(at + i, encode_metadata_record(*_config(r)))
                     for i, r in enumerate(records[name])]
    assert logged == expected
    assert quorum.txn.end == txn_end
    storage.close()


async def test_an_operation_whose_transaction_log_append_fails_keeps_no_metadata_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quorum = open_lone(tmp_path / "data")
    storage = quorum.storage
    append_txn = quorum.txn.append

    def refuse_bad(txn_records: list, now_ms: int) -> int:
        if txn_records[0].key.transactional_id == "bad":
            raise OSError(errno.EIO, "Input/output error")
        return append_txn(txn_records, now_ms)

    monkeypatch.setattr(quorum.txn, "append", refuse_bad)
    txn_end = quorum.txn.end
    requests = [("a", [_config("a")], []), ("t", [_config("t")], [_tombstone("bad")]),
                ("u", [_config("u")], [_tombstone("good")]), ("c", [_config("c")], [])]
    outcomes: dict[str, object] = {}
    applied, start = await _during_a_held_round(quorum, monkeypatch, requests, outcomes)
    assert isinstance(outcomes["t"], OSError)
    assert [outcomes[n] for n in "acu"] == list("acu")
    assert sorted(name for name, _ in applied) == ["a", "c", "first", "u"]
    logged = [value for _, value in _logged(storage, start)]
    assert logged == [encode_metadata_record(*_config(name)) for name, _ in applied]
    assert quorum.txn.end == txn_end + 1 and quorum.hwm[1] == txn_end + 1
    storage.close()


async def test_records_that_cannot_reach_the_log_stop_the_node(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The operations are applied already: memory is ahead of the log, so the node stops and
    none of them is answered as done."""
    quorum = open_lone(tmp_path / "data")
    storage = quorum.storage
    outcomes: dict[str, object] = {}

    def refuse(*args: Any, **kwargs: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(BaseExceptionGroup) as failure:
        async with trio.open_nursery() as nursery:
            await running_lone(quorum, nursery)
            _script(quorum, monkeypatch)
            end = storage.metadata.log_end_offset
            monkeypatch.setattr(storage.metadata, "append", refuse)
            for name in "ac":
                nursery.start_soon(_ask, quorum, outcomes, name, (name, [_config(name)], []))
            await trio.sleep(5)  # the failure ends the nursery well before this
    assert failure.group_contains(QuorumError, match="No space left on device")
    assert isinstance(outcomes["a"], NodeStopped) and isinstance(outcomes["c"], NodeStopped)
    assert storage.metadata.log_end_offset == end
    storage.close()
