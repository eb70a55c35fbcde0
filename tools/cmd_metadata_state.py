"""`kraftpy metadata-state PATH`: arguments; the work is in `kraftpy.tools.metadata_state`."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "metadata-state",
        help="the state a metadata log directory describes (brokers, features, ids, topics)",
        description="Replay the newest snapshot and the log after it with the controller's own "
        "replay, then print the image: brokers with endpoints, epochs and fencing; features; "
        "the next producer id; topics and partitions; transactional ids when a "
        "__transaction_state partition sits beside the log.",
    )
    p.add_argument("path", metavar="PATH", help="a log directory or its __cluster_metadata-0")
    p.add_argument("--json", action="store_true", help="the image as one JSON document")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kraftpy.tools import metadata_state  # loads the controller only when used

    return metadata_state.main(args.path, as_json=args.json)
