"""kcat (librdkafka 2.0) and kafkajs get producer ids from a real kraftpy process.

Both have quirks a server must live with (CLIENT-FACTS): kcat refuses idempotence unless
InitProducerId v0 is advertised and gives up when a connection closes under it; kafkajs
ignores advertised minimum versions (InitProducerId v1, FindCoordinator v2), sends its
idempotent InitProducerId to the controller named in Metadata, and initialises twice for a
transactional producer (idempotent on connect, then transactional). `.ci/run` installs both
(Debian's kcat, kafkajs from tests/clients/js/package-lock.json); elsewhere these tests skip
when the tool is missing.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from support.server import running_server

pytestmark = pytest.mark.slow
JS = Path(__file__).parent / "js"
PID_LINE = re.compile(rb"Acquired PID\{Id:(-?\d+),Epoch:(-?\d+)\}")
WAIT_S = 30.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    with running_server(tmp_path_factory.mktemp("kcat-kafkajs")) as srv:
        yield srv


def kcat_pid(bootstrap: str, *args: str, stdin: bytes = b"") -> tuple[int, int]:
    """Run kcat as a producer with `debug=eos` and return the PID it acquired.

    It is stopped as soon as the PID is logged: nothing here needs kraftpy to take the
    message itself (kraftpy hosts no partitions).
    """
    if shutil.which("kcat") is None:
        pytest.skip("kcat is not installed (.ci/run installs Debian's kcat)")
    cmd = ["kcat", "-b", bootstrap, "-P", "-t", "kraftpy-check", "-X", "debug=eos", *args]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdout=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stderr is not None
    proc.stdin.write(stdin)
    proc.stdin.close()
    deadline = time.monotonic() + WAIT_S
    try:
        for line in proc.stderr:
            match = PID_LINE.search(line)
            if match:
                return int(match.group(1)), int(match.group(2))
            if time.monotonic() > deadline:
                break
        pytest.fail(f"kcat logged no PID within {WAIT_S} s: {' '.join(cmd)}")
    finally:
        proc.kill()
        proc.wait(timeout=10)


def kafkajs_pids(bootstrap: str, transactional_id: str | None = None) -> list[tuple[int, int]]:
    """The (producer id, epoch) pairs a kafkajs producer initialised, in order."""
    if shutil.which("node") is None or not (JS / "node_modules" / "kafkajs").is_dir():
        pytest.skip("kafkajs is not installed (.ci/run runs `npm ci` in tests/clients/js)")
    cmd = ["node", str(JS / "init_producer_id.js"), bootstrap]
    if transactional_id:
        cmd.append(transactional_id)
    done = subprocess.run(cmd, capture_output=True, timeout=WAIT_S * 2, check=False)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    rows = [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]
    return [(row["producerId"], row["producerEpoch"]) for row in rows]


def test_kcat_idempotent_producers_get_distinct_ids_at_epoch_zero(server) -> None:
    first = kcat_pid(server.bootstrap, "-c", "1", "-X", "enable.idempotence=true",
                     stdin=b"x\n")
    second = kcat_pid(server.bootstrap, "-c", "1", "-X", "enable.idempotence=true",
                      stdin=b"x\n")
    assert first[1] == 0 and second[1] == 0
    assert first[0] >= 0 and second[0] >= 0 and first[0] != second[0]


def test_kcat_transactional_reinit_keeps_the_id_and_bumps_the_epoch(server) -> None:
    txn = f"kcat-{uuid.uuid4().hex[:8]}"
    pid, epoch = kcat_pid(server.bootstrap, "-X", f"transactional.id={txn}")
    again = kcat_pid(server.bootstrap, "-X", f"transactional.id={txn}")
    assert again == (pid, epoch + 1)


def test_kafkajs_idempotent_producers_get_distinct_ids(server) -> None:
    (first,) = kafkajs_pids(server.bootstrap)
    (second,) = kafkajs_pids(server.bootstrap)
    assert first[1] == 0 and second[1] == 0 and first[0] != second[0]


def test_kafkajs_transactional_reinit_keeps_the_id_and_bumps_the_epoch(server) -> None:
    txn = f"kafkajs-{uuid.uuid4().hex[:8]}"
    idempotent, transactional = kafkajs_pids(server.bootstrap, txn)
    assert idempotent[1] == 0 and transactional[1] == 0
    assert idempotent[0] != transactional[0]
    _, again = kafkajs_pids(server.bootstrap, txn)
    assert again == (transactional[0], transactional[1] + 1)
