"""`kraftpy pipeline run` and `kraftpy pipeline eos-audit`: the Spark jobs (need the
`kraftpy[spark]` extra and Java)."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "pipeline",
        help="Spark jobs: metadata logs into Parquet tables; the exactly-once audit of data logs",
        description="Spark jobs over Kafka logs. Each runs on an embedded local[*] Spark by "
        "default; --master (or spark-submit of kraftpy/tools/spark/job.py or eos_job.py) runs "
        "the same job on a cluster.",
    )
    jobs = p.add_subparsers(dest="job", required=True)
    run = jobs.add_parser("run", help="write the tables records, producer_id_blocks and "
                          "broker_registrations as Parquet")
    from kraftpy.tools.spark.job import add_arguments

    add_arguments(run)
    run.set_defaults(func=_run)
    from kraftpy.tools.cmd_eos_audit import DESCRIPTION, add_pipeline_arguments

    eos = jobs.add_parser("eos-audit", help="audit exactly-once in brokers' data logs; write "
                          "the audit's Parquet tables and report", description=DESCRIPTION)
    add_pipeline_arguments(eos)
    eos.set_defaults(func=_eos)


def _run(args: argparse.Namespace) -> int:
    from kraftpy.tools.spark.job import run

    return run(args)


def _eos(args: argparse.Namespace) -> int:
    from kraftpy.tools.spark.eos_job import run

    return run(args)
