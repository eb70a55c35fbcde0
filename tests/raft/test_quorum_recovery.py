"""`kraftpy storage recover-quorum` on a survivor's data dir: what it refuses (and that a
refusal changes nothing), what it writes (a valid Kafka log that Kafka 4.1's DumpLogSegments
reads, batch for batch as `kraftpy dump-log` does), and the Raft core's refusal of the
directories it declared lost. The whole way, with real brokers, is tests/oracle/
test_lost_majority.py.

The survivor's data dir is made to order: formatted by `storage format --initial-controllers`
for three voters, then a log as a quorum leaves it (the first leader's LeaderChange batch with
the voter set, the bootstrap's feature levels, producer-id blocks, a later epoch led by this
node), optionally a snapshot, and a torn tail as kill -9 leaves one.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kraftpy.controller.log.files import DirLock
from kraftpy.controller.log.snapshots import SnapshotId, read_snapshot, write_snapshot
from kraftpy.controller.log.storage import CLEAN_SHUTDOWN, MetadataStorage, bootstrap_values
from kraftpy.controller.raft import actions as a
from kraftpy.controller.raft import messages as m
from kraftpy.controller.raft import quorum_recovery as qr
from kraftpy.controller.raft.config import RaftConfig
from kraftpy.controller.raft.core import RaftNode
from kraftpy.controller.raft.log_state import RaftLog
from kraftpy.controller.raft.quorum_state import ElectionState
from kraftpy.controller.raft.roles import Role
from kraftpy.controller.raft.voters import (
    RAFT_BOOTSTRAP_SNAPSHOT,
    ReplicaKey,
    VoterNode,
    VoterSet,
    control_records,
    from_control,
)
from kraftpy.protocol.control_records import leader_change
from kraftpy.protocol.metadata_frame import encode_metadata_record
from kraftpy.protocol.records.producer_ids_record import ProducerIdsRecord
from kraftpy.protocol.uuid import kafka_uuid_str
from kraftpy.tools.cli import main
from support.kafka import run_tool
from support.server import free_port

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
DIRS = {1: "JEXY6aqzQY-32P5TStzaFg", 2: "MvDxzVmcRsaTz33bUuRU6A", 3: "07R5amHmR32VDA6jHkGbTA"}
LOST = f"2:{DIRS[2]},3:{DIRS[3]}"


class Survivor:
    def __init__(self, root: Path, node_id: int = 1) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.ports = {i: free_port() for i in DIRS}
        self.config = root / "server.properties"
        self.data = root / "data"
        self.mdir = self.data / "__cluster_metadata-0"
        self.config.write_text(
            f"process.roles=controller\nnode.id={node_id}\n"
            f"listeners=CONTROLLER://127.0.0.1:{self.ports.get(node_id, free_port())}\n"
            "controller.listener.names=CONTROLLER\n"
            "controller.quorum.bootstrap.servers="
            + ",".join(f"127.0.0.1:{p}" for p in self.ports.values())
            + f"\nmetadata.log.dir={self.data}\n")

    @property
    def initial(self) -> str:
        return ",".join(f"{i}@127.0.0.1:{self.ports[i]}:{d}" for i, d in DIRS.items())

    def files(self) -> dict[Path, bytes]:
        return {p: p.read_bytes() for p in sorted(self.data.rglob("*")) if p.is_file()}

    def recover(self, *args: str) -> int:
        return main(["storage", "recover-quorum", "--config", str(self.config), *args])


def survivor(root: Path, *, node_id: int = 1, snapshot: bool = False,
             torn: bool = False) -> Survivor:
    """A stopped voter of a three-voter quorum whose leader (2) and voter 3 are gone."""
    s = Survivor(root, node_id)
    assert main(["storage", "format", "--config", str(s.config), "--cluster-id", CLUSTER,
                 "--initial-controllers", s.initial]) == 0
    voters = from_control(read_snapshot(s.mdir / RAFT_BOOTSTRAP_SNAPSHOT).control)[1]
    storage = MetadataStorage.open(s.data)
    now = int(time.time() * 1000) - 60_000
    log = storage.metadata
    first = [leader_change(2, [1, 2, 3], [2, 3]), *control_records(1, voters)]
    log.append([v for _, v in first], keys=[k for k, _ in first], control=True,
               leader_epoch=1, timestamp=now)
    log.append(bootstrap_values(27, {"group.version": 1}), leader_epoch=1, timestamp=now)
    for i in range(1, 6):
        log.append([encode_metadata_record(ProducerIdsRecord(
            broker_id=100 + i % 2, broker_epoch=5, next_producer_id=1000 * i), 0)],
            leader_epoch=1, timestamp=now + i)
    key, value = leader_change(1, [1, 2, 3], [1, 3])
    log.append([value], keys=[key], control=True, leader_epoch=3, timestamp=now + 10)
    log.append([encode_metadata_record(ProducerIdsRecord(
        broker_id=101, broker_epoch=5, next_producer_id=6000), 0)], leader_epoch=3,
        timestamp=now + 11)
    log.flush()
    if snapshot:
        end = log.log_end_offset - 2
        write_snapshot(s.mdir, SnapshotId(end, 1), bootstrap_values(27), timestamp=now,
                       last_contained_log_timestamp=now, control=control_records(1, voters))
    storage.close()
    (s.mdir / "quorum-state").write_bytes(ElectionState(epoch=4).encode(1))
    if torn:  # kill -9 in the middle of a write: no clean marker, half a batch at the end
        (s.data / CLEAN_SHUTDOWN).unlink()
        segment = sorted(s.mdir.glob("*.log"))[-1]
        data = segment.read_bytes()
        segment.write_bytes(data + data[:40])
    return s


# --- refusals ------------------------------------------------------------------------------
@pytest.mark.parametrize(("args", "message"), [
    ([], "name every voter of [1:JEXY6aqzQY-32P5TStzaFg (this node), 2:MvDxzVmcRsaTz33bUuRU6A,"
         " 3:07R5amHmR32VDA6jHkGbTA] once"),
    (["--survivors", "1", "--lost-controllers", f"2:{DIRS[2]},4:{DIRS[3]}"],
     "controller 4 is not a voter of"),
    (["--survivors", "1,4", "--lost-controllers", LOST], "--survivors: controller 4 is not a voter"),
    (["--survivors", "1", "--lost-controllers", f"2:{DIRS[2]},3:{DIRS[1]}"],
     f"controller 3's directory is {DIRS[3]} in the voter set, not {DIRS[1]}"),
    (["--survivors", "1,2", "--lost-controllers", LOST],
     "controller 2 is named in both --survivors and --lost-controllers"),
    (["--survivors", "2", "--lost-controllers", f"1:{DIRS[1]},3:{DIRS[3]}"],
     "names controller 1, this node"),
    (["--survivors", "3", "--lost-controllers", f"2:{DIRS[2]}"], "must name this node (1)"),
    (["--survivors", "1", "--lost-controllers", f"2:{DIRS[2]}"],
     "controller 3 of [1:JEXY6aqzQY-32P5TStzaFg (this node), 2:MvDxzVmcRsaTz33bUuRU6A, "
     "3:07R5amHmR32VDA6jHkGbTA] is named in neither"),
    (["--survivors", "1,2", "--lost-controllers", f"3:{DIRS[3]}"],
     "2 of the 3 voters survive, a majority"),
    (["--survivors", "1", "--lost-controllers", LOST, "--leader-epoch", "4"],
     "--leader-epoch 4 is not above epoch 4"),
    (["--survivors", "1", "--lost-controllers", LOST, "--leader-epoch", str(2**31 - 1)],
     "does not leave room"),
    (["--survivors", "1", "--lost-controllers", "2"], "'2' is not ID:DIRECTORY_ID"),
    (["--survivors", "1", "--lost-controllers", "2:nope"], "'nope' in '2:nope' is not a "
                                                          "directory id"),
    (["--survivors", "1", "--lost-controllers", f"2:{DIRS[2]},2:{DIRS[3]}"],
     "names controller 2 twice"),
    (["--survivors", "one", "--lost-controllers", LOST], "'one' is not a controller id"),
    (["--survivors", "\u00b2", "--lost-controllers", LOST], "'\u00b2' is not a controller id"),
    (["--survivors", "1", "--lost-controllers", LOST],
     "refused: nothing was written. A lost majority may have committed records this data "
     "dir lacks (at offset 12 or later): add --accept-data-loss"),
])
def test_refusals_say_why_and_change_nothing(tmp_path: Path, capsys, args: list[str],
                                             message: str) -> None:
    s = survivor(tmp_path)
    before = s.files()
    assert s.recover(*args) == 1
    assert message in capsys.readouterr().err
    assert s.files() == before


def test_a_running_node_is_refused(tmp_path: Path, capsys) -> None:
    s = survivor(tmp_path)
    with DirLock(s.data):  # what `kraftpy serve` (or a Kafka controller) holds
        assert s.recover("--survivors", "1", "--lost-controllers", LOST,
                         "--accept-data-loss") == 1
    err = capsys.readouterr().err
    assert "is in use by another process" in err and "stop the node first" in err


@pytest.mark.parametrize(("format_args", "ran", "message"), [
    ([], True, "holds no KIP-853 voter set (kraft.version 0): a static quorum's voters are "
               "each node's controller.quorum.voters"),
    ([], False, "holds no metadata log (no __cluster_metadata-0): this node never ran in a "
                "quorum"),
    (["--no-initial-controllers"], True, "holds no KIP-853 voter set (kraft.version 0)"),
    (["--initial-controllers", "INITIAL"], True,
     "this node (4:AAAAAAAAAAAAAAAAAAAABA) is not a voter of the recorded set [1:"),
])
def test_a_directory_that_is_no_voter_of_a_kip853_quorum_is_refused(
        tmp_path: Path, capsys, format_args: list[str], ran: bool, message: str) -> None:
    s = Survivor(tmp_path, node_id=4)
    args = [s.initial if x == "INITIAL" else x for x in format_args]
    assert main(["storage", "format", "--config", str(s.config), "--cluster-id", CLUSTER,
                 *args]) == 0
    if "--initial-controllers" in args:  # Kafka's Formatter: a new directory, as an observer
        text = (s.data / "meta.properties").read_text()
        (s.data / "meta.properties").write_text(re.sub(
            r"directory.id=\S+", "directory.id=AAAAAAAAAAAAAAAAAAAABA", text))
    if ran:  # as a node that started leaves it: a metadata log, empty or not
        storage = MetadataStorage.open(s.data)
        if not args:
            storage.metadata.append(bootstrap_values(27), leader_epoch=1, timestamp=0)
        storage.close()
    before = s.files()
    assert s.recover("--survivors", "4", "--lost-controllers", LOST,
                     "--accept-data-loss") == 1
    assert message in capsys.readouterr().err
    assert s.files() == before


def test_an_unformatted_dir_or_another_nodes_dir_is_refused(tmp_path: Path, capsys) -> None:
    s = Survivor(tmp_path)
    assert s.recover("--survivors", "1", "--lost-controllers", LOST) == 1
    assert "is not formatted: no meta.properties" in capsys.readouterr().err
    assert not s.data.exists()
    s = survivor(tmp_path / "other")
    s.config.write_text(s.config.read_text().replace("node.id=1", "node.id=2"))
    assert s.recover("--survivors", "2", "--lost-controllers", LOST) == 1
    assert "node.id 1, but this node is 2" in capsys.readouterr().err


def test_a_node_already_alone_has_nothing_to_recover(tmp_path: Path, capsys) -> None:
    s = survivor(tmp_path)
    assert s.recover("--survivors", "1", "--lost-controllers", LOST, "--accept-data-loss") == 0
    capsys.readouterr()
    assert s.recover("--survivors", "1", "--lost-controllers", LOST, "--accept-data-loss") == 1
    assert "this node is already the only voter" in capsys.readouterr().err


# --- what is written ---------------------------------------------------------------------------
def test_the_recovered_log_is_a_valid_kafka_log(tmp_path: Path, capsys, kafka_jars: Path
                                                ) -> None:
    """After a kill -9 (a torn tail) and with a snapshot: the tail is cut, the batch follows
    the last whole one, and Kafka's DumpLogSegments reads every segment with no invalid batch,
    line for line as `kraftpy dump-log` prints it."""
    s = survivor(tmp_path, snapshot=True, torn=True)
    assert s.recover("--survivors", "1", "--lost-controllers", LOST, "--accept-data-loss") == 0
    out = capsys.readouterr().out
    assert "the newest snapshot ends at offset 10: offsets below it are known committed" in out
    assert "offsets 10 to 11 are on this disk, but whether a majority" in out
    assert ("committed at offset 12 or later, or in an epoch above 3, is not on this disk and "
            "is lost") in out
    assert "Wrote the new voter set at offset 12, leader epoch 1005" in out  # 4 + 1 + 1000
    assert ("Producer ids: the counter moves from 6000 to 1006000 (offset 15), past blocks the "
            "lost voters may have granted") in out
    segments = sorted(s.mdir.glob("*.log"))
    kafka = run_tool("DumpLogSegments", "--cluster-metadata-decoder", "--files",
                     ",".join(map(str, segments))).check().stdout
    assert "invalid bytes" not in kafka and "isvalid: false" not in kafka
    batches = [line for line in kafka.splitlines() if line.startswith("baseOffset:")]
    assert len(batches) == 11 and all("isvalid: true" in b for b in batches)
    assert re.match(r"baseOffset: 12 lastOffset: 14 count: 3 .* producerId: -1 .* "
                    r"partitionLeaderEpoch: 1005 isTransactional: false isControl: true",
                    batches[-2])
    assert re.match(r"baseOffset: 15 lastOffset: 15 count: 1 .* partitionLeaderEpoch: 1005 "
                    r"isTransactional: false isControl: false", batches[-1])
    records = [line.split("headerKeys: [] ")[1] for line in kafka.splitlines()
               if line.startswith("| offset: 1")][-4:]
    assert records == [
        'LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1}],'
        '"grantingVoters":[{"voterId":1}]}',
        'KRaftVersion {"version":0,"kRaftVersion":1}',
        'KRaftVoters {"version":0,"voters":[{"voterId":1,"voterDirectoryId":'
        f'"{DIRS[1]}","endpoints":[{{"name":"CONTROLLER","host":"127.0.0.1","port":'
        f'{s.ports[1]}}}],"kRaftVersionFeature":{{"minSupportedVersion":0,'
        '"maxSupportedVersion":1}}]}',
        'payload: {"type":"PRODUCER_IDS_RECORD","version":0,"data":{"brokerId":-1,'
        '"brokerEpoch":-1,"nextProducerId":1006000}}']
    ours = []
    for path in segments:
        assert main(["dump-log", str(path)]) == 0
        ours.extend(capsys.readouterr().out.splitlines())
    assert ours == kafka.splitlines()
    assert (s.mdir / "leader-epoch-checkpoint").read_text().splitlines()[-1] == "1005 12"
    assert (s.mdir / "quorum-state").read_text() == (
        '{"leaderId":1,"leaderEpoch":1005,"votedId":-1,"votedDirectoryId":'
        '"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}')
    (entry,) = qr.read_recoveries(s.data)
    assert (entry["offset"], entry["leaderEpoch"], entry["knownCommittedOffset"],
            entry["logEndOffset"], entry["nextProducerId"]) == (12, 1005, 10, 12, 1_006_000)
    assert entry["lost"] == [{"id": 2, "directoryId": DIRS[2]}, {"id": 3, "directoryId": DIRS[3]}]
    assert qr.declared_lost(s.data) == {ReplicaKey(2, _uuid(DIRS[2])),
                                        ReplicaKey(3, _uuid(DIRS[3]))}


@pytest.mark.slow
def test_kafkas_own_controller_leads_alone_on_the_recovered_dir(tmp_path: Path,
                                                                kafka_jars: Path) -> None:
    """The oracle for what the recovery means: a Kafka 4.1 controller started on the
    recovered data dir takes the new voter set from the log, stands alone for the next epoch
    and leads (so the command also recovers a Kafka controller's directory; Kafka does not
    refuse the lost directories as kraftpy does)."""
    from kraftpy.protocol.messages.describe_quorum_request import (
        DescribeQuorumRequest,
        PartitionData,
        TopicData,
    )
    from kraftpy.tools.kafka_connection import KafkaConnection
    from support.kafka import KafkaNode
    from support.server import HOST

    s = survivor(tmp_path / "survivor", torn=True)
    assert s.recover("--survivors", "1", "--lost-controllers", LOST, "--accept-data-loss") == 0
    node = KafkaNode(tmp_path / "kafka", roles="controller", node_id=1,
                     controller_port=s.ports[1], overrides={
                         "log.dirs": str(s.data), "controller.quorum.bootstrap.servers":
                         ",".join(f"{HOST}:{p}" for p in s.ports.values())})
    request = DescribeQuorumRequest(topics=[TopicData(topic_name="__cluster_metadata",
                                                      partitions=[PartitionData()])])
    try:
        node.start(timeout=90)
        deadline = time.monotonic() + 30
        while True:
            with KafkaConnection((HOST, s.ports[1])) as conn:
                part = conn.request(request, 2).topics[0].partitions[0]
            if part.error_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        node.stop()
    assert (part.error_code, part.leader_id, part.leader_epoch) == (0, 1, 1006)
    assert [(v.replica_id, kafka_uuid_str(v.replica_directory_id))
            for v in part.current_voters] == [(1, DIRS[1])]
    assert part.high_watermark > 16  # past our batches and its own LeaderChange


def test_an_unreadable_recovery_record_refuses_the_start(tmp_path: Path) -> None:
    """Refusing nothing could let a lost directory back in: serve exits 2 with one line."""
    s = survivor(tmp_path)
    assert s.recover("--survivors", "1", "--lost-controllers", LOST, "--accept-data-loss") == 0
    (s.data / qr.RECOVERY_FILE).write_text('{"version": 0, "recoveries": [{"lost": [1]}]}')
    done = subprocess.run([sys.executable, "-m", "kraftpy.tools", "serve", "--config",
                           str(s.config)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    errors = [line for line in (done.stdout + done.stderr).splitlines() if "ERROR" in line]
    assert len(errors) == 1 and qr.RECOVERY_FILE in errors[0], errors


# --- the decision, without a disk ---------------------------------------------------------------
def _uuid(text: str) -> uuid.UUID:
    from kraftpy.protocol.uuid import parse_kafka_uuid

    return parse_kafka_uuid(text)


def _five(**changes: object) -> qr.SurvivorLog:
    voters = VoterSet.of(VoterNode(ReplicaKey(i, uuid.UUID(int=i)),
                                   (("CONTROLLER", f"c{i}", 9093),)) for i in range(1, 6))
    fields: dict[str, object] = dict(
        log_dir=Path("/d"), cluster_id=CLUSTER, node=ReplicaKey(1, uuid.UUID(int=1)),
        kraft_version=1, voters=voters, voters_offset=40, log_start=0, log_end=100,
        last_epoch=7, quorum_epoch=9, quorum_leader=None, snapshot_end=50,
        declared_lost=frozenset())
    fields.update(changes)
    return qr.SurvivorLog(**fields)  # type: ignore[arg-type]


def test_two_survivors_of_five_keep_their_entries_and_take_an_epoch_past_the_margin() -> None:
    lost = [ReplicaKey(i, uuid.UUID(int=i)) for i in (3, 4, 5)]
    plan = qr.plan(_five(), survivors=[2, 1], lost=lost)
    assert [n.key.id for n in plan.voters.voters.values()] == [1, 2]
    assert plan.voters.voters[2] == _five().voters.voters[2]  # endpoints and versions kept
    assert (plan.epoch, plan.offset, plan.lost) == (9 + 1 + qr.EPOCH_MARGIN, 100, tuple(lost))
    assert qr.plan(_five(), survivors=[1, 2], lost=lost, leader_epoch=10).epoch == 10
    (lines,) = [x for x in qr.describe_plan(plan) if x.startswith("Other survivors")]
    assert "(2): start them on their data dirs as they are; never run recover-quorum" in lines


def test_a_static_or_empty_or_single_voter_set_is_refused() -> None:
    with pytest.raises(qr.RecoveryRefused, match="holds no KIP-853 voter set"):
        qr.plan(_five(kraft_version=0), survivors=[1], lost=[])
    with pytest.raises(qr.RecoveryRefused, match="records kraft.version 1 but no voter set"):
        qr.plan(_five(voters=VoterSet()), survivors=[1], lost=[])
    alone = VoterSet.of([_five().voters.voters[1]])
    with pytest.raises(qr.RecoveryRefused, match="already the only voter"):
        qr.plan(_five(voters=alone), survivors=[1], lost=[])


# --- the core refuses the declared-lost directories ----------------------------------------------
def _leader() -> RaftNode:
    """The lone voter after a recovery that declared 2's and 3's directories lost; 3 is back
    on a new directory, fetching as an observer."""
    me = VoterNode(ReplicaKey(1, uuid.UUID(int=1)), (("CONTROLLER", "n1", 9093),))
    n = RaftNode(config=RaftConfig(), node_id=1, directory_id=uuid.UUID(int=1),
                 cluster_id=CLUSTER, voters=VoterSet.of([me]), log=RaftLog(),
                 election=ElectionState(epoch=1005, leader_id=1), now_ms=0,
                 rng=random.Random(1), kraft_version=1,
                 endpoints=(("CONTROLLER", "n1", 9093),))
    n.declared_lost = frozenset({ReplicaKey(2, uuid.UUID(int=2)), ReplicaKey(3, uuid.UUID(int=3))})
    assert n.role is Role.LEADER and n.epoch == 1006
    return n


def _answer(actions: list) -> object:
    (respond,) = [x for x in actions if isinstance(x, a.Respond)]
    return respond.response


def test_the_core_refuses_a_lost_directory_and_serves_its_successor() -> None:
    n = _leader()
    n._take()
    epoch = n.epoch
    old = ReplicaKey(3, uuid.UUID(int=3))
    # a Vote (a pre-vote too) from the lost directory, in a far higher epoch: refused, and
    # this node neither moves to that epoch nor writes anything
    for pre in (True, False):
        actions = n.handle_request("t", m.vote_request(CLUSTER, epoch + 50, old,
                                                       ReplicaKey(1, uuid.UUID(int=1)), 1, 5,
                                                       pre), 2, 10)
        assert _answer(actions).error_code == 94  # INCONSISTENT_VOTER_SET
        assert not [x for x in actions if isinstance(x, a.WriteQuorumState)]
    assert n.epoch == epoch
    # its fetches too; the same id on its new directory is served
    fetch = m.fetch_request(CLUSTER, old, epoch, 0, 0, -1, 0, 1024)
    actions = n.handle_request("t", fetch, 17, 20)
    assert _answer(actions).error_code == 94
    new = ReplicaKey(3, uuid.UUID(int=33))
    answer = _answer(n.handle_request("t", m.fetch_request(CLUSTER, new, n.epoch, 0, 0, -1,
                                                           0, 1024), 17, 30))
    assert answer.error_code == 0 and answer.responses[0].partitions[0].error_code == 0
    # one log line per kind of request from each lost directory
    again = n.handle_request("t", fetch, 17, 40)
    assert not [x for x in again if isinstance(x, a.Note)]
    assert _answer(again).error_code == 94
    notes = [x.text for x in actions if isinstance(x, a.Note)]
    assert notes == [f"[raft 1] refusing Fetch from replica 3 (directory "
                     f"{kafka_uuid_str(uuid.UUID(int=3))}): a quorum recovery declared that "
                     "directory lost; that controller may come back only on a newly formatted "
                     "directory (further refusals are not logged)"]
