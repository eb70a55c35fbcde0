"""KIP-360: producer state that outlives the log, epoch bumps, fencing, and epoch exhaustion.

What Kafka 4.1 does, which is not what KIP-360's motivation describes of older brokers: a
partition leader never answers UNKNOWN_PRODUCER_ID to Produce any more. KIP-360's "prolonged
producer state retention" keeps a producer's state when DeleteRecords (or retention) removes
all its batches, so its sequence goes on being checked; and a producer a partition has no
state for at all (never seen, or expired after producer.id.expiration.ms) has its first batch
appended at whatever sequence it carries (the validation the KIP considered for that case was
rejected). Kafka's producers still handle UNKNOWN_PRODUCER_ID from older brokers by bumping
the epoch; these checks hold a broker to the 4.1 answers.

InitProducerId with a producer id and epoch (v3+) is the transactional producer's safe epoch
bump: the coordinator bumps the epoch if the pair is current, answers the same bumped epoch to
a retry of the pair it bumped from, and fences anything else, with PRODUCER_FENCED from v4 and
INVALID_PRODUCER_EPOCH before (the error older clients know). At epoch 32766 (Short.MaxValue
- 1, the last one a client may use) the coordinator rotates to a new producer id at epoch 0.
"""

from __future__ import annotations

from kraftpy.protocol.framing import decode_response, encode_request
from kraftpy.protocol.messages.init_producer_id_request import InitProducerIdRequest
from kraftpy.tools.conformance.broker import (
    CheckFailed,
    Session,
    broker_check,
    data_batches,
    error_name,
)

EXHAUSTED_EPOCH = 32766  # Short.MaxValue - 1: TransactionMetadata.isEpochExhausted
MAX_EPOCH = 32767


@broker_check("kip360-delete-records", "KIP-360",
              "producer state outlives DeleteRecords past all its batches: retries still get "
              "their offsets, a restart at sequence 0 in the same epoch answers "
              "OUT_OF_ORDER_SEQUENCE_NUMBER, the next sequence appends; no UNKNOWN_PRODUCER_ID")
def state_outlives_delete_records(s: Session) -> None:
    topic = s.create_topic()
    pid, epoch = s.idempotent_producer()
    for seq in range(3):
        answer = s.produce(topic, s.batch([b"v%d" % seq], producer_id=pid, epoch=epoch,
                                          sequence=seq))
        s.expect(f"append seq {seq}", (answer.error, answer.base_offset), ("NONE", seq))
    s.expect("DeleteRecords before offset 3 (error, low watermark)",
             s.delete_records(topic, 3), ("NONE", 3))
    producers = s.describe_producers(topic)
    s.expect("DescribeProducers after DeleteRecords (producer, last sequence)",
             [(s.pid_label(p.producer_id), p.last_sequence) for p in producers.active_producers],
             [(s.pid_label(pid), 2)])
    steps = (("retry of seq 2 (its offset is below the log start)", [b"v2"], 2, "NONE", 2),
             ("retry of seq 0 (still among the last five)", [b"v0"], 0, "NONE", 0),
             ("seq 0-1 in one batch (a restart at 0, same epoch)", [b"r0", b"r1"], 0,
              "OUT_OF_ORDER_SEQUENCE_NUMBER", -1),
             ("seq 5 (a gap)", [b"v5"], 5, "OUT_OF_ORDER_SEQUENCE_NUMBER", -1),
             ("seq 3, the next", [b"v3"], 3, "NONE", 3))
    for what, values, seq, error, offset in steps:
        answer = s.produce(topic, s.batch(values, producer_id=pid, epoch=epoch, sequence=seq))
        s.expect(f"{what}: (error, base offset, log start)",
                 (answer.error, answer.base_offset, answer.log_start_offset), (error, offset, 3))


@broker_check("kip360-unknown-producer", "KIP-360",
              "a producer the partition has no state for appends its first batch at any "
              "sequence (Kafka 4.1 never answers UNKNOWN_PRODUCER_ID to Produce); from then "
              "on its sequence is checked")
def unknown_producer(s: Session) -> None:
    topic = s.create_topic()
    pid, epoch = s.idempotent_producer()
    for what, seq, expected in (("first batch at seq 7", 7, ("NONE", 0)),
                                ("seq 8", 8, ("NONE", 1)),
                                ("seq 10 (a gap)", 10, ("OUT_OF_ORDER_SEQUENCE_NUMBER", -1)),
                                ("seq 0", 0, ("OUT_OF_ORDER_SEQUENCE_NUMBER", -1))):
        answer = s.produce(topic, s.batch([b"s%d" % seq], producer_id=pid, epoch=epoch,
                                          sequence=seq))
        s.expect(what, (answer.error, answer.base_offset), expected)
    s.expect("batches (base sequence)",
             [b.base_sequence for b in data_batches(s.fetch(topic).batches)], [7, 8])


@broker_check("kip360-epoch-bump", "KIP-360",
              "InitProducerId with the current id and epoch bumps the epoch and keeps the id, "
              "a retry answers the same; an older epoch is fenced: INVALID_PRODUCER_EPOCH "
              "before v4, PRODUCER_FENCED from v4 (EndTxn and AddPartitionsToTxn: before v2 / "
              "from v2)")
def epoch_bump(s: Session) -> None:
    txn, pid, epoch = s.transactional_producer()
    same = s.pid_label(pid)
    s.expect("first InitProducerId: epoch", epoch, 0)
    for what, arg_epoch, want in (("InitProducerId v4 (id, epoch 0)", 0, 1),
                                  ("retry of InitProducerId v4 (id, epoch 0)", 0, 1),
                                  ("InitProducerId v4 (id, epoch 1)", 1, 2)):
        error, got_pid, got_epoch = s.init_producer_id(txn, producer_id=pid, epoch=arg_epoch,
                                                       version=(4, 4))
        s.expect(f"{what}: (error, producer, epoch)", (error, s.pid_label(got_pid), got_epoch),
                 ("NONE", same, want))
    for version, error in ((3, "INVALID_PRODUCER_EPOCH"), (4, "PRODUCER_FENCED"),
                           (5, "PRODUCER_FENCED")):
        s.expect(f"InitProducerId v{version} with the fenced epoch 0",
                 s.init_producer_id(txn, producer_id=pid, epoch=0, version=(version, version))[0],
                 error)
    s.expect("InitProducerId v4 with epoch 0 and producer id -1",
             s.init_producer_id(txn, producer_id=-1, epoch=0, version=(4, 4))[0],
             "INVALID_REQUEST")
    topic = s.create_topic()
    for version, error in ((1, "INVALID_PRODUCER_EPOCH"), (2, "PRODUCER_FENCED"),
                           (3, "PRODUCER_FENCED")):
        s.expect(f"AddPartitionsToTxn v{version} with the fenced epoch 1",
                 s.add_partitions(txn, pid, 1, topic, version=(version, version)), error)
    for version, error in ((1, "INVALID_PRODUCER_EPOCH"), (2, "PRODUCER_FENCED"),
                           (4, "PRODUCER_FENCED")):
        s.expect(f"EndTxn v{version} (abort) with the fenced epoch 1",
                 s.end_txn(txn, pid, 1, False, version=(version, version))[0], error)
    state = s.describe_transaction(txn)
    s.expect("DescribeTransactions: (producer, epoch, state)",
             (s.pid_label(state.producer_id), state.producer_epoch, state.transaction_state),
             (same, 2, "Empty"))


@broker_check("kip360-epoch-exhaustion", "KIP-360",
              f"at epoch {EXHAUSTED_EPOCH} InitProducerId rotates to a new producer id at "
              "epoch 0, a retry answers the same, the old id is fenced; an idempotent "
              f"producer's own epoch may reach {MAX_EPOCH}, then InitProducerId gives a new id",
              timeout_scale=10)
def epoch_exhaustion(s: Session) -> None:
    topic = s.create_topic()
    pid, epoch = s.idempotent_producer()
    for e, seq, error in ((MAX_EPOCH, 0, "NONE"), (MAX_EPOCH, 1, "NONE"),
                          (EXHAUSTED_EPOCH, 2, "INVALID_PRODUCER_EPOCH")):
        answer = s.produce(topic, s.batch([b"x"], producer_id=pid, epoch=e, sequence=seq))
        s.expect(f"idempotent batch at epoch {e}, seq {seq}", answer.error, error)
    error, new_pid, new_epoch = s.init_producer_id(producer_id=pid, epoch=MAX_EPOCH,
                                                   version=(3, 5))
    s.expect(f"idempotent InitProducerId (id, {MAX_EPOCH}): (error, new id, epoch)",
             (error, new_pid != pid, new_epoch), ("NONE", True, 0))

    txn, pid, epoch = s.transactional_producer()
    s.expect("producer before the bumps", s.pid_label(pid), "P0")
    s.expect("epoch reached by InitProducerId bumps", _bump_to(s, txn, epoch, EXHAUSTED_EPOCH),
             EXHAUSTED_EPOCH)
    error, got_pid, got_epoch = s.init_producer_id(txn, producer_id=pid, epoch=EXHAUSTED_EPOCH,
                                                   version=(4, 5))
    s.expect(f"InitProducerId (id, {EXHAUSTED_EPOCH}): (error, producer, epoch)",
             (error, s.pid_label(got_pid), got_epoch), ("NONE", "P1", 0))
    error, got_pid, got_epoch = s.init_producer_id(txn, producer_id=pid, epoch=EXHAUSTED_EPOCH,
                                                   version=(4, 5))
    s.expect("its retry: (error, producer, epoch)",
             (error, s.pid_label(got_pid), got_epoch), ("NONE", "P1", 0))
    s.expect(f"InitProducerId (old id, {EXHAUSTED_EPOCH - 1})",
             s.init_producer_id(txn, producer_id=pid, epoch=EXHAUSTED_EPOCH - 1,
                                version=(4, 5))[0], "PRODUCER_FENCED")
    state = s.describe_transaction(txn)
    s.expect("DescribeTransactions: (producer, epoch)",
             (s.pid_label(state.producer_id), state.producer_epoch), ("P1", 0))


def _bump_to(s: Session, txn: str, epoch: int, target: int, window: int = 128) -> int:
    """Bump `txn`'s epoch to `target` with pipelined InitProducerId (no id and epoch given:
    each is a new producer instance, so each bumps once). Returns the epoch reached."""
    conn = s.coordinator(txn, 1)
    v = s.version(conn, InitProducerIdRequest, 0, 5)
    correlation = 1 << 30
    while epoch < target:
        if s.left() <= 0:
            raise CheckFailed(f"bumping the epoch to {target} within the check's "
                              f"{s.timeout:g} s", target, epoch)
        n = min(window, target - epoch)
        frames = []
        for _ in range(n):
            correlation += 1
            frames.append(encode_request(InitProducerIdRequest(
                transactional_id=txn, transaction_timeout_ms=60000), v, correlation,
                "kraftpy-conformance"))
        conn.send_raw(b"".join(frames))
        for _ in range(n):
            _, answer = decode_response(conn.recv_frame(), InitProducerIdRequest.API_KEY, v)
            if answer.error_code == 0:
                if answer.producer_epoch != epoch + 1:
                    raise CheckFailed("an InitProducerId bump: epoch", epoch + 1,
                                      answer.producer_epoch)
                epoch = answer.producer_epoch
            elif error_name(answer.error_code) != "CONCURRENT_TRANSACTIONS":
                raise CheckFailed("an InitProducerId bump", "NONE",
                                  error_name(answer.error_code))
    return epoch
