"""InitProducerId against a model written from the facts (KAFKA-FACTS e), thousands of cases.

The model is a flat transcription of Kafka's TransactionCoordinator.handleInitProducerId,
prepareInitProducerIdTransit and prepareIncrementProducerEpoch; the controller is reached
through QuorumController.handle with a random transaction state already in place.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from kraftpy.controller.transaction_control import TxnMetadata, TxnState
from kraftpy.protocol.error_codes import ErrorCode as E
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from support.controller_harness import Harness

MAX_TIMEOUT = 900_000
EPOCHS = st.sampled_from([-1, 0, 1, 2, 5, 32765, 32766, 32767])
PIDS = st.sampled_from([-1, 100, 200, 300])

STATES = st.one_of(st.none(), st.builds(
    dict, pid=st.sampled_from([100, 200]), prev=st.sampled_from([-1, 100, 300]),
    epoch=EPOCHS, last=EPOCHS, state=st.sampled_from(list(TxnState)), pending=st.booleans()))

REQUESTS = st.builds(
    dict, tid=st.sampled_from([None, "", "t"]), timeout=st.sampled_from([-1, 0, 1, 60_000,
                                                                         MAX_TIMEOUT,
                                                                         MAX_TIMEOUT + 1]),
    pid=PIDS, epoch=EPOCHS, version=st.sampled_from([0, 2, 3, 4, 5]))

NEW_ID = 0  # the first id of this node's first block


def model(state: dict | None, req: dict) -> tuple[int, int, int]:
    """(error, producer id, epoch) per Kafka."""
    def fail(code: int) -> tuple[int, int, int]:
        if code == E.PRODUCER_FENCED and req["version"] < 4:
            code = E.INVALID_PRODUCER_EPOCH
        return code, -1, -1

    pid, epoch = (req["pid"], req["epoch"]) if req["version"] >= 3 else (-1, -1)
    if (pid == -1) != (epoch == -1):
        return fail(E.INVALID_REQUEST)
    if req["tid"] is None:
        return 0, NEW_ID, 0
    if req["tid"] == "":
        return fail(E.INVALID_REQUEST)
    if not 0 < req["timeout"] <= MAX_TIMEOUT:
        return fail(E.INVALID_TRANSACTION_TIMEOUT)
    expected = None if pid == -1 else (pid, epoch)
    if state is not None and state["pending"]:  # any transition in flight, even to Dead
        return fail(E.CONCURRENT_TRANSACTIONS)
    if state is None or state["state"] is TxnState.DEAD:
        state = {"pid": NEW_ID, "prev": -1, "epoch": -1, "last": -1, "state": TxnState.EMPTY}
    if expected is not None and not (
            state["epoch"] == -1 or expected[0] == state["pid"]
            or (expected[0] == state["prev"] and expected[1] >= 32766)):
        return fail(E.PRODUCER_FENCED)
    if state["state"] not in (TxnState.EMPTY, TxnState.COMPLETE_ABORT, TxnState.COMPLETE_COMMIT):
        return fail(E.CONCURRENT_TRANSACTIONS)  # Ongoing is fenced, Prepare* completed
    if state["epoch"] >= 32766 and (expected is None or expected[1] == state["epoch"]):
        return 0, NEW_ID, 0
    if expected is None or state["epoch"] == -1 or expected[1] == state["epoch"]:
        return 0, state["pid"], state["epoch"] + 1
    if expected[1] == state["last"]:
        return 0, state["pid"], state["epoch"]
    return fail(E.PRODUCER_FENCED)


@settings(max_examples=2000, deadline=None)
@given(STATES, REQUESTS)
def test_init_producer_id_matches_the_model(state, req):
    h = Harness()
    h.ready_ids()
    if state is not None:
        h.qc.transactions.txns["t"] = TxnMetadata(
            "t", state["pid"], state["epoch"], 60_000, state["state"], state["prev"],
            last_producer_epoch=state["last"],
            offset=h.qc.transactions.committed_offset if state["pending"] else -1)
    reply = h.handle(InitProducerIdRequest(
        transactional_id=req["tid"], transaction_timeout_ms=req["timeout"],
        producer_id=req["pid"], producer_epoch=req["epoch"]), req["version"])
    assert (reply.error_code, reply.producer_id, reply.producer_epoch) == model(state, req)
