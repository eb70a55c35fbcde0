"""`kraftpy pid-audit PATH...`: arguments; the work is in `kraftpy.tools.pid_audit`."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "pid-audit",
        help="list every producer-ID block granted, flag gaps and overlaps",
        description="Every producer-ID block granted in the metadata logs under PATH, in log "
        "order, with the broker, its epoch and the registration that epoch belonged to. Gaps "
        "and overlaps are findings. Exit status 1 when an overlap (an id granted twice) is "
        "found.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="log directories or files")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", dest="fmt", action="store_const", const="json",
                     help="one JSON document with blocks and findings")
    fmt.add_argument("--csv", dest="fmt", action="store_const", const="csv",
                     help="the blocks as CSV")
    p.add_argument("--cluster", default="", help="cluster name for paths that do not show one")
    p.add_argument("--block-size", type=int, default=1000,
                   help="ids per block (Kafka's PRODUCER_ID_BLOCK_SIZE, 1000)")
    p.set_defaults(func=run, fmt="text")


def run(args: argparse.Namespace) -> int:
    from kraftpy.tools import pid_audit  # decoding modules load only when used

    if args.block_size <= 0:
        raise SystemExit("kraftpy pid-audit: --block-size must be positive")
    return pid_audit.main(args.paths, fmt=args.fmt, cluster=args.cluster,
                          block_size=args.block_size)
