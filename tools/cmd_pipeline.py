"""`kraftpy pipeline run`: the Spark pipeline (needs the `kraftpy[spark]` extra and Java)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "pipeline",
        help="Spark jobs: decode metadata logs into Parquet tables",
        description="Spark jobs over metadata logs. Runs on an embedded local[*] Spark by "
        "default; --master (or spark-submit of kraftpy/tools/spark/job.py) runs the same job "
        "on a cluster.",
    )
    jobs = p.add_subparsers(dest="job", required=True)
    run = jobs.add_parser("run", help="write the tables records, producer_id_blocks and "
                          "broker_registrations as Parquet")
    from kraftpy.tools.spark.job import add_arguments

    add_arguments(run)
    run.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from kraftpy.tools.spark.job import run

    return run(args)
