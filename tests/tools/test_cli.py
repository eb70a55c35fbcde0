"""The commands as a user runs them: `python -m kraftpy.tools <command>`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.metadata_logs import MetadataLogWriter, no_op, producer_ids, register_broker


def kraftpy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "kraftpy.tools", *args], capture_output=True,
                          text=True, timeout=120)


def small_log(root: Path) -> Path:
    w = MetadataLogWriter(root / "__cluster_metadata-0")
    w.append([register_broker(1, 0)])
    w.append([producer_ids(1, 0, 1000), no_op()])
    w.append([no_op()])
    w.close()
    return root


def test_dump_log_modes(tmp_path: Path) -> None:
    root = small_log(tmp_path)
    text = kraftpy("dump-log", str(root))
    assert text.returncode == 0 and text.stderr == ""
    assert text.stdout.count("baseOffset:") == 3 and "\r" not in text.stdout  # no bar in a pipe
    hidden = kraftpy("dump-log", "--skip-noop", str(root))
    assert hidden.stdout.count("baseOffset:") == 2 and "NO_OP" not in hidden.stdout
    lines = kraftpy("dump-log", "--json", str(root)).stdout.splitlines()
    assert [json.loads(line)["record_type"] for line in lines] == [
        "REGISTER_BROKER_RECORD", "PRODUCER_IDS_RECORD", "NO_OP_RECORD", "NO_OP_RECORD"]
    summary = json.loads(kraftpy("dump-log", "--summary", "--json", str(root)).stdout)
    assert summary["by_type"] == {"REGISTER_BROKER_RECORD": 1, "PRODUCER_IDS_RECORD": 1,
                                  "NO_OP_RECORD": 2}
    assert summary["by_epoch"] == {"1": 4}
    assert summary["by_epoch_and_type"]["1"]["NO_OP_RECORD"] == 2
    assert "NO_OP_RECORD" in kraftpy("dump-log", "--summary", str(root)).stdout


def test_dump_log_errors(tmp_path: Path) -> None:
    bad = tmp_path / "x.bin"
    bad.write_bytes(b"\x00" * 10)
    proc = kraftpy("dump-log", str(bad))
    assert proc.returncode == 2 and "not a Kafka log file" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_metadata_state_command(tmp_path: Path) -> None:
    proc = kraftpy("metadata-state", str(small_log(tmp_path)))
    assert proc.returncode == 0, proc.stderr
    assert "/image/producerIds/nextProducerId: 1000" in proc.stdout
    assert "/image/cluster/brokers/1: epoch=0" in proc.stdout


def test_pipeline_arguments_are_checked_before_spark_starts(tmp_path: Path) -> None:
    proc = kraftpy("pipeline", "run", "--input", str(tmp_path / "missing"), "--output",
                   str(tmp_path / "out"))
    assert proc.returncode == 2 and "no such input" in proc.stderr
    proc = kraftpy("pipeline", "run", "--input", str(tmp_path), "--output", str(tmp_path / "o"),
                   "--tables", "records,nope")
    assert proc.returncode == 2 and "unknown table(s) nope" in proc.stderr


def test_progress_bar_only_on_a_terminal(tmp_path: Path) -> None:
    import io

    from kraftpy.tools.logdecode.paths import expand
    from kraftpy.tools.logdecode.progress import Progress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    files = list(expand([small_log(tmp_path)]))
    assert Progress.maybe(files, enabled=None, stream=io.StringIO()) is None
    assert Progress.maybe(files, enabled=False, stream=Terminal()) is None
    term = Terminal()
    bar = Progress.maybe(files, enabled=None, stream=term)
    assert bar is not None
    for f in files:
        bar.advance(f.path)
    bar.close()
    assert "decoding" in term.getvalue()
