"""`kraftpy storage`: format a data dir, or print a new cluster id, like `kafka-storage.sh`.

    kraftpy storage format --config server.properties [--cluster-id ID]
        [--release-version 4.1] [--feature NAME=LEVEL ...] [--ignore-formatted]
    kraftpy storage random-uuid

`format` writes `meta.properties` and `bootstrap.checkpoint` into `metadata.log.dir`, with the
feature levels Kafka 4.1's `kafka-storage format` finalizes: `--release-version` (default
4.1-IV1) sets metadata.version and the default of every other feature, `--feature` overrides
one; unknown features, unstable levels and unmet dependencies are refused with Kafka's
messages (exit 1) before anything is written. A formatted dir is left alone only with
`--ignore-formatted` (exit 0), otherwise it is an error.
"""

from __future__ import annotations

import argparse
import re
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
        "transaction.version=0 or metadata.version=27",
    )
    fmt.add_argument(
        "--release-version",
        "-r",
        metavar="VERSION",
        help="the release whose feature levels to bootstrap, e.g. 3.9 or 4.0-IV1; the minimum "
        "is 3.3-IV3, the default 4.1-IV1",
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
    """`--feature` values, parsed as Kafka's StorageTool.parseNameAndLevel (a short level)."""
    out: dict[str, int] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"Can't parse feature=level string {item}: equals sign not found.")
        text = text.strip()
        level = int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else None
        if level is None or not -32768 <= level <= 32767:
            raise ValueError(f"Can't parse feature=level string {item}: unable to parse "
                             f"{text} as a short.")
        out[name.strip()] = level
    return out


def run_format(args: argparse.Namespace) -> int:
    from kraftpy.controller.config import ConfigError, load_config
    from kraftpy.controller.feature_control import (
        METADATA_VERSION,
        format_levels,
        metadata_version_name,
    )
    from kraftpy.controller.log.files import LogDirError
    from kraftpy.controller.log.storage import format_storage, random_uuid

    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"kraftpy storage format: {exc}", file=sys.stderr)
        return 2
    try:
        features = format_levels(args.release_version, _features(args.feature))
    except ValueError as exc:  # Kafka's words, and Kafka's exit status
        print(exc, file=sys.stderr)
        return 1
    metadata_version = features.pop(METADATA_VERSION)
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
    levels = ", ".join(f"{n}={lvl}" for n, lvl in sorted(features.items()) if lvl)
    print(f"Formatting metadata directory {log_dir} with metadata.version "
          f"{metadata_version_name(metadata_version)}.")
    print(f"Cluster {cluster_id}, node {config.node_id}; finalized: "
          f"metadata.version={metadata_version}{', ' + levels if levels else ''}.")
    return 0


def run_random_uuid(args: argparse.Namespace) -> int:
    from kraftpy.controller.log.storage import random_uuid

    print(random_uuid())
    return 0
