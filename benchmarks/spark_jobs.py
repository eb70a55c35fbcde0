"""Spark jobs over the `kraft-metadata` source with the JVM options of `local_session`
(`LOCAL_JAVA_OPTIONS`) beside the same jobs with the JVM's defaults, in one run:

- `count()` (Spark reads only what the count needs, but the source still yields every row);
- `.write.format("noop")` (every column materialised, as benchmarks/decode.py does);
- the pipeline's `records` table as Parquet (zstd), and the whole pipeline (three tables).

    python3 benchmarks/spark_jobs.py                       # the realistic 20 MB set of decode.py
    python3 benchmarks/spark_jobs.py --data DIR --rounds 3

Sessions alternate (ours, defaults, ours, ...) with a warm-up on other data; per job the best
CPU seconds of the whole Spark process tree over the rounds, and the wall seconds, are printed.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import decode  # noqa: E402 - beside this file
import decode_spark  # noqa: E402

SCRIPT = textwrap.dedent("""
    import json, os, shutil, sys, tempfile, time
    from kraftpy.tools.spark import jobs
    from kraftpy.tools.spark.session import local_session

    tree_cpu = TREE_CPU
    data, warm, java = sys.argv[1], sys.argv[2], sys.argv[3]
    extra = {"spark.sql.shuffle.partitions": "2"}
    if java:
        extra["spark.driver.extraJavaOptions"] = java
    spark = local_session("local[1]", extra=extra)
    out = tempfile.mkdtemp(prefix="kraftpy-bench-jobs-")
    runs = {
        "count()": lambda p: jobs.read_records(spark, [p]).count(),
        "write noop": lambda p: jobs.read_records(spark, [p]).write.format("noop")
            .mode("overwrite").save(),
        "records as Parquet": lambda p: jobs.run(spark, [p], out, tables=["records"]),
        "pipeline (3 tables)": lambda p: jobs.run(spark, [p], out),
    }
    for fn in runs.values():
        fn(warm)
    for name, fn in runs.items():
        (cpu, _), start = tree_cpu(os.getpid()), time.perf_counter()
        fn(data)
        seconds = time.perf_counter() - start
        print(json.dumps({"job": name, "seconds": seconds,
                          "cpu": tree_cpu(os.getpid())[0] - cpu}), flush=True)
    spark.stop()
    shutil.rmtree(out, ignore_errors=True)
""")


def tree_cpu_source() -> str:
    """`tree_cpu` from decode_spark's session script, reused as is."""
    body = decode_spark.SCRIPT
    start = body.index("TICK = ")
    end = body.index("master, data, warm")
    return body[start:end]


def session(data: Path, warm: Path, java: str) -> dict[str, tuple[float, float]]:
    script = SCRIPT.replace("tree_cpu = TREE_CPU\n", tree_cpu_source())
    proc = subprocess.run([sys.executable, "-c", script, str(data), str(warm), java],
                          capture_output=True, text=True, check=False)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    if not rows:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit("Spark session failed")
    return {r["job"]: (r["seconds"], r["cpu"]) for r in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=None,
                        help="log directory (default: decode.py's realistic 20 MB set)")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    data = args.data or Path("/tmp/kraftpy-bench-decode-realistic-20mb")
    if args.data is None:
        decode.generate(data, 20, "realistic")
    warm = decode_spark.warm_up_data("realistic", decode.SEGMENT_BYTES)
    # an empty value keeps local_session's own options; any other replaces them
    sides = {"LOCAL_JAVA_OPTIONS": "", "JVM defaults": "-Dkraftpy.bench=jvm-defaults"}
    best: dict[str, dict[str, tuple[float, float]]] = {side: {} for side in sides}
    for _ in range(args.rounds):
        for side, java in sides.items():
            for job, (wall, cpu) in session(data, warm, java).items():
                old = best[side].get(job, (float("inf"), float("inf")))
                best[side][job] = (min(old[0], wall), min(old[1], cpu))
    print(f"{data}, local[1], best of {args.rounds} alternating rounds (CPU of the whole tree)")
    print(f"{'job':24} {'ours cpu s':>11} {'defaults cpu s':>15} {'ours wall s':>12} "
          f"{'defaults wall s':>16} {'CPU saved':>10}")
    for job, (wall, cpu) in best["LOCAL_JAVA_OPTIONS"].items():
        dwall, dcpu = best["JVM defaults"][job]
        print(f"{job:24} {cpu:11.2f} {dcpu:15.2f} {wall:12.2f} {dwall:16.2f} "
              f"{1 - cpu / dcpu:9.0%}")


if __name__ == "__main__":
    main()
