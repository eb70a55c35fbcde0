"""A node's quorum parts that need no peers: the metadata log cut back to a batch boundary
(a follower's diverging suffix), `controller.quorum.voters` as Kafka writes it, and the
voters a configuration names."""

from __future__ import annotations

from pathlib import Path

import pytest
from kraftpy.controller.config import build_config
from kraftpy.controller.log.partition_log import PartitionLog
from kraftpy.controller.quorum import QuorumError, configured_voters, lone_voter
from kraftpy.controller.raft.config import RaftConfigError, parse_voters


def _log(tmp_path: Path) -> PartitionLog:
    d = tmp_path / "__cluster_metadata-0"
    d.mkdir(exist_ok=True)
    return PartitionLog.open(d)


def _values(log: PartitionLog) -> list[tuple[int, int, bytes]]:
    out = []
    for batch in log.read():
        offset = batch.base_offset
        for value in batch.values():
            out.append((offset, batch.partition_leader_epoch, value))
            offset += 1
    return out


def test_truncate_to_drops_the_suffix_and_its_epochs(tmp_path: Path) -> None:
    log = _log(tmp_path)
    log.append([b"a", b"b"], leader_epoch=1, timestamp=1)
    log.append([b"c"], leader_epoch=1, timestamp=2)
    log.append([b"d", b"e"], leader_epoch=2, timestamp=3)
    log.flush()
    assert log.leader_epochs == [(1, 0), (2, 3)]
    log.truncate_to(3)
    assert log.log_end_offset == 3
    assert log.leader_epochs == [(1, 0)]
    assert [v for _, _, v in _values(log)] == [b"a", b"b", b"c"]
    log.append([b"x"], leader_epoch=3, timestamp=4)  # the leader's records take their place
    log.flush()
    log.close()
    reopened = _log(tmp_path)
    assert [(o, e, v) for o, e, v in _values(reopened)][-2:] == [(2, 1, b"c"), (3, 3, b"x")]
    assert reopened.leader_epochs == [(1, 0), (3, 3)]
    assert reopened.log_end_offset == 4
    reopened.close()


def test_truncate_to_a_pending_batch_and_to_nothing(tmp_path: Path) -> None:
    log = _log(tmp_path)
    log.append([b"a"], leader_epoch=1, timestamp=1)
    log.append([b"b"], leader_epoch=1, timestamp=1)  # written, not yet fsynced: cut
    log.truncate_to(1)
    assert [v for _, _, v in _values(log)] == [b"a"]
    log.truncate_to(5)  # past the end: nothing to do
    assert log.log_end_offset == 1
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.leader_epochs == [] and _values(log) == []
    log.close()


def test_truncate_to_where_a_segment_begins(tmp_path: Path) -> None:
    """A diverging suffix that starts a segment: the segments from it go, the one before
    stays whole and takes the next appends (it was refused as "not found" in the earlier
    segment, stopping the follower)."""
    d = tmp_path / "__cluster_metadata-0"
    log = PartitionLog.open(d, segment_bytes=1024)
    for i in range(18):
        log.append([b"x" * 100], leader_epoch=1 + i // 9, timestamp=i)
    log.flush()
    bases = [seg.base_offset for seg in log.segments]
    assert bases == [0, 6, 12]
    log.truncate_to(12)
    assert [seg.base_offset for seg in log.segments] == [0, 6]
    assert log.log_end_offset == 12 and log.leader_epochs == [(1, 0), (2, 9)]
    log.truncate_to(6)
    assert [seg.base_offset for seg in log.segments] == [0] and log.log_end_offset == 6
    assert log.leader_epochs == [(1, 0)]
    log.append([b"y"], leader_epoch=3, timestamp=20)
    log.flush()
    log.close()
    reopened = PartitionLog.open(d, segment_bytes=1024)
    assert [v for _, _, v in _values(reopened)] == [b"x" * 100] * 6 + [b"y"]
    assert reopened.leader_epochs == [(1, 0), (3, 6)]
    reopened.close()


def test_segments_trimmed_by_a_snapshot_stay_gone(tmp_path: Path) -> None:
    """A snapshot's trim deletes a rolled segment not yet covered by a flush round: the round
    syncs the segments left, and does not create the deleted file again (an empty segment at
    offset 0 made the reopened log start there, at records it does not hold)."""
    d = tmp_path / "__cluster_metadata-0"
    log = PartitionLog.open(d, segment_bytes=1024)
    for i in range(12):
        log.append([b"x" * 100], leader_epoch=1, timestamp=i)
    assert [seg.base_offset for seg in log.segments] == [0, 6]
    log.delete_segments_below(6)
    log.flush()
    assert sorted(p.name for p in d.glob("*.log")) == ["00000000000000000006.log"]
    log.close()
    reopened = PartitionLog.open(d, segment_bytes=1024, recovery_point=6)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (6, 12)
    reopened.close()


def test_truncate_inside_a_batch_is_refused(tmp_path: Path) -> None:
    log = _log(tmp_path)
    log.append([b"a", b"b", b"c"], leader_epoch=1, timestamp=1)
    log.flush()
    with pytest.raises(ValueError, match="batch boundary"):
        log.truncate_to(1)
    assert log.log_end_offset == 3
    log.close()


def test_parse_voters_as_kafka_writes_them() -> None:
    assert parse_voters("1@localhost:9093, 2@10.0.0.2:9094,3@[::1]:9095") == {
        1: ("localhost", 9093), 2: ("10.0.0.2", 9094), 3: ("::1", 9095)}
    for bad in ("1localhost:9093", "x@h:1", "1@h", "1@h:0", "1@:9093", "1@h:1,1@h:2"):
        with pytest.raises(RaftConfigError, match="controller.quorum.voters"):
            parse_voters(bad)


def _config(tmp_path: Path, **extra: str):
    props = {"process.roles": "broker,controller", "node.id": "1",
             "listeners": "PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0",
             "controller.listener.names": "CONTROLLER",
             "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
             "metadata.log.dir": str(tmp_path / "data"), **extra}
    return build_config(props)


def test_which_voters_a_configuration_names(tmp_path: Path) -> None:
    alone = _config(tmp_path, listeners="PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:9093")
    assert configured_voters(alone) is None  # neither voters nor bootstrap servers: the
    assert lone_voter(alone) == {1: ("127.0.0.1", 9093)}  # lone voter, at its listener
    one = _config(tmp_path, **{"controller.quorum.voters": "1@127.0.0.1:9093"})
    assert configured_voters(one) == {1: ("127.0.0.1", 9093)}
    three = _config(tmp_path, **{"controller.quorum.voters":
                                 "1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095"})
    assert configured_voters(three) == {1: ("127.0.0.1", 9093), 2: ("127.0.0.1", 9094),
                                        3: ("127.0.0.1", 9095)}
    outside = _config(tmp_path, **{"controller.quorum.voters": "2@h:1,3@h:2"})
    with pytest.raises(QuorumError, match="node.id 1 is not one of"):
        configured_voters(outside)
    with pytest.raises(QuorumError, match="is not id@host:port"):
        configured_voters(_config(tmp_path, **{"controller.quorum.voters": "1@h:1,oops"}))
