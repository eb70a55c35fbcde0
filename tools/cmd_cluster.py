"""`kraftpy cluster`: a kraftpy quorum and real Apache Kafka 4.1 brokers on this machine.

    kraftpy cluster [--controllers 3] [--brokers 3] [--dir ./kraftpy-cluster]
        [--base-port 29092] [--kafka-libs DIR] [--override KEY=VALUE] [--broker-override K=V]
    kraftpy cluster status [--dir DIR] [--json]
    kraftpy cluster stop [--dir DIR]

The first runs in the foreground until Ctrl-C (or SIGTERM, or `kraftpy cluster stop`), then
stops every node. Java is needed, and Maven the first time (Kafka's jars come from Maven
Central; see `kafka_runtime`). Exit status: 0 after a clean stop, 2 when it cannot start
(a port in use, Java or Maven missing, a cluster already running there), 1 when a node
fails to start.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

DEFAULT_DIR = "kraftpy-cluster"
DEFAULT_BASE_PORT = 29092


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "cluster",
        help="run N kraftpy controllers and M real Kafka 4.1 brokers on this machine",
        description="Start N kraftpy controllers as one KIP-853 quorum and M Apache Kafka "
        "4.1 brokers on it, print the bootstrap servers and where each node keeps its data "
        "and log, and run until Ctrl-C, which stops them all. `status` shows the quorum and "
        "the brokers of a running cluster, `stop` stops it from another terminal.",
    )
    p.add_argument("action", nargs="?", choices=["start", "status", "stop"], default="start",
                   help="start (default), status or stop")
    p.add_argument("--dir", default=DEFAULT_DIR, type=Path,
                   help=f"the cluster's directory (default ./{DEFAULT_DIR}); a cluster "
                   "started there before starts again on its data")
    p.add_argument("--controllers", type=int, default=3, metavar="N",
                   help="kraftpy controllers, the quorum's voters (default 3)")
    p.add_argument("--brokers", type=int, default=3, metavar="M",
                   help="Apache Kafka 4.1 brokers (default 3)")
    p.add_argument("--base-port", type=int, default=DEFAULT_BASE_PORT, metavar="PORT",
                   help=f"broker i listens on PORT+i, controller i on PORT+100+i (default "
                   f"{DEFAULT_BASE_PORT})")
    p.add_argument("--kafka-libs", type=Path, metavar="DIR",
                   help="where Kafka's jars are (or are copied to); default "
                   "$KRAFTPY_KAFKA_LIBS or ~/.cache/kraftpy/kafka-4.1.0/libs")
    p.add_argument("--override", metavar="KEY=VALUE", action="append", default=[],
                   help="a property for every controller (repeatable)")
    p.add_argument("--broker-override", metavar="KEY=VALUE", action="append", default=[],
                   help="a property for every broker (repeatable)")
    p.add_argument("--json", action="store_true", help="status: one JSON object")
    p.set_defaults(func=run)


def _pairs(items: list[str]) -> dict[str, str]:
    """KEY=VALUE items (ConfigError, a ValueError, for one that is not)."""
    from kraftpy.controller.config import parse_override

    return dict(parse_override(item) for item in items)


def run(args: argparse.Namespace) -> int:
    from kraftpy.tools import kafka_runtime, local_cluster
    from kraftpy.tools.local_cluster import ClusterError

    directory: Path = args.dir
    try:
        if args.action == "status":
            info = local_cluster.status(directory)
            print(json.dumps(info, indent=2) if args.json else local_cluster.format_status(info))
            return 0
        if args.action == "stop":
            print(local_cluster.stop_running(directory))
            return 0
    except ClusterError as exc:
        print(f"kraftpy cluster: {exc}", file=sys.stderr)
        return exc.exit_code
    if not 1024 <= args.base_port <= 65535 - 200:
        print(f"kraftpy cluster: --base-port {args.base_port} is not a port from 1024 to 65335",
              file=sys.stderr)
        return 2
    try:
        controller_overrides = _pairs(args.override)
        broker_overrides = _pairs(args.broker_override)
    except ValueError as exc:
        print(f"kraftpy cluster: {str(exc).replace('--override', 'an override')}",
              file=sys.stderr)
        return 2
    return local_cluster.run(
        directory, args.controllers, args.brokers, args.base_port,
        (args.kafka_libs or kafka_runtime.default_libs()).absolute(),
        controller_overrides, broker_overrides, say=lambda line: print(line, flush=True))
