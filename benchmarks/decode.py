"""Decode speed, side by side in one run on the same generated metadata log segments:

- `kraftpy dump-log --json DIR > /dev/null` (records and their metadata payloads, as JSON);
- kafka-python's record reader (batches and records only, no metadata decoding);
- a bare CRC-32C pass over the same bytes (the limit for anything that checks CRCs);
- the Spark `kraft-metadata` source at local[1] and local[2] (every column materialised).

    python3 benchmarks/decode.py                 # 100 MB, generated once into /tmp
    python3 benchmarks/decode.py --mb 20 --no-spark

Rates are records per second of wall time; CPU seconds are shown too, since the machine may be
shared. Nothing here asserts: the numbers are for reading side by side.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

SEGMENT_BYTES = 4 << 20
CLUSTERS = 2


def generate(directory: Path, mb: int) -> int:
    from support.metadata_logs import synthetic_cluster

    marker = directory / "records.json"
    if marker.exists():
        return json.loads(marker.read_text())["records"]
    directory.mkdir(parents=True, exist_ok=True)
    total = 0
    per_cluster = mb * 1_000_000 // CLUSTERS // 36  # ~36 bytes per record in this mix
    for i in range(CLUSTERS):
        w = synthetic_cluster(directory / f"cluster=c{i}" / "__cluster_metadata-0",
                              records=per_cluster, segment_bytes=SEGMENT_BYTES, seed=i)
        total += w.records_written
    marker.write_text(json.dumps({"records": total}))
    return total


def segment_files(directory: Path) -> list[str]:
    return sorted(glob.glob(str(directory / "*" / "__cluster_metadata-*" / "*.log")))


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def bench_dump_log(directory: Path) -> tuple[float, float]:
    cpu = children_cpu()
    start = time.perf_counter()
    with open(os.devnull, "w") as devnull:
        subprocess.run([sys.executable, "-m", "kraftpy.tools", "dump-log", "--json",
                        "--no-progress", str(directory)], stdout=devnull, check=False)
    return time.perf_counter() - start, children_cpu() - cpu


def bench_kafka_python(files: list[str]) -> tuple[float, float, int]:
    from kafka.record import MemoryRecords

    cpu, start, n = time.process_time(), time.perf_counter(), 0
    for path in files:
        records = MemoryRecords(Path(path).read_bytes())
        while (batch := records.next_batch()) is not None:
            for record in batch:
                record.value  # noqa: B018 - touch it as a reader would
                n += 1
    return time.perf_counter() - start, time.process_time() - cpu, n


def bench_crc(files: list[str]) -> tuple[float, float]:
    import crc32c

    cpu, start = time.process_time(), time.perf_counter()
    for path in files:
        crc32c.crc32c(Path(path).read_bytes())
    return time.perf_counter() - start, time.process_time() - cpu


SPARK_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    from kraftpy.tools.spark.session import local_session
    from kraftpy.tools.spark.jobs import read_records

    def tree_cpu(root):
        # CPU seconds of this process and every descendant (JVM, Python workers), from /proc.
        parent, cpu = {}, {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(pid)] = int(fields[1])
            cpu[int(pid)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        def under(pid):
            while pid in parent:
                if pid == root:
                    return True
                pid = parent[pid]
            return False
        return sum(c for pid, c in cpu.items() if under(pid))

    master, data, warm = sys.argv[1], sys.argv[2], sys.argv[3]
    spark = local_session(master, extra={"spark.sql.shuffle.partitions": "2"})
    read_records(spark, [warm]).write.format("noop").mode("overwrite").save()
    cpu, start = tree_cpu(os.getpid()), time.perf_counter()
    read_records(spark, [data]).write.format("noop").mode("overwrite").save()
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "cpu": tree_cpu(os.getpid()) - cpu}))
    spark.stop()
""")


def bench_spark(master: str, directory: Path, warm: Path) -> tuple[float, float] | None:
    proc = subprocess.run([sys.executable, "-c", SPARK_SCRIPT, master, str(directory), str(warm)],
                          capture_output=True, text=True, check=False)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("{"):
            result = json.loads(line)
            return result["seconds"], result["cpu"]
    sys.stderr.write(proc.stderr[-2000:])
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=100, help="size of the generated segments")
    parser.add_argument("--data", type=Path, default=None, help="where to generate (cached)")
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark runs")
    args = parser.parse_args()
    directory = args.data or Path(f"/tmp/kraftpy-bench-decode-{args.mb}mb")
    t = time.perf_counter()
    records = generate(directory, args.mb)
    files = segment_files(directory)
    size = sum(os.path.getsize(f) for f in files)
    print(f"data: {directory} {len(files)} segments, {size / 1e6:.1f} MB, {records} records "
          f"(ready in {time.perf_counter() - t:.1f} s); load average {os.getloadavg()[0]:.2f}, "
          f"{os.cpu_count()} cpus")

    rows: list[tuple[str, float, float | None]] = []
    wall, cpu = bench_dump_log(directory)
    rows.append(("kraftpy dump-log --json > /dev/null", wall, cpu))
    wall, cpu, n = bench_kafka_python(files)
    assert n == records, (n, records)
    rows.append(("kafka-python record reader (no payloads)", wall, cpu))
    wall, cpu = bench_crc(files)
    rows.append(("bare CRC-32C pass (the limit)", wall, cpu))
    if not args.no_spark:
        warm = directory.parent / (directory.name + "-warmup")
        if not warm.exists():
            from support.metadata_logs import synthetic_cluster

            synthetic_cluster(warm / "cluster=w" / "__cluster_metadata-0", records=2000)
        for master in ("local[1]", "local[2]"):
            timed = bench_spark(master, directory, warm)
            if timed is not None:
                rows.append((f"Spark kraft-metadata source, {master}", *timed))

    ours_wall, ours_cpu = records / rows[0][1], records / rows[0][2]
    print(f"{'method':44} {'wall s':>7} {'cpu s':>7} {'records/s':>11} {'rec/cpu-s':>11} "
          f"{'vs dump-log (cpu)':>17}")
    for name, wall, cpu in rows:
        per_cpu = records / cpu if cpu else float("inf")
        print(f"{name:44} {wall:7.2f} {cpu:7.2f} {records / wall:11,.0f} {per_cpu:11,.0f} "
              f"{per_cpu / ours_cpu:16.2f}x")
    spark = {name: (wall, cpu) for name, wall, cpu in rows if name.startswith("Spark")}
    if len(spark) == 2:
        (w1, c1), (w2, c2) = spark.values()
        print(f"Spark local[1] per core (records per CPU second) vs dump-log: "
              f"{(records / c1) / ours_cpu:.2f}x; local[2] / local[1] by wall time: {w1 / w2:.2f}x "
              f"(meaningful only when two cores are free: load average now "
              f"{os.getloadavg()[0]:.2f})")
    del ours_wall


if __name__ == "__main__":
    main()
