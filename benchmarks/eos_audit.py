"""The exactly-once audit's speed, side by side in one run on the same generated data logs
(benchmarks/eos_data.py: three brokers' replicas of 24 partitions and __consumer_offsets,
idempotent and transactional producers, lz4 and zstd, aborts, snapshots; at least 1 GB):

- `kraftpy eos-audit DIR` in one process (everything: the scan, CRCs, the replay, the report);
- kafka-python's reader over the same segments, reading what the audit reads: each batch
  with its CRC checked, its producer fields and, for a marker, its record (no audit at all);
- `kraftpy pipeline eos-audit` on Spark at local[1] and local[2] (every table written as
  Parquet), and the speed-up of local[2] over local[1];
- the same job on a Spark standalone cluster of a master and two one-core workers started
  with pyspark's own `sbin/spark-daemon.sh`, whose report and tables must be local's.

    python3 benchmarks/eos_audit.py                   # 1.1 GB, generated once into /tmp
    python3 benchmarks/eos_audit.py --mb 300 --rounds 1 --no-standalone

Records per second count every replica's records (what the audit reads). The machine may be
shared: runs are interleaved for `--rounds` rounds and the best wall time of each is kept;
ratios are taken within a round. Nothing here asserts; the targets are printed beside the
numbers (local[2] >= 1.7x local[1]; the one-process audit >= kafka-python's reader).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import eos_data  # noqa: E402 - beside this file

Timing = tuple[float, float]  # wall seconds, CPU seconds

SPARK = textwrap.dedent("""
    import json, os, sys, time
    from kraftpy.tools.logdecode.eos import Settings
    from kraftpy.tools.logdecode.eos_report import render_json
    from kraftpy.tools.spark.eos_job import eos_audit, write_reports
    from kraftpy.tools.spark.session import local_session
    import io

    TICK = os.sysconf("SC_CLK_TCK")

    def tree_cpu(root):
        parent, cpu = {}, {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(pid)] = int(fields[1])
            cpu[int(pid)] = sum(map(int, fields[11:15])) / TICK
        def under(pid):
            while pid in parent:
                if pid == root:
                    return True
                pid = parent[pid]
            return False
        return sum(c for p, c in cpu.items() if under(p))

    master, data, warm, out = sys.argv[1:5]
    extra = json.loads(sys.argv[5])
    spark = local_session(master, app="kraftpy-eos-bench", extra=extra)
    eos_audit(spark, [warm], out + "-warm", settings=Settings())
    cpu, start = tree_cpu(os.getpid()), time.perf_counter()
    result = eos_audit(spark, [data], out, settings=Settings())
    seconds = time.perf_counter() - start
    cpu = tree_cpu(os.getpid()) - cpu
    write_reports(result, out)
    print(json.dumps({"seconds": seconds, "cpu": cpu}), flush=True)
    spark.stop()
""")
TABLES = ("batches", "partitions", "producers", "transactions", "findings", "producer_state",
          "topics", "producer_ids", "brokers")


def _burn(n: int) -> float:
    start, x = time.perf_counter(), 0
    for i in range(n):
        x += i * i
    return time.perf_counter() - start


def free_cores() -> float:
    """How many cores two CPU-bound processes get right now (2.0 on an idle 2-core machine):
    local[2] cannot beat local[1] by more than this."""
    import multiprocessing

    n = 10_000_000
    one = _burn(n)
    start = time.perf_counter()
    with multiprocessing.get_context("fork").Pool(2) as pool:
        pool.map(_burn, [n, n])
    return 2 * one / (time.perf_counter() - start)


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def one_process(data: Path) -> tuple[Timing, dict]:
    cpu, start = children_cpu(), time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "kraftpy.tools", "eos-audit", "--json",
                           str(data)], capture_output=True, text=True, check=False)
    timing = (time.perf_counter() - start, children_cpu() - cpu)
    if done.returncode not in (0, 1):
        raise SystemExit(f"eos-audit failed: {done.stderr[-2000:]}")
    return timing, json.loads(done.stdout)


def kafka_python(data: Path) -> tuple[Timing, int]:
    """kafka-python's reader, reading what the audit reads: every batch's header fields with
    its CRC checked, and each marker's record."""
    from kafka.record import MemoryRecords

    cpu, start, records = time.process_time(), time.perf_counter(), 0
    seen = []
    for path in eos_data.segment_files(data):
        batches = MemoryRecords(path.read_bytes())
        while (batch := batches.next_batch()) is not None:
            if not batch.validate_crc():
                raise SystemExit(f"kafka-python: a bad CRC in {path}")
            seen.append((batch.producer_id, batch.producer_epoch, batch.base_sequence,
                         batch.last_offset, batch.is_transactional, batch.records_count))
            records += batch.records_count
            if batch.is_control_batch:
                for record in batch:
                    seen.append((record.key, record.value))
        seen.clear()
    return (time.perf_counter() - start, time.process_time() - cpu), records


def spark_run(master: str, data: Path, warm: Path, out: Path,
              extra: dict[str, str]) -> Timing:
    if out.exists():
        shutil.rmtree(out)
    done = subprocess.run([sys.executable, "-c", SPARK, master, str(data), str(warm), str(out),
                           json.dumps(extra)], capture_output=True, text=True, check=False)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if not rows:
        sys.stderr.write(done.stderr[-4000:])
        raise SystemExit(f"Spark {master} failed")
    return rows[0]["seconds"], rows[0]["cpu"]


def tables_digest(out: Path) -> dict[str, str]:
    """Per table, a digest of its rows in a fixed order (file layout and row order aside)."""
    import pyarrow.parquet as pq

    digests = {}
    for table in TABLES:
        rows = sorted(json.dumps(r, sort_keys=True, default=str)
                      for r in pq.read_table(out / table).to_pylist())
        digests[table] = hashlib.sha256("\n".join(rows).encode()).hexdigest()[:16]
    return digests


def report_of(out: Path) -> dict:
    return json.loads((out / "report.json").read_text())


# --- a standalone cluster from pyspark's own scripts ------------------------------------------

class Standalone:
    """A master and two one-core workers, started and stopped with sbin/spark-daemon.sh."""

    def __init__(self, root: Path) -> None:
        import pyspark

        self.home = Path(pyspark.__file__).parent
        self.root = root
        self.port = _free_port()
        self.env = {**os.environ, "SPARK_HOME": str(self.home), "SPARK_LOG_DIR": str(root / "logs"),
                    "SPARK_PID_DIR": str(root / "pids"), "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_WORKER_DIR": str(root / "work"), "PYSPARK_PYTHON": sys.executable}
        self.master = f"spark://127.0.0.1:{self.port}"

    def _daemon(self, action: str, cls: str, instance: int, *args: str) -> None:
        subprocess.run(["bash", str(self.home / "sbin" / "spark-daemon.sh"), action, cls,
                        str(instance), *args], env=self.env, check=True, capture_output=True)

    def start(self) -> None:
        self._daemon("start", "org.apache.spark.deploy.master.Master", 1, "--host", "127.0.0.1",
                     "--port", str(self.port), "--webui-port", str(_free_port()))
        _wait_port(self.port, 60)
        for i in (1, 2):
            self._daemon("start", "org.apache.spark.deploy.worker.Worker", i, self.master,
                         "--host", "127.0.0.1", "--cores", "1", "--memory", "1500m",
                         "--webui-port", str(_free_port()))

    def stop(self) -> None:
        for i in (1, 2):
            self._daemon("stop", "org.apache.spark.deploy.worker.Worker", i)
        self._daemon("stop", "org.apache.spark.deploy.master.Master", 1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise SystemExit(f"the Spark master did not listen on {port} within {timeout} s")


# --- the run -------------------------------------------------------------------------------------

def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=1100, help="MB of segments over all replicas")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--no-standalone", action="store_true")
    args = parser.parse_args()
    data = Path(f"/tmp/kraftpy-bench-eos-{args.mb}mb")
    warm = Path("/tmp/kraftpy-bench-eos-warm")
    started = time.perf_counter()
    counts = eos_data.generate(data, args.mb)
    eos_data.generate(warm, 30, seed=3)
    print(f"{data}: {counts['bytes'] / 1e9:.2f} GB of segments, {counts['batches']:,} batches, "
          f"{counts['records']:,} records over 3 replicas (ready in "
          f"{time.perf_counter() - started:.0f} s)")
    work = Path(tempfile.mkdtemp(prefix="kraftpy-bench-eos-"))
    cores = [free_cores()]
    local = {"spark.driver.memory": "2g"}
    timings: dict[str, list[Timing]] = {}
    reports: dict[str, dict] = {}
    records = 0
    for round_no in range(args.rounds):
        order = ["one", "kafka-python", "local[1]", "local[2]"]
        if round_no % 2:
            order = order[::-1]
        for side in order:
            if side == "one":
                timing, reports["one"] = one_process(data)
                records = reports["one"]["totals"]["records"]
            elif side == "kafka-python":
                timing, read = kafka_python(data)
            elif not args.no_spark:
                out = work / side.replace("[", "").replace("]", "")
                timing = spark_run(side, data, warm, out, local)
                reports[side] = report_of(out)
            else:
                continue
            timings.setdefault(side, []).append(timing)
        cores.append(free_cores())
    standalone: Timing | None = None
    if not args.no_spark and not args.no_standalone:
        cluster = Standalone(work / "standalone")
        cluster.start()
        try:
            from kraftpy.tools.spark.session import LOCAL_JAVA_OPTIONS

            standalone = spark_run(cluster.master, data, warm, work / "standalone-out",
                                   {"spark.executor.memory": "1200m", "spark.cores.max": "2",
                                    "spark.executor.extraJavaOptions": LOCAL_JAVA_OPTIONS})
        finally:
            cluster.stop()
        reports["standalone"] = report_of(work / "standalone-out")
    _print(timings, records, read, standalone, args.rounds)
    print(f"free cores (two CPU-bound processes' share of the machine) before and after each "
          f"round: {' '.join(f'{c:.2f}' for c in cores)}")
    if not args.no_spark:
        _identical(work, reports, standalone is not None)
    shutil.rmtree(work, ignore_errors=True)


def _print(timings: dict[str, list[Timing]], records: int, read: int,
           standalone: Timing | None, rounds: int) -> None:
    names = {"one": "kraftpy eos-audit, one process",
             "kafka-python": "kafka-python's reader (no audit)",
             "local[1]": "kraftpy pipeline eos-audit, Spark local[1]",
             "local[2]": "kraftpy pipeline eos-audit, Spark local[2]"}
    print(f"best of {rounds} interleaved rounds; records/s of wall time (per CPU s); load "
          f"average now {os.getloadavg()[0]:.2f}")
    for side, name in names.items():
        if side in timings:
            wall = min(t[0] for t in timings[side])
            cpu = min(t[1] for t in timings[side])
            print(f"  {name:46} {records / wall:>12,.0f} ({records / cpu:>10,.0f})  "
                  f"{wall:6.2f} s")
    if standalone is not None:
        print(f"  {'... on a standalone master + 2 workers':46} "
              f"{records / standalone[0]:>12,.0f}              {standalone[0]:6.2f} s")
    assert read == records, (read, records)
    one = [t[0] for t in timings["one"]]
    peer = [t[0] for t in timings["kafka-python"]]
    ratios = [p / o for o, p in zip(one, peer, strict=True)]
    print(f"one process vs kafka-python's reader by wall (target >= 1.0x): "
          f"{max(ratios):.2f}x (rounds {' '.join(f'{r:.2f}' for r in ratios)})")
    if "local[2]" in timings:
        scaling = [a[0] / b[0] for a, b in zip(timings["local[1]"], timings["local[2]"],
                                                  strict=True)]
        print(f"Spark local[2] / local[1] by wall (target >= 1.7x): {max(scaling):.2f}x "
              f"(rounds {' '.join(f'{r:.2f}' for r in scaling)})")


def _identical(work: Path, reports: dict[str, dict], standalone: bool) -> None:
    base = reports["local[1]"]
    for side, report in reports.items():
        same = report == base
        print(f"report of {side}: {'identical to local[1]' if same else 'DIFFERENT'}")
    digests = {side: tables_digest(work / side) for side in ("local1", "local2")}
    if standalone:
        digests["standalone-out"] = tables_digest(work / "standalone-out")
    for side, d in digests.items():
        print(f"tables of {side}: "
              f"{'identical to local[1]' if d == digests['local1'] else f'DIFFERENT {d}'}")


if __name__ == "__main__":
    main()
