"""PartitionChangeBuilder, case by case, with the expectations of Kafka 4.1's own
PartitionChangeBuilderTest (the same partitions FOO, BAR, BAZ and OFFLINE, the same targets,
the same records), at each PartitionChangeRecord version's metadata.version."""

from __future__ import annotations

import uuid

import pytest
from kraftpy.controller.partition_change import (
    LOST,
    MIGRATING,
    NO_LEADER,
    NO_LEADER_CHANGE,
    RECOVERED,
    RECOVERING,
    UNASSIGNED,
    Election,
    PartitionChangeBuilder,
    ReassignmentReplicas,
    is_no_op,
    java_int_set_order,
    revert_reassignment,
)
from kraftpy.controller.replication_control import Partition, ReplicationControlManager
from kraftpy.protocol.records.partition_change_record import PartitionChangeRecord
from kraftpy.protocol.records.topic_record import TopicRecord

MV_FOR_VERSION = {0: 15, 1: 17, 2: 23}  # 3.7-IV0, 3.7-IV2, 4.0-IV1
VERSIONS = sorted(MV_FOR_VERSION)
FOO_ID, BAR_ID, BAZ_ID = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
D1, D2, D3, D4 = (uuid.uuid4() for _ in range(4))


def part(topic_id: uuid.UUID, replicas: list[int], isr: list[int], leader: int, *,
         dirs: list[uuid.UUID] | None = None, removing: list[int] | None = None,
         adding: list[int] | None = None, elr: list[int] | None = None,
         last_known: list[int] | None = None, recovery: int = RECOVERED) -> Partition:
    return Partition(topic_id, 0, replicas, isr, leader, 100, 200, removing or [], adding or [],
                     recovery, dirs if dirs is not None else [MIGRATING] * len(replicas),
                     elr or [], last_known or [])


def foo() -> Partition:
    return part(FOO_ID, [2, 1, 3], [2, 1, 3], 1, dirs=[D1, D2, UNASSIGNED])


def bar() -> Partition:
    return part(BAR_ID, [1, 2, 3, 4], [1, 2, 3], 1, dirs=[UNASSIGNED, D2, D3, D4],
                removing=[1], adding=[4])


def baz() -> Partition:
    return part(BAZ_ID, [2, 1, 3], [1, 3], 3, dirs=[D1, D2, D3])


def builder(p: Partition, accept, version: int, min_isr: int = 2, **kw) -> PartitionChangeBuilder:
    b = PartitionChangeBuilder(p, accept, MV_FOR_VERSION[version], min_isr,
                               elr_enabled=version >= 2, default_dir=lambda _b: UNASSIGNED, **kw)
    return b


def foo_builder(version: int, **kw) -> PartitionChangeBuilder:
    return builder(foo(), lambda r: r != 3, version, **kw)


def bar_builder(version: int, **kw) -> PartitionChangeBuilder:
    return builder(bar(), lambda r: r != 3, version, **kw)


def baz_builder(version: int, **kw) -> PartitionChangeBuilder:
    return builder(baz(), lambda r: True, version, **kw)


def offline_builder(version: int, **kw) -> PartitionChangeBuilder:
    if version >= 2:
        p = part(FOO_ID, [2, 1, 3], [], NO_LEADER, dirs=[D1, D2, D3], elr=[3], last_known=[2])
    else:
        p = part(FOO_ID, [2, 1, 3], [3], NO_LEADER, dirs=[D1, D2, D3])
    return builder(p, lambda r: r == 1, version, **kw)


def change(topic_id: uuid.UUID, **fields) -> PartitionChangeRecord:
    return PartitionChangeRecord(topic_id=topic_id, partition_id=0, **fields)


def merged(p: Partition, record: PartitionChangeRecord) -> Partition:
    rc = ReplicationControlManager()
    rc.replay_topic(TopicRecord(name="foo", topic_id=p.topic_id))
    rc.replay_partition(p.record(0)[0])
    rc.replay_partition_change(record)
    return rc.topics[p.topic_id].partitions[p.partition_id]


def test_no_op_is_only_a_record_without_changes():
    assert is_no_op(change(FOO_ID))
    for fields in ({"isr": []}, {"leader": 1}, {"leader": -1}, {"replicas": [1]},
                   {"removing_replicas": [1]}, {"adding_replicas": [1]},
                   {"leader_recovery_state": RECOVERED}, {"directories": [D1]},
                   {"eligible_leader_replicas": [5]}, {"last_known_elr": [6]}):
        assert not is_no_op(change(FOO_ID, **fields)), fields


@pytest.mark.parametrize("version", VERSIONS)
def test_elect_leader(version):
    cases = [
        (foo_builder(version, election=Election.PREFERRED), (2, False)),
        (foo_builder(version), (1, False)),
        (foo_builder(version, election=Election.UNCLEAN), (1, False)),
        (foo_builder(version).set_target_isr([1, 3]), (1, False)),
        (foo_builder(version, election=Election.UNCLEAN).set_target_isr([1, 3]), (1, False)),
        (foo_builder(version).set_target_isr([3]), (NO_LEADER, False)),
        (foo_builder(version, election=Election.UNCLEAN).set_target_isr([3]), (2, True)),
        (foo_builder(version, election=Election.UNCLEAN).set_target_isr([4])
         .set_target_replicas([2, 1, 3, 4]), (4, False)),
        (baz_builder(version, election=Election.PREFERRED), (3, False)),
        (baz_builder(version), (3, False)),
        (baz_builder(version, election=Election.UNCLEAN), (3, False)),
    ]
    for b, expected in cases:
        assert b.elect_leader() == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_no_change(version):
    assert foo_builder(version).build() is None
    assert foo_builder(version, election=Election.UNCLEAN).build() is None
    assert bar_builder(version).build() is None
    assert bar_builder(version, election=Election.UNCLEAN).build() is None
    assert baz_builder(version, election=Election.PREFERRED).build() is None


@pytest.mark.parametrize("version", VERSIONS)
def test_isr_shrink_keeps_the_leader_epoch(version):
    assert foo_builder(version).set_target_isr([2, 1]).build() == change(FOO_ID, isr=[2, 1])


@pytest.mark.parametrize("mv,bumps", [(11, True), (12, False), (27, False)])
def test_isr_shrink_bumps_the_leader_epoch_only_before_3_6_iv0(mv, bumps):
    b = PartitionChangeBuilder(foo(), lambda r: True, mv, 2).set_target_isr([2, 1])
    assert b.build().leader == (1 if bumps else NO_LEADER_CHANGE)
    grow = PartitionChangeBuilder(part(FOO_ID, [2, 1, 3], [2, 1], 1), lambda r: True, mv, 2)
    assert grow.set_target_isr([2, 1, 3]).build().leader == NO_LEADER_CHANGE


@pytest.mark.parametrize("version", VERSIONS)
def test_isr_change_and_leader_change(version):
    assert foo_builder(version).set_target_isr([2, 3]).build() == \
        change(FOO_ID, isr=[2, 3], leader=2)


@pytest.mark.parametrize("version", VERSIONS)
def test_reassignment_rearranges_replicas(version):
    expected = change(FOO_ID, replicas=[3, 2, 1])
    if version >= 1:
        expected.directories = [UNASSIGNED, D1, D2]
    assert foo_builder(version).set_target_replicas([3, 2, 1]).build() == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_isr_enlargement_completes_reassignment(version):
    expected = change(BAR_ID, replicas=[2, 3, 4], isr=[2, 3, 4], leader=2,
                      removing_replicas=[], adding_replicas=[])
    if version >= 1:
        expected.directories = [D2, D3, D4]
    assert bar_builder(version).set_target_isr([1, 2, 3, 4]).build() == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_revert_reassignment(version):
    replicas, isr, unclean = revert_reassignment(bar())
    assert (replicas, isr, unclean) == ([1, 2, 3], [1, 2, 3], False)
    expected = change(BAR_ID, replicas=[1, 2, 3], leader=1, removing_replicas=[],
                      adding_replicas=[])
    if version >= 1:
        expected.directories = [UNASSIGNED, D2, D3]
    b = bar_builder(version).set_target_replicas(replicas).set_target_isr(isr)
    assert b.set_target_removing([]).set_target_adding([]).build() == expected


def test_revert_that_empties_the_isr_is_unclean():
    p = part(BAR_ID, [1, 2, 3, 4], [4], 4, removing=[1, 2], adding=[4])
    assert revert_reassignment(p) == ([1, 2, 3], [1], True)


@pytest.mark.parametrize("version", VERSIONS)
def test_removing_replica_reassignment(version):
    plan = ReassignmentReplicas.of([2, 1, 3], [1, 2])
    assert (plan.removing, plan.adding, plan.replicas) == ([3], [], [1, 2, 3])
    expected = change(FOO_ID, replicas=[1, 2], isr=[2, 1], leader=1)
    if version >= 1:
        expected.directories = [D2, D1]
    b = foo_builder(version).set_target_replicas(plan.replicas).set_target_removing(plan.removing)
    assert b.build() == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_adding_replica_reassignment(version):
    plan = ReassignmentReplicas.of([2, 1, 3], [1, 2, 3, 4])
    assert (plan.removing, plan.adding, plan.replicas) == ([], [4], [1, 2, 3, 4])
    expected = change(FOO_ID, replicas=[1, 2, 3, 4], adding_replicas=[4])
    if version >= 1:
        expected.directories = [D2, D1, UNASSIGNED, UNASSIGNED]
    b = foo_builder(version).set_target_replicas(plan.replicas).set_target_adding(plan.adding)
    assert b.build() == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_unclean_leader_election(version):
    assert foo_builder(version, election=Election.UNCLEAN).set_target_isr([3]).build() == \
        change(FOO_ID, isr=[2], leader=2, leader_recovery_state=RECOVERING)
    expected = change(FOO_ID, isr=[1], leader=1, leader_recovery_state=RECOVERING)
    if version >= 2:  # the unclean election clears the partition's ELR
        expected.eligible_leader_replicas, expected.last_known_elr = [], []
    assert offline_builder(version, election=Election.UNCLEAN).build() == expected
    assert offline_builder(version, election=Election.UNCLEAN).set_target_isr([2]).build() \
        == expected


def test_leadership_change_keeps_the_recovery_state():
    p = part(FOO_ID, [1, 2, 3], [1], 1, recovery=RECOVERING)
    off = PartitionChangeBuilder(p, lambda r: False, 7, 2).set_target_isr([]).build()
    assert (off.leader_recovery_state, off.leader) == (-1, NO_LEADER)
    p = merged(p, off)
    assert (p.leader, p.isr, p.leader_recovery_state) == (NO_LEADER, [1], RECOVERING)
    on = PartitionChangeBuilder(p, lambda r: True, 7, 2).build()
    assert (on.leader_recovery_state, on.leader) == (-1, 1)


@pytest.mark.parametrize("version", VERSIONS)
def test_elr_isr_shrink_below_min_isr(version):
    p = part(FOO_ID, [1, 2, 3, 4], [1, 2, 3, 4], 1)
    b = builder(p, lambda r: r != 3, version, 3, election=Election.PREFERRED)
    b.use_last_known_leader = False
    record = b.set_target_isr([1, 2]).build()
    expected = change(FOO_ID, isr=[1, 2])
    if version >= 2:
        expected.eligible_leader_replicas = [3, 4]
    assert record == expected
    p = merged(p, record)
    assert (p.eligible_leader_replicas, p.last_known_elr) == (([3, 4], []) if version >= 2
                                                              else ([], []))


@pytest.mark.parametrize("version", VERSIONS)
def test_elr_isr_expand_above_min_isr(version):
    p = part(FOO_ID, [1, 2, 3, 4], [1, 2], 1, elr=[3], last_known=[4])
    b = builder(p, lambda r: r != 3, version, 3, election=Election.PREFERRED)
    b.use_last_known_leader = False
    assert b.set_target_isr([1, 2, 3]).build() == change(
        FOO_ID, isr=[1, 2, 3], eligible_leader_replicas=[], last_known_elr=[])


@pytest.mark.parametrize("version", VERSIONS)
def test_elr_isr_add_new_member_not_in_elr(version):
    p = part(FOO_ID, [1, 2, 3, 4], [1], 1, elr=[3], last_known=[2])
    b = builder(p, lambda r: r != 3, version, 3, election=Election.PREFERRED)
    b.use_last_known_leader = False
    expected = change(FOO_ID, isr=[1, 4])
    if version < 2:
        expected.eligible_leader_replicas, expected.last_known_elr = [], []
    assert b.set_target_isr([1, 4]).build() == expected


@pytest.mark.parametrize("version", VERSIONS)
def test_elr_removes_unclean_shutdown_replicas(version):
    p = part(FOO_ID, [1, 2, 3, 4], [1], 1, elr=[2, 3])
    b = builder(p, lambda r: r != 3, version, 3, election=Election.PREFERRED)
    b.use_last_known_leader = False
    expected = change(FOO_ID, eligible_leader_replicas=[2], last_known_elr=[3]) \
        if version >= 2 else change(FOO_ID, eligible_leader_replicas=[])
    assert b.set_unclean_shutdown_replicas([3]).build() == expected


def test_keeps_directories_after_reassignment():
    p = part(FOO_ID, [2, 1, 3], [2, 1, 3], 1, dirs=[D1, D2, D3])
    d5 = uuid.uuid4()
    b = PartitionChangeBuilder(p, lambda r: True, 17, 2, default_dir=lambda _b: UNASSIGNED)
    record = b.set_target_replicas([3, 1, 5, 4]).set_directory(5, d5).build()
    assert record == change(FOO_ID, leader=1, replicas=[3, 1, 5, 4],
                            directories=[D3, D2, d5, UNASSIGNED])


def test_update_directories():
    p = part(FOO_ID, [2, 1, 3], [2, 1, 3], 2, dirs=[D1, D2, D3])
    b = PartitionChangeBuilder(p, lambda r: True, 27, 2, default_dir=lambda _b: UNASSIGNED)
    record = b.set_directory(3, D4).set_directory(1, LOST).build()
    assert record == change(FOO_ID, directories=[D1, LOST, D4])


@pytest.mark.parametrize("last_known_leader", [True, False])
def test_elr_member_can_be_elected(last_known_leader):
    p = part(FOO_ID, [1, 2, 3, 4], [1], 1, elr=[3], last_known=[] if last_known_leader else [2])
    b = builder(p, lambda r: r != 1, 2, 3, election=Election.PREFERRED)
    b.use_last_known_leader = last_known_leader
    record = b.set_target_isr([]).build()
    assert record == change(FOO_ID, isr=[3], eligible_leader_replicas=[1], leader=3)
    p = merged(p, record)
    assert (p.eligible_leader_replicas, p.isr) == ([1], [3])


@pytest.mark.parametrize("last_known_leader", [True, False])
def test_elr_isr_can_shrink_to_zero(last_known_leader):
    p = part(FOO_ID, [1, 2, 3, 4], [1, 2, 3, 4], 1)
    b = builder(p, lambda r: False, 2, 3, election=Election.PREFERRED)
    b.use_last_known_leader = last_known_leader
    expected = change(FOO_ID, isr=[], leader=NO_LEADER, eligible_leader_replicas=[1, 2, 3, 4])
    if last_known_leader:
        expected.last_known_elr = [1]
    record = b.set_target_isr([]).build()
    assert record == expected
    p = merged(p, record)
    assert p.eligible_leader_replicas == [1, 2, 3, 4]
    if last_known_leader:
        again = builder(p, lambda r: False, 2, 3, election=Election.PREFERRED)
        again.set_unclean_shutdown_replicas([2])
        assert again.build().last_known_elr is None


def test_elr_elects_the_last_known_leader():
    p = part(FOO_ID, [1, 2, 3, 4], [], NO_LEADER, last_known=[1])
    b = builder(p, lambda r: True, 2, 3, election=Election.PREFERRED).set_target_isr([])
    assert b.build() == change(FOO_ID, isr=[1], leader=1, leader_recovery_state=RECOVERING,
                               last_known_elr=[])


def test_elr_last_known_leader_not_elected_over_the_elr():
    p = part(FOO_ID, [1, 2, 3, 4], [], NO_LEADER, elr=[3], last_known=[1])
    assert builder(p, lambda r: r != 3, 2, 3, election=Election.PREFERRED) \
        .set_target_isr([]).build() is None


@pytest.mark.parametrize("election", list(Election))
def test_elr_dead_last_known_leader_is_not_elected(election):
    p = part(FOO_ID, [1, 2, 3, 4], [], NO_LEADER, last_known=[1])
    assert builder(p, lambda r: False, 2, 3, election=election).set_target_isr([]).build() \
        is None


def test_java_hash_set_order():
    assert java_int_set_order([3, 1, 2]) == [1, 2, 3]
    assert java_int_set_order([17, 1, 16]) == [16, 17, 1]  # buckets 0, 1, 1 (in order)
    assert java_int_set_order([2, 2, 1]) == [1, 2]
    many = list(range(20, 0, -1))  # 20 members: capacity 32, so ascending
    assert java_int_set_order(many) == sorted(many)
