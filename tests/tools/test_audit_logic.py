"""The producer-ID audit's logic on hand-made record sequences (no files)."""

from __future__ import annotations

from kraftpy.tools.logdecode.audit import PRODUCER_IDS, REGISTER_BROKER, AuditRecord, audit


def reg(offset: int, broker: int, epoch: int, kind: str = "segment", end: int = -1) -> AuditRecord:
    return AuditRecord("c", kind, end, offset, 1000 + offset, REGISTER_BROKER,
                       {"brokerId": broker, "brokerEpoch": epoch, "incarnationId": f"inc{broker}"})


def pids(offset: int, broker: int, epoch: int, next_id: int, kind: str = "segment",
         end: int = -1) -> AuditRecord:
    return AuditRecord("c", kind, end, offset, 1000 + offset, PRODUCER_IDS,
                       {"brokerId": broker, "brokerEpoch": epoch, "nextProducerId": next_id})


def test_contiguous_blocks_have_no_findings() -> None:
    result = audit([reg(1, 1, 1), pids(2, 1, 1, 1000), reg(3, 2, 3), pids(4, 2, 3, 2000),
                    pids(5, 1, 1, 3000)])
    assert [(b.first_id, b.last_id, b.broker_id) for b in result.blocks] == [
        (0, 999, 1), (1000, 1999, 2), (2000, 2999, 1)]
    assert [b.registration_offset for b in result.blocks] == [1, 3, 1]
    assert result.findings == [] and not result.has_overlap


def test_gap_and_overlap_are_found() -> None:
    result = audit([reg(1, 1, 1), pids(2, 1, 1, 1000), pids(3, 1, 1, 3000), pids(4, 1, 1, 3500)])
    kinds = [(f.kind, f.first_id, f.last_id) for f in result.findings]
    assert ("gap", 1000, 1999) in kinds
    assert ("overlap", 2500, 2999) in kinds
    assert result.has_overlap
    assert result.blocks[2].finding == "overlap"


def test_unregistered_epoch_is_a_finding_but_not_an_overlap() -> None:
    result = audit([reg(1, 1, 1), pids(2, 1, 7, 1000)])
    assert [f.kind for f in result.findings] == ["unregistered-epoch"]
    assert not result.has_overlap


def test_duplicate_copies_of_a_log_count_once() -> None:
    a = [reg(1, 1, 1), pids(2, 1, 1, 1000), pids(3, 1, 1, 2000)]
    result = audit(a + a)
    assert len(result.blocks) == 2 and result.findings == []


def test_log_after_a_snapshot_is_seeded_from_it() -> None:
    # The log was cleaned up to offset 100; the snapshot at 100 says ids up to 4999 are gone.
    snap = [reg(0, 1, 50, "snapshot", 100), pids(1, -1, -1, 5000, "snapshot", 100)]
    old = [pids(0, -1, -1, 1000, "snapshot", 10)]
    log = [pids(100, 1, 50, 6000), pids(101, 1, 50, 7000)]
    result = audit(snap + old + log)
    assert result.seeded_from == {"c": 100}
    assert result.findings == []
    assert result.blocks[0].incarnation_id == "inc1"
    # Without the snapshot there is no baseline, hence no gap can be claimed for the first one.
    assert audit(log).findings[0].kind == "unregistered-epoch"
    assert all(f.kind != "gap" for f in audit(log).findings)


def test_a_controllers_own_block_needs_no_registration() -> None:
    result = audit([pids(1, 1, -1, 1000), reg(2, 101, 2), pids(3, 101, 2, 2000)])
    assert result.findings == [] and [b.first_id for b in result.blocks] == [0, 1000]
