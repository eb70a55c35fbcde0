"""Entry point of the pipeline, for `kraftpy pipeline run` and for `spark-submit`:

    spark-submit --master spark://host:7077 $(python3 -c 'import kraftpy.tools.spark.job as j;
        print(j.__file__)') --input /logs --output /tables

Without `--master`, a process started by spark-submit (or the pyspark shell) takes the
launcher's session; anything else starts an embedded `local[*]` session, so the job runs on one
machine with nothing to set up.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence

TABLES = ("records", "producer_id_blocks", "broker_registrations")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--input", "-i", nargs="+", required=True, metavar="PATH",
                   help="log directories or files (globs allowed); walked recursively")
    p.add_argument("--output", "-o", required=True, help="directory for the Parquet tables")
    p.add_argument("--tables", default=",".join(TABLES),
                   help=f"comma-separated subset of {','.join(TABLES)}")
    p.add_argument("--master", default=None,
                   help="Spark master (default local[*], or the launcher's under spark-submit)")
    p.add_argument("--cluster", default="", help="cluster name for inputs whose path shows none")
    p.add_argument("--block-size", type=int, default=1000, help="ids per producer-ID block")


def run(args: argparse.Namespace) -> int:
    tables = [t.strip() for t in args.tables.split(",") if t.strip()]
    unknown = [t for t in tables if t not in TABLES]
    if unknown:
        sys.stderr.write(f"kraftpy pipeline: unknown table(s) {', '.join(unknown)}; "
                         f"known: {', '.join(TABLES)}\n")
        return 2
    missing = [p for p in args.input if not any(c in p for c in "*?[") and not os.path.exists(p)]
    if missing:
        sys.stderr.write(f"kraftpy pipeline: no such input: {', '.join(missing)}\n")
        return 2
    try:
        from kraftpy.tools.spark import jobs
        from kraftpy.tools.spark.session import local_session, register
    except ImportError as e:
        sys.stderr.write(f"kraftpy pipeline needs the spark extra (pip install 'kraftpy[spark]'): {e}\n")
        return 2
    if args.master is None and os.environ.get("PYSPARK_GATEWAY_PORT"):
        from pyspark.sql import SparkSession

        spark = register(SparkSession.builder.getOrCreate())
        owned = False
    else:
        spark = local_session(args.master or "local[*]", app="kraftpy-pipeline")
        owned = True
    try:
        summary = jobs.run(spark, args.input, args.output, tables=tables, cluster=args.cluster,
                           block_size=args.block_size)
    finally:
        if owned:
            spark.stop()
    print(json.dumps(summary, sort_keys=True))
    if summary.get("overlaps"):
        sys.stderr.write(f"kraftpy pipeline: {summary['overlaps']} overlapping producer-ID "
                         "block(s); see producer_id_blocks where finding contains 'overlap'\n")
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kraftpy-pipeline", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
