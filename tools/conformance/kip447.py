"""KIP-447: a transactional offset commit fenced by the consumer group's generation.

With KIP-447 one producer serves every partition a consumer is assigned, so zombies are no
longer fenced by a transactional id per partition but by the group: TxnOffsetCommit v3+
carries the consumer's generation and member id, and the group coordinator refuses a stale
generation (ILLEGAL_GENERATION) or a member it does not know (UNKNOWN_MEMBER_ID). A commit
without either (generation -1, no member: an older producer, or one outside group management)
is still accepted. A consumer that must not read past offsets of a transaction still open asks
OffsetFetch with RequireStable (v7+): UNSTABLE_OFFSET_COMMIT while a transactional commit for
the partition is pending, the committed offset once its transaction commits, and the previous
one after an abort.
"""

from __future__ import annotations

from kraftpy.tools.conformance.broker import Session, broker_check


@broker_check("kip447-generation", "KIP-447",
              "TxnOffsetCommit v3+ with the group's generation and member id is accepted; a "
              "stale generation answers ILLEGAL_GENERATION, an unknown member "
              "UNKNOWN_MEMBER_ID; no generation and no member (-1, \"\") is accepted")
def generation_fencing(s: Session) -> None:
    topic = s.create_topic()
    group = s.name("group")
    member, generation = s.join_group(group, topic)
    s.expect("JoinGroup generation", generation, 1)
    txn, pid, epoch = s.transactional_producer()
    s.expect("AddOffsetsToTxn v3", s.add_offsets(txn, pid, epoch, group, version=(0, 3)),
             "NONE")
    for version in (3, 4):
        for what, gen, who, error in (
                ("a stale generation", generation - 1, member, "ILLEGAL_GENERATION"),
                ("a future generation", generation + 1, member, "ILLEGAL_GENERATION"),
                ("an unknown member", generation, "not-a-member", "UNKNOWN_MEMBER_ID"),
                ("the group's generation and member", generation, member, "NONE"),
                ("no generation and no member", -1, "", "NONE")):
            s.expect(f"TxnOffsetCommit v{version} with {what}",
                     s.txn_offset_commit(txn, pid, epoch, group, topic, 7, member_id=who,
                                         generation=gen, version=(version, version)), error)
    s.expect("EndTxn commit", s.end_txn(txn, pid, epoch, True, version=(0, 4))[0], "NONE")


@broker_check("kip447-require-stable", "KIP-447",
              "OffsetFetch with RequireStable answers UNSTABLE_OFFSET_COMMIT while a "
              "transactional offset commit is pending, the offset once its transaction "
              "commits, and the previous offset after an abort")
def require_stable(s: Session) -> None:
    topic = s.create_topic()
    group = s.name("group")
    member, generation = s.join_group(group, topic)
    txn, pid, epoch = s.transactional_producer()
    s.expect("OffsetFetch before any commit: (error, offset)",
             s.offset_fetch(group, topic, require_stable=True), ("NONE", -1))
    committed = -1
    for offset, commit_it, classic in ((5, True, True), (9, False, True), (12, True, False)):
        how = "AddOffsetsToTxn v3 + TxnOffsetCommit v4" if classic else \
            "TxnOffsetCommit v5 (adds the offsets partition itself)"
        if classic:
            s.expect(f"AddOffsetsToTxn ({offset})",
                     s.add_offsets(txn, pid, epoch, group, version=(0, 3)), "NONE")
        s.expect(f"{how} of offset {offset}",
                 s.txn_offset_commit(txn, pid, epoch, group, topic, offset, member_id=member,
                                     generation=generation,
                                     version=(4, 4) if classic else (5, 5)), "NONE")
        s.expect(f"OffsetFetch RequireStable while {offset} is pending",
                 s.offset_fetch(group, topic, require_stable=True),
                 ("UNSTABLE_OFFSET_COMMIT", -1))
        s.expect(f"OffsetFetch without RequireStable while {offset} is pending",
                 s.offset_fetch(group, topic, require_stable=False), ("NONE", committed))
        kind = "commit" if commit_it else "abort"
        error, _, next_epoch = s.end_txn(txn, pid, epoch, commit_it,
                                         version=(0, 4) if classic else (5, 5))
        s.expect(f"EndTxn {kind} of offset {offset}", error, "NONE")
        if not classic:
            epoch = next_epoch
        if commit_it:
            committed = offset
        s.expect(f"OffsetFetch RequireStable once {offset} is {kind}ed",
                 s.wait_for("a stable offset", lambda: s.offset_fetch(
                     group, topic, require_stable=True), lambda r: r[0] != "UNSTABLE_OFFSET_COMMIT",
                     "an answer other than UNSTABLE_OFFSET_COMMIT"), ("NONE", committed))
        s.settled(txn)
