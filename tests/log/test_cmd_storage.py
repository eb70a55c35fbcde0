"""`kraftpy storage format` / `random-uuid`, run as the installed command would run them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from kraftpy.controller.log.files import read_meta_properties
from kraftpy.controller.log.storage import read_bootstrap
from kraftpy.tools.cli import main

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
KAFKA_41_DEFAULTS = {"eligible.leader.replicas.version": 1, "group.version": 1,
                     "transaction.version": 2}


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(
        "process.roles=broker,controller\nnode.id=3\n"
        "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0\n"
        "controller.listener.names=CONTROLLER\n"
        f"metadata.log.dir={tmp_path / 'meta'}\n"
    )
    return path


def _format(tmp_path: Path, *args: str) -> int:
    return main(["storage", "format", "--config", str(_config(tmp_path)),
                 "--cluster-id", CLUSTER, *args])


def test_format_then_refuse_then_ignore(tmp_path: Path, capsys) -> None:
    assert _format(tmp_path) == 0
    out = capsys.readouterr().out
    assert f"Formatting metadata directory {tmp_path / 'meta'} with metadata.version 4.1-IV1." in out
    props = read_meta_properties(tmp_path / "meta")
    assert props["cluster.id"] == CLUSTER and props["node.id"] == "3"
    # What Kafka 4.1's `kafka-storage format` finalizes with its defaults.
    assert read_bootstrap(tmp_path / "meta") == (27, KAFKA_41_DEFAULTS)
    assert _format(tmp_path) == 1
    assert "already formatted" in capsys.readouterr().err
    assert _format(tmp_path, "--ignore-formatted") == 0


@pytest.mark.parametrize(("args", "expected"), [
    (["--feature", "transaction.version=0"],
     (27, {"eligible.leader.replicas.version": 1, "group.version": 1})),
    (["--release-version", "3.9"], (21, {})),
    (["-r", "4.0-IV3", "-f", "share.version=1"],
     (25, {"group.version": 1, "transaction.version": 2, "share.version": 1})),
])
def test_release_version_and_features_set_the_levels(tmp_path: Path, args: list[str],
                                                     expected: tuple[int, dict[str, int]]) -> None:
    assert _format(tmp_path, *args) == 0
    assert read_bootstrap(tmp_path / "meta") == expected


@pytest.mark.parametrize(("args", "message"), [
    (["--feature", "oops"], "Can't parse feature=level string oops: equals sign not found."),
    (["--feature", "group.version=abc"],
     "Can't parse feature=level string group.version=abc: unable to parse abc as a short."),
    (["-r", "3.9", "-f", "eligible.leader.replicas.version=1"],
     "eligible.leader.replicas.version could not be set to 1 because it depends on "
     "metadata.version level 23"),
    (["-r", "4.2-IV0"], "metadata.version 4.2-IV0 is not yet stable."),
    (["-f", "transaction.version=3"], "No feature:transaction.version with feature level 3"),
    (["-f", "kraft.version=1"], "Cannot set kraft.version to 1 unless one of the flags"),
])
def test_refusals_say_what_kafka_says_and_write_nothing(tmp_path: Path, capsys, args: list[str],
                                                        message: str) -> None:
    assert _format(tmp_path, *args) == 1
    assert capsys.readouterr().err.startswith(message)
    assert not (tmp_path / "meta").exists()


def test_random_uuid_as_a_process() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kraftpy.tools", "storage", "random-uuid"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.strip()) == 22


# --- --initial-controllers: a KIP-853 quorum of several voters, as Kafka 4.1 formats it ------

DIRS = {1: "JEXY6aqzQY-32P5TStzaFg", 2: "MvDxzVmcRsaTz33bUuRU6A", 3: "07R5amHmR32VDA6jHkGbTA"}
# Listed out of id order, with an IPv6 host: Kafka keeps the voters by id.
INITIAL = f"3@[::1]:9093:{DIRS[3]},1@h1:9091:{DIRS[1]},2@h2:9092:{DIRS[2]}"


def _raft_bootstrap(tmp_path: Path) -> tuple[int | None, list[tuple[int, str, list]]]:
    from kraftpy.controller.log.snapshots import read_snapshot
    from kraftpy.controller.raft.voters import RAFT_BOOTSTRAP_SNAPSHOT, from_control
    from kraftpy.protocol.uuid import kafka_uuid_str

    path = tmp_path / "meta" / "__cluster_metadata-0" / RAFT_BOOTSTRAP_SNAPSHOT
    level, record = from_control(read_snapshot(path).control)
    assert record is not None
    return level, [(v.voter_id, kafka_uuid_str(v.voter_directory_id),
                    [(e.name, e.host, e.port) for e in v.endpoints]) for v in record.voters]


def test_initial_controllers_naming_this_node_among_others(tmp_path: Path, capsys) -> None:
    assert _format(tmp_path, "--initial-controllers", INITIAL) == 0
    out = capsys.readouterr().out
    assert (f"Formatting dynamic metadata voter directory {tmp_path / 'meta'} with "
            "metadata.version 4.1-IV1.") in out
    # this node's directory id is the one the list gives it, as Kafka writes it
    assert read_meta_properties(tmp_path / "meta")["directory.id"] == DIRS[3]
    assert _raft_bootstrap(tmp_path) == (1, [
        (1, DIRS[1], [("CONTROLLER", "h1", 9091)]),
        (2, DIRS[2], [("CONTROLLER", "h2", 9092)]),
        (3, DIRS[3], [("CONTROLLER", "::1", 9093)])])


def test_initial_controllers_not_naming_this_node(tmp_path: Path, capsys) -> None:
    """Kafka 4.1 formats it too: a new directory id, the same voter set (an observer)."""
    others = INITIAL.split(",", 1)[1]  # voters 1 and 2 only; this node is 3
    assert _format(tmp_path, "-I", others) == 0
    assert "Formatting dynamic metadata directory " in capsys.readouterr().out
    directory = read_meta_properties(tmp_path / "meta")["directory.id"]
    assert directory not in DIRS.values() and len(directory) == 22
    assert [v[0] for v in _raft_bootstrap(tmp_path)[1]] == [1, 2]


@pytest.mark.parametrize(("value", "message"), [
    ("", "No voters given."),
    (" , ", "No voters given."),  # Java's split drops the empty items
    (f"1@h:1:{DIRS[1]}, ,2@h:2:{DIRS[2]}", "No @ found in dynamic voter string."),
    (f"h:1:{DIRS[1]}", "No @ found in dynamic voter string."),
    (f"@h:1:{DIRS[1]}", "Invalid @ at beginning of dynamic voter string."),
    (f"x@h:1:{DIRS[1]}", "Failed to parse node id in dynamic voter string."),
    (f"-1@h:1:{DIRS[1]}", "Invalid negative node id -1 in dynamic voter string."),
    ("1@", "No hostname found after node id."),
    (f"1@[::1:1:{DIRS[1]}", "Hostname began with left bracket, but no right bracket was found."),
    ("1@h", "No colon following hostname could be found."),
    (f"1@[::1]1:{DIRS[1]}", "Port section must start with a colon."),
    ("1@h:1", "No colon following port could be found."),
    (f"1@h:x:{DIRS[1]}", "Failed to parse port in dynamic voter string."),
    (f"1@h:65536:{DIRS[1]}", "Invalid port 65536 in dynamic voter string."),
    ("1@h:1:nope", "Failed to parse directory ID in dynamic voter string."),
    (f"1@h:1:{DIRS[1]},1@h:2:{DIRS[2]}", "Node id 1 was specified more than once."),
])
def test_bad_initial_controllers_are_refused_with_kafkas_words(tmp_path: Path, capsys,
                                                              value: str, message: str) -> None:
    assert _format(tmp_path, f"--initial-controllers={value}") == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "meta").exists()


@pytest.mark.parametrize(("args", "message"), [
    (["-f", "kraft.version=0", "-I", INITIAL], "Cannot set kraft.version to 0 if one of the "
     "flags --standalone, --initial-controllers, or --no-initial-controllers is used. For "
     "dynamic controllers support, try removing the --feature flag for kraft.version."),
    (["-f", "kraft.version=1"], "Cannot set kraft.version to 1 unless one of the flags "
     "--standalone, --initial-controllers, or --no-initial-controllers is used."),
    # kraft.version 1 needs metadata.version 3.9-IV0 (21)
    (["-r", "3.8", "-I", INITIAL], "kraft.version could not be set to 1 because it depends "
     "on metadata.version level 21"),
])
def test_kraft_version_agrees_with_the_quorum_flags(tmp_path: Path, capsys, args: list[str],
                                                    message: str) -> None:
    assert _format(tmp_path, *args) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "meta").exists()


def test_kraft_version_1_may_be_named_with_initial_controllers(tmp_path: Path) -> None:
    assert _format(tmp_path, "-f", "kraft.version=1", "-I", INITIAL) == 0
    assert _raft_bootstrap(tmp_path)[0] == 1
