"""The Spark rows of benchmarks/decode.py: the `kraft-metadata` source at local[1] and local[2]
beside `kraftpy dump-log --json`, every column materialised (`.write.format("noop")`).

"Per core" means records per CPU second. Spark's CPU is that of its whole process tree (the
JVM, which in local mode is also the executor, and its Python workers), the decoder's is that of
the dump-log process: records per CPU second is what one core of a cluster would deliver. By
wall, local[1] (one task slot, in which the JVM and a Python worker still run side by side) is
set against the single-process dump-log.

The machine may be shared, so each round runs dump-log once and then a local[1] and a local[2]
session, in turns first (each: a warm-up pass on other data of the same mix and an untimed pass
on the data, since the JIT's optimising tier needs about a million rows to settle, then `passes`
timed passes, the best kept). Ratios are taken within a round; the median and the best over
rounds are printed. `conf` adds Spark settings to both sessions (e.g. to measure one setting's
worth: `spark.python.unix.domain.socket.enabled=false`).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

Timing = tuple[float, float]  # wall seconds, CPU seconds

MASTERS = {"local[1]": "Spark kraft-metadata source, local[1]",
           "local[2]": "Spark kraft-metadata source, local[2]"}

SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    from kraftpy.tools.spark.session import local_session
    from kraftpy.tools.spark.jobs import read_records

    TICK = os.sysconf("SC_CLK_TCK")

    def tree_cpu(root):
        # CPU seconds of this process and every descendant, from /proc, with the children they
        # have reaped (short-lived planning workers); also the JVM's own share.
        parent, cpu, java = {}, {}, set()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
                exe = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\\0")[0]
            except OSError:
                continue
            parent[int(pid)] = int(fields[1])
            cpu[int(pid)] = sum(map(int, fields[11:15])) / TICK
            if exe.endswith(b"java"):
                java.add(int(pid))
        def under(pid):
            while pid in parent:
                if pid == root:
                    return True
                pid = parent[pid]
            return False
        mine = [pid for pid in cpu if under(pid)]
        return sum(cpu[p] for p in mine), sum(cpu[p] for p in mine if p in java)

    master, data, warm, passes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    spark = local_session(master, extra={"spark.sql.shuffle.partitions": "2",
                                         **json.loads(sys.argv[5])})
    for path in (warm, data):
        read_records(spark, [path]).write.format("noop").mode("overwrite").save()
    for _ in range(passes):
        (cpu, jvm), start = tree_cpu(os.getpid()), time.perf_counter()
        read_records(spark, [data]).write.format("noop").mode("overwrite").save()
        seconds = time.perf_counter() - start
        cpu2, jvm2 = tree_cpu(os.getpid())
        print(json.dumps({"seconds": seconds, "cpu": cpu2 - cpu, "jvm": jvm2 - jvm}), flush=True)
    spark.stop()
""")


def warm_up_data(mix: str, segment_bytes: int) -> Path:
    """Other data of the same mix, for the JIT and the Python workers before timing."""
    warm = Path(f"/tmp/kraftpy-bench-decode-warmup-{mix}")
    if not warm.exists():
        from support.metadata_logs import realistic_cluster, synthetic_cluster

        make = realistic_cluster if mix == "realistic" else synthetic_cluster
        make(warm / "cluster=w" / "__cluster_metadata-0", records=100_000, seed=99,
             segment_bytes=segment_bytes)
    return warm


def session_passes(master: str, directory: Path, warm: Path, passes: int,
                   conf: dict[str, str]) -> list[dict]:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, master, str(directory), str(warm),
                           str(passes), json.dumps(conf)], capture_output=True, text=True,
                          check=False)
    timed = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if len(timed) != passes:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"Spark {master} run failed")
    return timed


@dataclass
class SparkRuns:
    records: int
    dump_log: list[Timing] = field(default_factory=list)  # one per round, beside the sessions
    best: dict[str, list[Timing]] = field(default_factory=dict)  # per master, one per round
    jvm_share: list[float] = field(default_factory=list)  # local[1]'s JVM part of its CPU

    def table_rows(self) -> dict[str, list[Timing]]:
        return {MASTERS[m]: timings for m, timings in self.best.items()}

    def report(self) -> None:
        l1, l2 = self.best["local[1]"], self.best["local[2]"]
        by_cpu = [d[1] / s[1] for d, s in zip(self.dump_log, l1, strict=True)]
        by_wall = [d[0] / s[0] for d, s in zip(self.dump_log, l1, strict=True)]
        scaling = [a[0] / b[0] for a, b in zip(l1, l2, strict=True)]
        busy = [s[1] / s[0] for s in l1]
        busy2 = [s[1] / s[0] for s in l2]
        n = len(l1)

        def show(ratios: list[float]) -> str:
            each = " ".join(f"{r:.2f}" for r in ratios)
            return f"{statistics.median(ratios):.2f}x (best {max(ratios):.2f}x; rounds {each})"

        print(f"Spark vs dump-log, ratios within each of {n} rounds, median (best):")
        print(f"  per core, records per CPU s of the whole Spark process tree against dump-log's "
              f"(target >= 0.8x): {show(by_cpu)}; the JVM is "
              f"{statistics.median(self.jvm_share):.0%} of Spark's CPU, the Python workers the rest")
        print(f"  local[1] by wall against dump-log: {show(by_wall)}; local[1] keeps "
              f"{statistics.median(busy):.2f} cores busy (the JVM takes in one Arrow batch while the "
              f"worker decodes the next)")
        print(f"  local[2] / local[1] by wall (target >= 1.7x): {show(scaling)}; two cores allow "
              f"at most {2 / statistics.median(busy):.2f}x (local[2] keeps "
              f"{statistics.median(busy2):.2f} cores busy); load average now "
              f"{os.getloadavg()[0]:.2f}")


def run(directory: Path, mix: str, records: int, *, rounds: int, passes: int,
        segment_bytes: int, dump_log: Callable[[Path], Timing],
        conf: dict[str, str] | None = None) -> SparkRuns:
    warm = warm_up_data(mix, segment_bytes)
    result = SparkRuns(records)
    for round_no in range(rounds):
        result.dump_log.append(dump_log(directory))
        order = list(MASTERS) if round_no % 2 == 0 else list(reversed(MASTERS))
        for master in order:  # in turns first, so a drift in the host's load hits both
            timed = session_passes(master, directory, warm, passes, conf or {})
            best = (min(t["seconds"] for t in timed), min(t["cpu"] for t in timed))
            result.best.setdefault(master, []).append(best)
            if master == "local[1]":
                leanest = min(timed, key=lambda t: t["cpu"])
                result.jvm_share.append(leanest["jvm"] / leanest["cpu"])
    return result
