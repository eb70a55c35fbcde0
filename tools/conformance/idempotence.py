"""KIP-98's idempotent producer, as a partition leader must enforce it.

A producer id, an epoch and a sequence per partition: the leader appends a batch only if its
first sequence follows the last one appended, and answers a retry of one of the last five
batches with that batch's first offset instead of appending it again (Kafka's
ProducerStateEntry keeps five; Kafka's producer caps max.in.flight.requests.per.connection at
five to match). A retry older than those five is no longer known as a retry: Kafka 4.1 finds
its sequence out of order and answers OUT_OF_ORDER_SEQUENCE_NUMBER.

The draft KIP that keeps only the latest batch per producer (`max.in.flight.sequence.number.
per.connection`) changes exactly that last case and the retries before the latest one: it would
answer DUPLICATE_SEQUENCE_NUMBER, without the offset, for any sequence within its range below
the latest, and give the offset only for a retry of the latest batch. The window check records
both answers side by side.
"""

from __future__ import annotations

from kraftpy.tools.conformance.broker import Session, broker_check, data_batches

WINDOW = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN


@broker_check("idempotence-retry", "KIP-98",
              "a retried batch is not appended again: it is answered NONE with the first "
              "append's base offset")
def retry_is_not_appended(s: Session) -> None:
    topic = s.create_topic()
    pid, epoch = s.idempotent_producer()
    first = s.batch([b"a", b"b", b"c"], producer_id=pid, epoch=epoch, sequence=0)
    second = s.batch([b"d", b"e"], producer_id=pid, epoch=epoch, sequence=3)
    for what, batch, offset in (("append seq 0-2", first, 0), ("append seq 3-4", second, 3),
                                ("retry of seq 0-2", first, 0), ("retry of seq 3-4", second, 3),
                                ("second retry of seq 3-4", second, 3)):
        answer = s.produce(topic, batch)
        s.expect(f"{what}: (error, base offset)", (answer.error, answer.base_offset),
                 ("NONE", offset))
    log = s.fetch(topic)
    s.expect("high watermark", log.high_watermark, 5)
    s.expect("batches in the log (base offset, base sequence, records)",
             [(b.base_offset, b.base_sequence, b.count) for b in data_batches(log.batches)],
             [(0, 0, 3), (3, 3, 2)])


@broker_check("idempotence-gap", "KIP-98",
              "a sequence gap, or a batch overlapping the last one without being it, answers "
              "OUT_OF_ORDER_SEQUENCE_NUMBER and appends nothing")
def sequence_gap(s: Session) -> None:
    topic = s.create_topic()
    pid, epoch = s.idempotent_producer()
    answer = s.produce(topic, s.batch([b"a", b"b"], producer_id=pid, epoch=epoch, sequence=0))
    s.expect("append seq 0-1", (answer.error, answer.base_offset), ("NONE", 0))
    for what, values, sequence in (("seq 5 after 1 (a gap)", [b"x"], 5),
                                   ("seq 0-2 (overlaps seq 0-1)", [b"a", b"b", b"c"], 0),
                                   ("seq 1 (inside seq 0-1)", [b"b"], 1)):
        answer = s.produce(topic, s.batch(values, producer_id=pid, epoch=epoch,
                                          sequence=sequence))
        s.expect(what, answer.error, "OUT_OF_ORDER_SEQUENCE_NUMBER")
    s.expect("high watermark after the refusals", s.fetch(topic).high_watermark, 2)
    answer = s.produce(topic, s.batch([b"c"], producer_id=pid, epoch=epoch, sequence=2))
    s.expect("the next sequence, 2, still appends", (answer.error, answer.base_offset),
             ("NONE", 2))


@broker_check("idempotence-window", "KIP-98",
              f"retries of the last {WINDOW} batches get their offsets; a retry of an older "
              "one answers OUT_OF_ORDER_SEQUENCE_NUMBER in Kafka 4.1 (the draft KIP: "
              "DUPLICATE_SEQUENCE_NUMBER, and an offset only for the latest batch)")
def dedup_window(s: Session) -> None:
    topic = s.create_topic()
    pid, epoch = s.idempotent_producer()
    count = WINDOW + 1
    batches = [s.batch([b"r%d" % seq], producer_id=pid, epoch=epoch, sequence=seq)
               for seq in range(count)]
    for seq, batch in enumerate(batches):
        answer = s.produce(topic, batch)
        s.expect(f"append seq {seq}", (answer.error, answer.base_offset), ("NONE", seq))
    draft: dict[str, str] = {}
    for seq in reversed(range(1, count)):  # the five kept, newest first
        answer = s.produce(topic, batches[seq])
        s.expect(f"retry of seq {seq} ({count - seq} back)", (answer.error, answer.base_offset),
                 ("NONE", seq))
        draft[f"seq {seq}"] = "NONE, its offset" if seq == count - 1 else \
            "DUPLICATE_SEQUENCE_NUMBER, no offset"
    answer = s.produce(topic, batches[0])
    draft["seq 0"] = "DUPLICATE_SEQUENCE_NUMBER, no offset"
    s.observe("the draft KIP would answer", draft)
    s.expect(f"retry of seq 0 ({count} back, outside the window)",
             (answer.error, answer.base_offset), ("OUT_OF_ORDER_SEQUENCE_NUMBER", -1))
    s.expect("high watermark", s.fetch(topic).high_watermark, count)


@broker_check("idempotence-epoch", "KIP-98",
              "a new epoch of an idempotent producer starts at sequence 0 (any other: "
              "OUT_OF_ORDER_SEQUENCE_NUMBER); a batch of an older epoch answers "
              "INVALID_PRODUCER_EPOCH")
def producer_epoch(s: Session) -> None:
    topic = s.create_topic()
    pid, epoch = s.idempotent_producer()
    steps = ((epoch, 0, "NONE"), (epoch + 1, 1, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
             (epoch + 1, 0, "NONE"), (epoch, 1, "INVALID_PRODUCER_EPOCH"),
             (epoch + 1, 1, "NONE"))
    for e, seq, expected in steps:
        answer = s.produce(topic, s.batch([b"e%ds%d" % (e, seq)], producer_id=pid, epoch=e,
                                          sequence=seq))
        s.expect(f"epoch {e - epoch:+d}, seq {seq}", answer.error, expected)
    log = s.fetch(topic)
    s.expect("batches (epoch, sequence)", [(b.producer_epoch - epoch, b.base_sequence)
                                           for b in data_batches(log.batches)],
             [(0, 0), (1, 0), (1, 1)])
