"""`kraftpy storage`: format a data dir, or print a new cluster id, like `kafka-storage.sh`.

    kraftpy storage format --config server.properties [--cluster-id ID] [--feature NAME=LEVEL]
    kraftpy storage random-uuid

`format` writes `meta.properties` and `bootstrap.checkpoint` into `metadata.log.dir`; a
formatted dir is left alone only with `--ignore-formatted` (exit 0), otherwise it is an error.
"""

from __future__ import annotations

import argparse
import sys
import time


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "storage",
        help="format the metadata log dir, or make a cluster id (kafka-storage.sh)",
        description="Prepare kraftpy's data dir the way kafka-storage.sh does.",
    )
    sub = p.add_subparsers(dest="storage_command", required=True)
    fmt = sub.add_parser("format", help="write meta.properties and bootstrap.checkpoint")
    fmt.add_argument(
        "--config",
        "-c",
        metavar="FILE",
        required=True,
        help="the server.properties the node will run with",
    )
    fmt.add_argument(
        "--cluster-id",
        "-t",
        metavar="ID",
        help="the cluster id (22 base64url chars); a new one when omitted",
    )
    fmt.add_argument(
        "--feature",
        "-f",
        metavar="NAME=LEVEL",
        action="append",
        default=[],
        help="a finalized feature level to bootstrap (repeatable), e.g. "
        "metadata.version=27 or transaction.version=2",
    )
    fmt.add_argument(
        "--ignore-formatted",
        "-g",
        action="store_true",
        help="succeed without changes if the dir is already formatted",
    )
    fmt.set_defaults(func=run_format)
    rnd = sub.add_parser("random-uuid", help="print a new cluster id")
    rnd.set_defaults(func=run_random_uuid)


def _features(items: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        name, sep, level = item.partition("=")
        if not sep or not name.strip() or not level.strip().lstrip("-").isdigit():
            raise ValueError(f"--feature expects NAME=LEVEL, got {item!r}")
        out[name.strip()] = int(level)
    return out


def run_format(args: argparse.Namespace) -> int:
    from kraftpy.controller.config import ConfigError, load_config
    from kraftpy.controller.log.files import LogDirError
    from kraftpy.controller.log.storage import format_storage, random_uuid
    from kraftpy.controller.settings import MV_4_1_IV1

    try:
        config = load_config(args.config)
        features = _features(args.feature)
    except (ConfigError, ValueError) as exc:
        print(f"kraftpy storage format: {exc}", file=sys.stderr)
        return 2
    metadata_version = features.pop("metadata.version", MV_4_1_IV1)
    cluster_id = args.cluster_id or random_uuid()
    log_dir = config.metadata_log_dir
    try:
        done = format_storage(
            log_dir,
            cluster_id=cluster_id,
            node_id=config.node_id,
            metadata_version=metadata_version,
            features=features,
            now_ms=time.time_ns() // 1_000_000,
            ignore_formatted=args.ignore_formatted,
        )
    except (LogDirError, OSError) as exc:
        print(f"kraftpy storage format: {exc}", file=sys.stderr)
        return 1
    if not done:
        print(f"{log_dir} is already formatted; left unchanged.")
        return 0
    extra = "".join(f", {n}={lvl}" for n, lvl in sorted(features.items()))
    print(
        f"Formatted {log_dir} for cluster {cluster_id} (node {config.node_id}, "
        f"metadata.version={metadata_version}{extra})."
    )
    return 0


def run_random_uuid(args: argparse.Namespace) -> int:
    from kraftpy.controller.log.storage import random_uuid

    print(random_uuid())
    return 0
