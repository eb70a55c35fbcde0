"""The idempotent InitProducerId fast path hands out exactly what the full path would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kraftpy.controller.producer_id_manager import NOT_READY, ProducerIdManager
from kraftpy.protocol.records.producer_ids_record import ProducerIdsRecord


def _full_path(m: ProducerIdManager) -> tuple[int | None, bool]:
    return m.next_id(), m.wants_block()


def _state(m: ProducerIdManager) -> tuple:
    cur = m.current
    return (cur and (cur.first, cur.next_id), [(b.first, b.next_id) for b in m.ready],
            [(c.offset, c.first) for c in m.claims], m.exhausted, m.low_water)


def _claim(m: ProducerIdManager, offset: int, first: int, commit: bool) -> None:
    m.claimed(offset)
    m.on_replay(ProducerIdsRecord(broker_id=m.node_id, broker_epoch=-1,
                                  next_producer_id=first + m.block_size), offset)
    if commit:
        m.on_committed(offset + 1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["take", "take", "take", "claim", "commit", "exhaust"]),
                max_size=60), st.integers(1, 6), st.floats(0.1, 1.0))
def test_take_is_the_full_path_whenever_it_answers(steps, size, ratio) -> None:
    fast, full = (ProducerIdManager(1, size, ratio) for _ in range(2))
    offset, first = 0, 0
    for step in steps:
        if step == "take":
            before = _state(fast)
            run = fast.take(1)
            pid = None if run is None else run[0]
            if pid is None:  # nothing changed; the full path then runs on both
                assert _state(fast) == before
                pid = fast.next_id()
                fast_wants = fast.wants_block()
            elif pid == NOT_READY:  # as the full path: no id, no block wanted, no change
                assert _state(fast) == before and not fast.exhausted
                pid, fast_wants = None, False
            else:
                fast_wants = False
            assert (pid, fast_wants) == _full_path(full)
        elif step in ("claim", "commit") and full.wants_block():
            for m in (fast, full):
                _claim(m, offset, first, step == "commit")
            offset, first = offset + 1, first + size
        elif step == "commit":
            for m in (fast, full):
                m.on_committed(offset)
        elif step == "exhaust":
            fast.exhausted = full.exhausted = True
        assert _state(fast) == _state(full)
