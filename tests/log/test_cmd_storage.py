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
