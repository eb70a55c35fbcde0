"""The documentation's shell examples, run as written (docs/index.md, "Examples that run").

The convention, for every page under docs/ and for README.md:
- a fenced block whose info string is `sh` is an example and runs; `text`, `properties` and
  the others are shown, never run;
- a page's examples run in order, in one fresh directory of their own, each block as one
  `bash -euo pipefail` script (a failing command fails the test); `kraftpy` and `python3` are
  the ones under test;
- a block whose first line is `# runs until Ctrl-C` is one long-running command (`kraftpy
  serve ...`, `kraftpy cluster ...`): it is started in the background and waited for, the
  blocks after it talk to it, and once the page's last block has run it gets SIGINT and must
  exit 0. It runs on free ports: its command gets them as options, and the addresses it would
  have by default (127.0.0.1:9092 and :9093 for `serve`, 127.0.0.1:29092.. and :29192.. for
  `cluster`, and any other 127.0.0.1 address its command names, such as a metrics listener)
  are replaced by them in its command and in the blocks after it. A `kraftpy serve --config
  FILE` runs on the listeners of its file (written by an earlier block, so already rewritten).
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# The page whose cluster (real brokers) tests/tools/test_cluster_command.py shares.
CLUSTER_PAGE = DOCS / "getting-started.md"
LONG_RUNNING = "# runs until Ctrl-C"
_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+|~~~+)(?P<info>[^\n`]*)$")
CLUSTER_READY = "running; Ctrl-C stops every node"


@dataclass(frozen=True)
class Example:
    page: Path
    line: int  # 1-based line of the opening fence
    code: str

    @property
    def long_running(self) -> bool:
        return self.code.lstrip().startswith(LONG_RUNNING)

    @property
    def command(self) -> str:
        """A long-running block's command (the lines after its marker, joined)."""
        lines = [ln for ln in self.code.splitlines()[1:] if ln.strip()
                 and not ln.lstrip().startswith("#")]
        return " ".join(ln.rstrip("\\").strip() for ln in lines)

    def __str__(self) -> str:
        page = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{page}:{self.line}"


def blocks(page: Path) -> Iterator[tuple[int, str, str]]:
    """(line, info string, code) of every fenced block of a markdown page."""
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, indent, start = m["fence"], len(m["indent"]), i
        body = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
            i += 1
        yield start + 1, m["info"].strip().split(" ")[0], "\n".join(body) + "\n"
        i += 1


def examples(page: Path) -> list[Example]:
    return [Example(page, line, code) for line, info, code in blocks(page) if info == "sh"]


def pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]


@dataclass
class Background:
    """A long-running example: its process and the addresses its page's blocks are given."""

    example: Example
    proc: subprocess.Popen[bytes]
    output: Path
    addresses: dict[str, str] = field(default_factory=dict)


class PageRun:
    """One page's examples, run in order in `workdir`."""

    def __init__(self, workdir: Path, env: dict[str, str] | None = None,
                 kafka_libs: Path | None = None) -> None:
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        from support.kafka import LIBS

        bindir = str(Path(sys.executable).parent)
        # Kafka's jars are the suite's, never a copy in the user's cache.
        self.env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", ""),
                    "PYTHONUNBUFFERED": "1", "KRAFTPY_KAFKA_LIBS": str(kafka_libs or LIBS),
                    **(env or {})}
        self.kafka_libs = kafka_libs
        self.background: list[Background] = []

    def substitute(self, code: str) -> str:
        """The code with each default address a long-running example took replaced, in one
        pass (a replacement is never replaced again)."""
        mapping = {k: v for bg in self.background for k, v in bg.addresses.items()}
        return re.sub(r"127\.0\.0\.1:\d+", lambda m: mapping.get(m[0], m[0]), code)

    def run(self, example: Example, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        if example.long_running:
            self.start(example)
            return subprocess.CompletedProcess([], 0, "", "")
        code = self.substitute(example.code)
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=self.workdir,
                              env=self.env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise AssertionError(f"the example at {example} exited {done.returncode}:\n{code}\n"
                                 f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n"
                                 f"{done.stderr[-3000:]}{self.background_tails()}")
        return done

    def start(self, example: Example, timeout: float = 240.0) -> Background:
        from support.server import HOST, free_port, probe

        argv = shlex.split(self.substitute(example.command))
        assert argv[:1] == ["kraftpy"] and argv[1:2] in (["serve"], ["cluster"]), (
            f"{example}: a long-running example is `kraftpy serve` or `kraftpy cluster`")
        # Addresses the command itself names (a metrics listener, ...) get free ports too.
        addresses: dict[str, str] = {a: f"{HOST}:{free_port()}" for a in
                                     re.findall(r"127\.0\.0\.1:\d+", " ".join(argv))}
        argv = [re.sub(r"127\.0\.0\.1:\d+", lambda m: addresses[m[0]], a) for a in argv]
        probes: list[str] = []
        config = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a in ("-c", "--config")),
                      None)
        if argv[1] == "serve" and config is not None:
            # its own file (written by an earlier block, addresses already rewritten)
            from kraftpy.controller.config import parse_endpoints, parse_properties

            props = parse_properties((self.workdir / config).read_text())
            probes = [f"{e.host}:{e.port}" for e in parse_endpoints("listeners",
                                                                    props["listeners"])]
        elif argv[1] == "serve":
            client, controller = free_port(), free_port()
            argv += ["--override", f"listeners=PLAINTEXT://{HOST}:{client},"
                     f"CONTROLLER://{HOST}:{controller}"]
            probes = [f"{HOST}:{client}", f"{HOST}:{controller}"]
            addresses.update({f"{HOST}:9092": probes[0], f"{HOST}:9093": probes[1]})
        else:
            base = cluster_base_port()
            argv += ["--base-port", str(base)]
            if self.kafka_libs is not None:
                argv += ["--kafka-libs", str(self.kafka_libs)]
            for i in range(10):
                addresses[f"{HOST}:{29092 + i}"] = f"{HOST}:{base + i}"
                addresses[f"{HOST}:{29192 + i}"] = f"{HOST}:{base + 100 + i}"
        output = self.workdir / f"example-{example.line}.out"
        with output.open("wb") as out:
            proc = subprocess.Popen(argv, cwd=self.workdir, env=self.env, stdout=out,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        bg = Background(example, proc, output, addresses)
        self.background.append(bg)
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"the example at {example} exited {proc.returncode}:\n"
                                     f"{output.read_text(errors='replace')[-4000:]}")
            if argv[1] == "serve":
                ready = all(probe(host, int(port)) for host, port in
                            (a.rsplit(":", 1) for a in probes))
            else:
                ready = CLUSTER_READY in output.read_text(errors="replace")
            if ready:
                return bg
            if time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"the example at {example} was not ready within "
                                     f"{timeout:.0f} s:\n{output.read_text(errors='replace')[-4000:]}")
            time.sleep(0.1)

    def background_tails(self) -> str:
        return "".join(f"\n--- {bg.example}\n{bg.output.read_text(errors='replace')[-2000:]}"
                       for bg in self.background)

    def stop(self, timeout: float = 90.0) -> list[tuple[Background, int | None]]:
        """SIGINT (Ctrl-C) to each long-running example, newest first; their exit statuses
        (None: it had to be killed)."""
        codes = []
        for bg in reversed(self.background):
            code: int | None
            if bg.proc.poll() is None:
                bg.proc.send_signal(signal.SIGINT)
                try:
                    code = bg.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    os.killpg(bg.proc.pid, signal.SIGKILL)
                    bg.proc.wait()
                    code = None
            else:
                code = bg.proc.returncode
            codes.append((bg, code))
        self.background.clear()
        return codes


def cluster_base_port() -> int:
    """A base port for `kraftpy cluster` whose broker and controller ports are all free and
    below the kernel's ephemeral range (as support.server.free_port picks)."""
    import random

    from kraftpy.tools.local_cluster import port_free

    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 32000, 10)
        if all(port_free(base + i) and port_free(base + 100 + i) for i in range(10)):
            return base
    raise RuntimeError("no free ports for a cluster")
