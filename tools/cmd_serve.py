"""`kraftpy serve`: run the controller on a properties file or the embedded default."""

from __future__ import annotations

import argparse
import logging
import sys

LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve",
        help="run the controller (Kafka wire protocol, Kafka's on-disk metadata log)",
        description="Run kraftpy. Without --config it runs on the embedded default: client "
        "listener 127.0.0.1:9092, CONTROLLER listener 127.0.0.1:9093, data in ./kraftpy-data "
        "(formatted on first start).",
    )
    p.add_argument("--config", metavar="FILE", help="a Kafka-style server.properties file")
    p.add_argument("--override", metavar="KEY=VALUE", action="append", default=[],
                   help="set one property (repeatable); wins over the file")
    p.add_argument("--log-level", default="INFO",
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"], type=str.upper)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=args.log_level, format=LOG_FORMAT, stream=sys.stderr)
    import trio
    from kraftpy.controller.config import ConfigError, load_config
    from kraftpy.controller.node import NodeStartError, serve_node

    try:
        config = load_config(args.config, args.override)
    except ConfigError as exc:
        print(f"kraftpy serve: bad configuration: {exc}", file=sys.stderr)
        return 2
    if args.config is None:
        logging.getLogger("kraftpy").info(
            "no --config given: running on the embedded default configuration")
    try:
        return trio.run(serve_node, config)
    except NodeStartError as exc:
        logging.getLogger("kraftpy").error("cannot start: %s", exc)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception:
        logging.getLogger("kraftpy").exception("stopped on an unexpected error")
        return 1
