"""`kraftpy storage format` / `random-uuid`, run as the installed command would run them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from kraftpy.controller.log.files import read_meta_properties
from kraftpy.controller.log.storage import read_bootstrap
from kraftpy.tools.cli import main


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(
        "process.roles=broker,controller\nnode.id=3\n"
        "listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:0\n"
        "controller.listener.names=CONTROLLER\n"
        f"metadata.log.dir={tmp_path / 'meta'}\n"
    )
    return path


def test_format_then_refuse_then_ignore(tmp_path: Path, capsys) -> None:
    config = _config(tmp_path)
    assert (
        main(
            [
                "storage",
                "format",
                "--config",
                str(config),
                "--cluster-id",
                "MkU3OEVBNTcwNTJENDM2Qg",
                "--feature",
                "transaction.version=2",
            ]
        )
        == 0
    )
    assert "Formatted" in capsys.readouterr().out
    props = read_meta_properties(tmp_path / "meta")
    assert props["cluster.id"] == "MkU3OEVBNTcwNTJENDM2Qg" and props["node.id"] == "3"
    assert read_bootstrap(tmp_path / "meta") == (27, {"transaction.version": 2})
    assert main(["storage", "format", "--config", str(config)]) == 1
    assert "already formatted" in capsys.readouterr().err
    assert main(["storage", "format", "--config", str(config), "--ignore-formatted"]) == 0
    assert main(["storage", "format", "--config", str(config), "--feature", "oops"]) == 2


def test_random_uuid_as_a_process() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kraftpy.tools", "storage", "random-uuid"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.strip()) == 22
