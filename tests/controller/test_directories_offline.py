"""Log directories gone offline (KIP-858, JBOD), sans-IO through QuorumController: a
heartbeat's OfflineLogDirs and AssignReplicasToDirs to a directory that is not online move
the leaderships of the partitions on it, as Kafka 4.1's ReplicationControlManager does
(handleDirectoriesOffline, handleAssignReplicasToDirs; the cases of its
ReplicationControlManagerTest); and the indexes (BrokersToIsrs, BrokersToElrs, partitions
by directory, imbalanced partitions) agree with a walk over every partition after any mix
of broker events, partition changes, deletions and a restart from a snapshot."""

from __future__ import annotations

import random
import uuid
from typing import Any

from kraftpy.controller.partition_change import LOST, NO_LEADER
from kraftpy.protocol.error_codes import ErrorCode
from kraftpy.protocol.messages.assign_replicas_to_dirs_request import (
    AssignReplicasToDirsRequest,
    DirectoryData,
    PartitionData,
    TopicData,
)
from kraftpy.protocol.messages.broker_heartbeat_request import BrokerHeartbeatRequest
from kraftpy.protocol.messages.delete_topics_request import DeleteTopicsRequest
from kraftpy.protocol.messages.elect_leaders_request import ElectLeadersRequest, TopicPartitions
from kraftpy.protocol.records.broker_registration_change_record import (
    BrokerRegistrationChangeRecord,
)
from kraftpy.protocol.records.partition_change_record import PartitionChangeRecord
from support.controller_harness import Harness, settings

from .test_partition_commands import cluster, create, partition, written

B1, B2 = 101, 102
DIR1B1, DIR2B1 = uuid.UUID(int=0x1001), uuid.UUID(int=0x1002)
DIR1B2, DIR2B2 = uuid.UUID(int=0x2001), uuid.UUID(int=0x2002)


def with_dirs(h: Harness, broker: int, dirs: list[uuid.UUID]) -> int:
    """Register `broker` with `dirs` and heartbeat it unfenced; its epoch."""
    epoch = h.register(broker, log_dirs=dirs).broker_epoch
    assert not h.heartbeat(broker, epoch).is_fenced
    return epoch


def assign(h: Harness, broker: int, epoch: int,
           placement: dict[tuple[uuid.UUID, int], uuid.UUID]) -> Any:
    by_dir: dict[uuid.UUID, dict[uuid.UUID, list[int]]] = {}
    for (topic_id, index), directory in placement.items():
        by_dir.setdefault(directory, {}).setdefault(topic_id, []).append(index)
    return h.handle(AssignReplicasToDirsRequest(broker_id=broker, broker_epoch=epoch,
                                                directories=[
        DirectoryData(id=d, topics=[TopicData(topic_id=t, partitions=[
            PartitionData(partition_index=i) for i in indexes])
            for t, indexes in topics.items()])
        for d, topics in by_dir.items()]), 0)


def two_brokers_two_dirs() -> tuple[Harness, dict[int, int], uuid.UUID, uuid.UUID]:
    """testHandleDirectoriesOffline's cluster: topics a and b, two partitions each on
    [B1, B2], partition 0 on each broker's first directory, partition 1 on its second."""
    h = Harness(settings=settings(node_id=100))
    epochs = {B1: with_dirs(h, B1, [DIR1B1, DIR2B1]), B2: with_dirs(h, B2, [DIR1B2, DIR2B2])}
    a = create(h, "a", [[B1, B2], [B1, B2]])
    b = create(h, "b", [[B1, B2], [B1, B2]])
    for broker, (first, second) in ((B1, (DIR1B1, DIR2B1)), (B2, (DIR1B2, DIR2B2))):
        reply = assign(h, broker, epochs[broker], {(a, 0): first, (a, 1): second,
                                                   (b, 0): first, (b, 1): second})
        assert all(p.error_code == 0 for d in reply.directories for t in d.topics
                   for p in t.partitions)
    return h, epochs, a, b


def test_offline_directory_moves_its_partitions_leaders_and_keeps_the_online_ones():
    h, epochs, a, b = two_brokers_two_dirs()
    start = h.end
    result = h.qc.handle(BrokerHeartbeatRequest(
        broker_id=B1, broker_epoch=epochs[B1], current_metadata_offset=h.end,
        offline_log_dirs=[DIR1B1, DIR1B2]), 1, now_ms=h.now_ms, next_offset=h.end)
    assert not result.respond_before_commit  # the answer waits for the records
    h.write(result)
    records = written(h, start)
    changes = sorted((kafka_key(r), r.leader, r.isr) for r in records
                     if isinstance(r, PartitionChangeRecord))
    # DIR1B2 is not B1's: no change for it; the partitions on DIR1B1 go to B2
    assert changes == sorted([(kafka_key_of(a, 0), B2, [B2]), (kafka_key_of(b, 0), B2, [B2])])
    (reg,) = [r for r in records if isinstance(r, BrokerRegistrationChangeRecord)]
    assert (reg.broker_id, reg.broker_epoch, reg.log_dirs) == (B1, epochs[B1], [DIR2B1])
    assert len(records) == 3 and isinstance(records[-1], BrokerRegistrationChangeRecord)
    assert h.qc.cluster.brokers[B1].log_dirs == [DIR2B1]
    assert not h.qc.cluster.brokers[B1].fenced  # its other directory still serves
    assert [(partition(h, t, i).leader, partition(h, t, i).isr)
            for t in (a, b) for i in (0, 1)] == [(B2, [B2]), (B1, [B1, B2])] * 2
    # reported again: nothing new is offline, nothing is written
    start = h.end
    assert not h.heartbeat(B1, epochs[B1], offline_log_dirs=[DIR1B1]).is_fenced
    assert written(h, start) == []


def test_a_partition_on_an_offline_directory_cannot_be_led_by_that_broker():
    h, epochs, a, _ = two_brokers_two_dirs()
    h.heartbeat(B1, epochs[B1], offline_log_dirs=[DIR1B1])
    assert partition(h, a, 0).leader == B2
    # the preferred leader B1 is unfenced, but a-0's replica there is on an offline dir
    reply = h.handle(ElectLeadersRequest(election_type=0, topic_partitions=[
        TopicPartitions(topic="a", partitions=[0, 1])], timeout_ms=1000), 2)
    codes = {p.partition_id: p.error_code for r in reply.replica_election_results
             for p in r.partition_result}
    assert codes == {0: ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                     1: ErrorCode.ELECTION_NOT_NEEDED}
    # B2 fenced: a-0 has no leader (B1 may not lead it), a-1 goes to B1
    h.advance(h.settings.broker_session_timeout_ms // 2)
    h.heartbeat(B1, epochs[B1])
    h.advance(h.settings.broker_session_timeout_ms // 2 + 1)
    assert h.qc.cluster.brokers[B2].fenced
    assert (partition(h, a, 0).leader, partition(h, a, 1).leader) == (NO_LEADER, B1)


def test_offline_dirs_before_directory_assignment_change_nothing():
    h = Harness(settings=settings(node_id=100, metadata_version=16))  # 3.7-IV1
    epoch = h.unfenced_broker(B1)
    start = h.end
    reply = h.heartbeat(B1, epoch, offline_log_dirs=[uuid.uuid4()])
    assert reply.error_code == 0 and written(h, start) == []


def test_assign_replicas_to_an_offline_or_lost_directory_moves_the_leader():
    """testHandleAssignReplicasToDirs: the directory changes, then new leaders for the
    replicas put on an unknown directory and on LOST."""
    h = Harness(settings=settings(node_id=100))
    offline = uuid.UUID(int=0x3001)
    e1 = with_dirs(h, 1, [DIR1B1, DIR2B1])
    with_dirs(h, 2, [DIR1B2])
    a = create(h, "a", [[1, 2], [1, 2], [1, 2]])
    b = create(h, "b", [[1, 2], [1, 2]])
    c = create(h, "c", [[2]])
    unknown = uuid.UUID(int=0x4001)
    start = h.end
    reply = assign(h, 1, e1, {(a, 0): DIR1B1, (a, 1): DIR2B1, (a, 2): offline,
                              (b, 0): DIR1B1, (b, 1): LOST, (unknown, 1): DIR2B1,
                              (a, 137): DIR1B1, (c, 0): DIR1B1})
    codes = {(t.topic_id, p.partition_index): p.error_code for d in reply.directories
             for t in d.topics for p in t.partitions}
    assert codes == {(a, 0): 0, (a, 1): 0, (a, 2): 0, (b, 0): 0, (b, 1): 0,
                     (unknown, 1): ErrorCode.UNKNOWN_TOPIC_ID,
                     (a, 137): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                     (c, 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}
    got = sorted(((kafka_key(r), r.directories, r.leader, r.isr) for r in written(h, start)),
                 key=repr)
    assert got == sorted([
        (kafka_key_of(a, 0), [DIR1B1, DIR1B2], -2, None),
        (kafka_key_of(a, 1), [DIR2B1, DIR1B2], -2, None),
        (kafka_key_of(a, 2), [offline, DIR1B2], -2, None),
        (kafka_key_of(b, 0), [DIR1B1, DIR1B2], -2, None),
        (kafka_key_of(b, 1), [LOST, DIR1B2], -2, None),
        (kafka_key_of(a, 2), None, 2, [2]),
        (kafka_key_of(b, 1), None, 2, [2]),
    ], key=repr)
    index = h.qc.replication.brokers_to_isrs
    assert index.leaderships(1) == 3 and index.leaderships(2) == 3
    assert {partition(h, t, i).leader for t, i in ((a, 2), (b, 1), (c, 0))} == {2}


def kafka_key(record: Any) -> tuple[str, int]:
    return kafka_key_of(record.topic_id, record.partition_id)


def kafka_key_of(topic_id: uuid.UUID, index: int) -> tuple[str, int]:
    return (str(topic_id), index)


# --- the indexes against a walk over every partition -------------------------------------------


def walked(h: Harness) -> dict[str, Any]:
    """What each index must hold, found the slow way."""
    rc = h.qc.replication
    isr: dict[int, set[tuple[uuid.UUID, int]]] = {}
    elr: dict[int, set[tuple[uuid.UUID, int]]] = {}
    dirs: dict[int, set[tuple[uuid.UUID, int]]] = {}
    leads: dict[int, int] = {}
    imbalanced = set()
    for p in rc.partitions():
        key = (p.topic_id, p.partition_id)
        for b in p.isr + ([NO_LEADER] if p.leader == NO_LEADER else []):
            isr.setdefault(b, set()).add(key)
        for b in p.eligible_leader_replicas:
            elr.setdefault(b, set()).add(key)
        for d in p.directories:
            if d.int >= 100:  # the index is keyed by the id's int
                dirs.setdefault(d.int, set()).add(key)
        if p.leader != NO_LEADER:
            leads[p.leader] = leads.get(p.leader, 0) + 1
        if p.leader != (p.replicas[0] if p.replicas else NO_LEADER):
            imbalanced.add(key)
    return {"isr": isr, "elr": elr, "dirs": dirs, "leads": leads, "imbalanced": imbalanced}


def indexed(h: Harness) -> dict[str, Any]:
    rc = h.qc.replication
    isr_sets = rc.brokers_to_isrs.members

    def sets(index: Any) -> dict[Any, set[tuple[uuid.UUID, int]]]:
        out = {}
        for k in index.keys():
            parts = index.partitions(k)
            # each entry is the partition replay holds now, listed once
            assert all(rc.topics[p.topic_id].partitions[p.partition_id] is p for p in parts)
            out[k] = {(p.topic_id, p.partition_id) for p in parts}
            assert len(out[k]) == len(parts), f"{k} listed twice"
        return out
    brokers = {b for b in sets(isr_sets) if b != NO_LEADER} | set(h.qc.cluster.brokers)
    leads = {b: rc.brokers_to_isrs.leaderships(b) for b in brokers
             if rc.brokers_to_isrs.leaderships(b)}
    assert all(rc.leads_partitions(b) == (b in leads) for b in brokers)
    return {"isr": sets(isr_sets), "elr": sets(rc.brokers_to_elrs),
            "dirs": sets(rc.directories_to_partitions), "leads": leads,
            "imbalanced": {(p.topic_id, p.partition_id) for p in rc.imbalanced_partitions()}}


def test_indexes_follow_every_change_and_a_restart():
    rng = random.Random(7)
    h, epochs = cluster(3, elr=True, min_isr=2)
    topics: dict[str, uuid.UUID] = {}
    seen = {"elr": False, "leaderless": False, "imbalanced": False}
    for step in range(120):
        move = rng.choice(["create", "fence", "fence", "unfence", "unfence", "shutdown",
                           "delete", "elect", "reregister"])
        broker = rng.randint(1, 3)
        if move == "create" or not topics:
            name, rf = f"t{step}", rng.randint(1, 3)
            usable = [b for b in epochs if h.qc.cluster.usable(b)]
            if usable:  # each partition needs one usable replica, else refused
                assignments = []
                for _ in range(rng.randint(1, 4)):
                    first = rng.choice(usable)
                    rest = rng.sample([b for b in epochs if b != first], rf - 1)
                    assignments.append(rng.sample([first, *rest], rf))
                topics[name] = create(h, name, assignments)
        elif move == "fence":
            h.heartbeat(broker, epochs[broker], want_fence=True)
        elif move == "unfence":
            h.heartbeat(broker, epochs[broker])
        elif move == "shutdown":
            h.heartbeat(broker, epochs[broker], want_shut_down=True)
        elif move == "reregister":  # a new incarnation after an unclean end: leaves ISR/ELR
            epochs[broker] = h.register(broker).broker_epoch
        elif move == "delete":
            name = rng.choice(sorted(topics))
            h.handle(DeleteTopicsRequest(topic_names=[name], timeout_ms=1000), 5)
            del topics[name]
        else:
            h.handle(ElectLeadersRequest(election_type=rng.choice([0, 1]),
                                         topic_partitions=None, timeout_ms=1000), 2)
        now = walked(h)
        assert indexed(h) == now, (step, move, broker)
        seen["elr"] |= bool(now["elr"])
        seen["leaderless"] |= NO_LEADER in now["isr"]
        seen["imbalanced"] |= bool(now["imbalanced"])
    assert seen["elr"] and seen["leaderless"] and seen["imbalanced"]  # the mix reached them
    h.restart(use_snapshot=True)
    assert indexed(h) == walked(h)

