"""Transactions: KIP-98 as clients before KIP-890 run them, and KIP-890 at transaction.version 2.

KIP-98: AddPartitionsToTxn (v3 and below, the client's form), transactional Produce, EndTxn.
The coordinator writes a COMMIT or ABORT marker (a control batch carrying the producer id and
epoch) to each partition; until it lands the last stable offset (LSO) stays at the
transaction's first offset, and a read_committed Fetch returns nothing from there on. After an
abort, a read_committed Fetch lists the aborted transaction (producer id, first offset) for
the range it returns, so the consumer can drop its records.

KIP-890 part 1 (every transaction version): a leader verifies with the coordinator that a
transactional batch's partition is in the transaction before appending the first one, and
refuses it otherwise (INVALID_TXN_STATE to Produce v10 and below, TRANSACTION_ABORTABLE to
v11). Part 2 (transaction.version 2, used by clients sending EndTxn v5 and Produce v12): a
Produce v12 adds its partition itself, every EndTxn bumps the epoch and answers the new one,
the markers carry the bumped epoch, so a late Produce of the finished transaction at its old
epoch is refused with INVALID_PRODUCER_EPOCH instead of starting a hanging transaction.
"""

from __future__ import annotations

from kraftpy.tools.conformance.broker import (
    READ_COMMITTED,
    Batch,
    FetchAnswer,
    Session,
    Topic,
    broker_check,
)

CLASSIC = {"add": (0, 3), "produce": (3, 11), "end": (0, 4)}  # before KIP-890 part 2
TV2_PRODUCE, TV2_END = (12, 13), (5, 5)


def markers(s: Session, topic: Topic, count: int, txn: str) -> FetchAnswer:
    """The partition's log once `count` transaction markers have landed, and the coordinator
    has completed `txn` (on a cluster of several brokers it writes CompleteCommit or
    CompleteAbort only after every marker is acknowledged, some time after they land)."""
    log = s.wait_for(f"{count} transaction marker(s) in {s.local(topic.name)}",
                     lambda: s.fetch(topic),
                     lambda f: sum(b.control is not None for b in f.batches) >= count,
                     f"{count} COMMIT/ABORT control batches")
    s.settled(txn)
    return log


def layout(s: Session, batches: list[Batch]) -> list[tuple]:
    """(base offset, producer, epoch, transactional, marker or record count) per batch."""
    return [(b.base_offset, s.pid_label(b.producer_id), b.producer_epoch, b.transactional,
             b.control or b.count) for b in batches]


def require_tv2(s: Session) -> None:
    s.expect("finalized transaction.version (KIP-890 part 2 needs 2)",
             s.finalized_feature("transaction.version"), 2)


@broker_check("txn-commit", "KIP-98",
              "AddPartitionsToTxn, transactional Produce, EndTxn commit: the LSO holds at the "
              "transaction's first offset until the COMMIT marker lands after the data, then "
              "moves past it and read_committed Fetch returns the records")
def commit(s: Session) -> None:
    topic = s.create_topic()
    txn, pid, epoch = s.transactional_producer()
    s.expect("AddPartitionsToTxn v3", s.add_partitions(txn, pid, epoch, topic), "NONE")
    answer = s.produce(topic, s.batch([b"t0", b"t1"], producer_id=pid, epoch=epoch, sequence=0,
                                      transactional=True),
                       version=CLASSIC["produce"], transactional_id=txn)
    s.expect("transactional Produce", (answer.error, answer.base_offset), ("NONE", 0))
    other, other_epoch = s.idempotent_producer()
    answer = s.produce(topic, s.batch([b"plain"], producer_id=other, epoch=other_epoch,
                                      sequence=0))
    s.expect("an idempotent batch after it", (answer.error, answer.base_offset), ("NONE", 2))
    s.expect("ListOffsets read_committed while open (the LSO)",
             s.list_offset(topic, isolation=READ_COMMITTED), 0)
    open_view = s.fetch(topic, isolation=READ_COMMITTED)
    s.expect("read_committed Fetch while open: (HW, LSO, batches)",
             (open_view.high_watermark, open_view.last_stable_offset, len(open_view.batches)),
             (3, 0, 0))
    state = s.describe_transaction(txn)
    s.expect("DescribeTransactions while open: (state, partitions)",
             (state.transaction_state, [(s.local(t.topic), t.partitions) for t in state.topics]),
             ("Ongoing", [(s.local(topic.name), [0])]))
    s.expect("EndTxn v4 commit", s.end_txn(txn, pid, epoch, True, version=CLASSIC["end"])[0],
             "NONE")
    log = markers(s, topic, 1, txn)
    s.expect("log: (offset, producer, epoch, transactional, marker or records)",
             layout(s, log.batches),
             [(0, "P0", 0, True, 2), (2, "P1", 0, False, 1), (3, "P0", 0, True, "COMMIT")])
    s.expect("LSO after the marker", s.list_offset(topic, isolation=READ_COMMITTED), 4)
    done = s.fetch(topic, isolation=READ_COMMITTED)
    s.expect("read_committed Fetch after commit: (LSO, aborted, values)",
             (done.last_stable_offset, done.aborted,
              [v for b in done.batches for v in b.values]),
             (4, [], [b"t0", b"t1", b"plain"]))
    state = s.describe_transaction(txn)
    s.expect("DescribeTransactions after: (state, epoch)",
             (state.transaction_state, state.producer_epoch), ("CompleteCommit", 0))


@broker_check("txn-abort", "KIP-98",
              "EndTxn abort writes an ABORT marker and moves the LSO; a read_committed Fetch "
              "lists the aborted transaction (producer id, first offset) for the range it "
              "returns, and a committed transaction after it is not listed")
def abort(s: Session) -> None:
    topic = s.create_topic()
    txn, pid, epoch = s.transactional_producer()
    for n, (values, commit_it) in enumerate((([b"a0", b"a1"], False), ([b"c0"], True))):
        s.expect(f"AddPartitionsToTxn v3 ({n + 1})", s.add_partitions(txn, pid, epoch, topic),
                 "NONE")
        answer = s.produce(topic, s.batch(values, producer_id=pid, epoch=epoch, sequence=2 * n,
                                          transactional=True),
                           version=CLASSIC["produce"], transactional_id=txn)
        s.expect(f"transactional Produce ({n + 1})", (answer.error, answer.base_offset),
                 ("NONE", 3 * n))
        kind = "commit" if commit_it else "abort"
        s.expect(f"EndTxn v4 {kind}",
                 s.end_txn(txn, pid, epoch, commit_it, version=CLASSIC["end"])[0], "NONE")
        markers(s, topic, n + 1, txn)
    log = s.fetch(topic, isolation=READ_COMMITTED)
    s.expect("read_committed Fetch from 0: (LSO, aborted (producer, first offset))",
             (log.last_stable_offset, [(s.pid_label(p), o) for p, o in log.aborted or []]),
             (5, [("P0", 0)]))
    s.expect("log: (offset, producer, epoch, transactional, marker or records)",
             layout(s, log.batches),
             [(0, "P0", 0, True, 2), (2, "P0", 0, True, "ABORT"), (3, "P0", 0, True, 1),
              (4, "P0", 0, True, "COMMIT")])
    later = s.fetch(topic, 3, isolation=READ_COMMITTED)
    s.expect("read_committed Fetch from 3: aborted", later.aborted, [])
    uncommitted = s.fetch(topic)
    s.expect("read_uncommitted Fetch: aborted transactions (none sent)", uncommitted.aborted,
             None)


@broker_check("txn-unadded-partition", "KIP-890",
              "part 1: a transactional Produce to a partition not added to the transaction is "
              "refused and not appended: INVALID_TXN_STATE to Produce v10, "
              "TRANSACTION_ABORTABLE to v11")
def unadded_partition(s: Session) -> None:
    topic = s.create_topic()
    txn, pid, epoch = s.transactional_producer()
    for version, error in ((10, "INVALID_TXN_STATE"), (11, "TRANSACTION_ABORTABLE")):
        answer = s.produce(topic, s.batch([b"stray"], producer_id=pid, epoch=epoch, sequence=0,
                                          transactional=True),
                           version=(version, version), transactional_id=txn)
        s.expect(f"Produce v{version} without AddPartitionsToTxn", answer.error, error)
    s.expect("high watermark", s.fetch(topic).high_watermark, 0)
    state = s.describe_transaction(txn)
    s.expect("DescribeTransactions: (state, partitions)",
             (state.transaction_state, state.topics), ("Empty", []))


@broker_check("tv2-produce-adds-partition", "KIP-890",
              "part 2 (transaction.version 2): Produce v12 adds its partition to the "
              "transaction itself, without AddPartitionsToTxn")
def produce_adds_partition(s: Session) -> None:
    require_tv2(s)
    topic = s.create_topic()
    txn, pid, epoch = s.transactional_producer()
    for seq in range(2):
        answer = s.produce(topic, s.batch([b"v%d" % seq], producer_id=pid, epoch=epoch,
                                          sequence=seq, transactional=True),
                           version=TV2_PRODUCE, transactional_id=txn)
        s.expect(f"Produce v12+ seq {seq}, no AddPartitionsToTxn",
                 (answer.error, answer.base_offset), ("NONE", seq))
    state = s.describe_transaction(txn)
    s.expect("DescribeTransactions: (state, partitions)",
             (state.transaction_state, [(s.local(t.topic), t.partitions) for t in state.topics]),
             ("Ongoing", [(s.local(topic.name), [0])]))
    error, _, _ = s.end_txn(txn, pid, epoch, True, version=TV2_END)
    s.expect("EndTxn v5 commit", error, "NONE")
    log = markers(s, topic, 1, txn)
    s.expect("log: (offset, producer, epoch, transactional, marker or records)",
             layout(s, log.batches),
             [(0, "P0", 0, True, 1), (1, "P0", 0, True, 1), (2, "P0", 1, True, "COMMIT")])


@broker_check("tv2-epoch-bump", "KIP-890",
              "part 2: every EndTxn v5 bumps the epoch and answers it, the markers carry it; "
              "a retried EndTxn answers the same epoch, the other outcome at the old epoch "
              "answers INVALID_TXN_STATE")
def epoch_bump_per_transaction(s: Session) -> None:
    require_tv2(s)
    topic = s.create_topic()
    txn, pid, epoch = s.transactional_producer()
    for n, commit_it in enumerate((True, False)):
        answer = s.produce(topic, s.batch([b"x%d" % n], producer_id=pid, epoch=epoch + n,
                                          sequence=0, transactional=True),
                           version=TV2_PRODUCE, transactional_id=txn)
        s.expect(f"Produce v12+ at epoch {epoch + n}", answer.error, "NONE")
        kind = "commit" if commit_it else "abort"
        error, got_pid, got_epoch = s.end_txn(txn, pid, epoch + n, commit_it, version=TV2_END)
        s.expect(f"EndTxn v5 {kind} at epoch {epoch + n}: (error, producer, epoch)",
                 (error, s.pid_label(got_pid), got_epoch), ("NONE", "P0", epoch + n + 1))
        markers(s, topic, n + 1, txn)
    error, got_pid, got_epoch = s.end_txn(txn, pid, epoch + 1, False, version=TV2_END)
    s.expect("retry of EndTxn v5 abort at epoch 1: (error, producer, epoch)",
             (error, s.pid_label(got_pid), got_epoch), ("NONE", "P0", 2))
    s.expect("EndTxn v5 commit at epoch 1 after its abort",
             s.end_txn(txn, pid, epoch + 1, True, version=TV2_END)[0], "INVALID_TXN_STATE")
    log = s.fetch(topic)
    s.expect("log: (offset, producer, epoch, transactional, marker or records)",
             layout(s, log.batches),
             [(0, "P0", 0, True, 1), (1, "P0", 1, True, "COMMIT"), (2, "P0", 1, True, 1),
              (3, "P0", 2, True, "ABORT")])
    state = s.describe_transaction(txn)
    s.expect("DescribeTransactions: (state, epoch)",
             (state.transaction_state, state.producer_epoch), ("CompleteAbort", 2))


@broker_check("tv2-late-produce", "KIP-890",
              "part 2: a Produce of the finished transaction arriving after its marker (old "
              "epoch) answers INVALID_PRODUCER_EPOCH and is not appended; the next "
              "transaction's, at the new epoch, is")
def late_produce(s: Session) -> None:
    require_tv2(s)
    topic = s.create_topic()
    txn, pid, epoch = s.transactional_producer()
    answer = s.produce(topic, s.batch([b"in"], producer_id=pid, epoch=epoch, sequence=0,
                                      transactional=True),
                       version=TV2_PRODUCE, transactional_id=txn)
    s.expect("Produce v12+ in the transaction", answer.error, "NONE")
    error, _, new_epoch = s.end_txn(txn, pid, epoch, True, version=TV2_END)
    s.expect("EndTxn v5 commit: (error, epoch)", (error, new_epoch), ("NONE", epoch + 1))
    markers(s, topic, 1, txn)
    for seq in (1, 0):
        answer = s.produce(topic, s.batch([b"late"], producer_id=pid, epoch=epoch,
                                          sequence=seq, transactional=True),
                           version=TV2_PRODUCE, transactional_id=txn)
        s.expect(f"late Produce v12+ at the old epoch, seq {seq}", answer.error,
                 "INVALID_PRODUCER_EPOCH")
    s.expect("state after the late Produce",
             s.describe_transaction(txn).transaction_state, "CompleteCommit")
    answer = s.produce(topic, s.batch([b"next"], producer_id=pid, epoch=new_epoch, sequence=0,
                                      transactional=True),
                       version=TV2_PRODUCE, transactional_id=txn)
    s.expect("Produce v12+ of the next transaction at the new epoch",
             (answer.error, answer.base_offset), ("NONE", 2))
    s.expect("EndTxn v5 abort", s.end_txn(txn, pid, new_epoch, False, version=TV2_END)[0],
             "NONE")
    log = markers(s, topic, 2, txn)
    s.expect("log: (offset, producer, epoch, transactional, marker or records)",
             layout(s, log.batches),
             [(0, "P0", 0, True, 1), (1, "P0", 1, True, "COMMIT"), (2, "P0", 1, True, 1),
              (3, "P0", 2, True, "ABORT")])
