"""`kraftpy serve`: run the controller on a properties file or the embedded default."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import UTC, datetime

LOG_FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"


class JsonFormatter(logging.Formatter):
    """One JSON object per line, for log shippers: the text line's fields, each its own key.

    The same records as the text format, with the same message text; the time is ISO 8601
    in UTC with milliseconds, and a traceback (if any) is one more string field.
    """

    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC)
            .isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False)


def configure_logging(level: str, log_format: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json"
                         else logging.Formatter(LOG_FORMAT))
    logging.basicConfig(level=level, handlers=[handler])


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve",
        help="run the controller (Kafka wire protocol, Kafka's on-disk metadata log)",
        description="Run kraftpy. Without --config it runs on the embedded default: client "
        "listener 127.0.0.1:9092, CONTROLLER listener 127.0.0.1:9093, data in ./kraftpy-data "
        "(formatted on first start).",
    )
    p.add_argument("--config", "-c", metavar="FILE",
                   help="a Kafka-style server.properties file")
    p.add_argument("--override", metavar="KEY=VALUE", action="append", default=[],
                   help="set one property (repeatable); wins over the file")
    p.add_argument("--log-level", default="INFO",
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"], type=str.upper)
    p.add_argument("--log-format", default="text", choices=["text", "json"], type=str.lower,
                   help="text lines (default) or one JSON object per line, same events")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, args.log_format)
    import trio
    from kraftpy.controller.config import ConfigError, load_config
    from kraftpy.controller.metrics_http import metrics_address
    from kraftpy.controller.node import NodeStartError, serve_node

    try:
        config = load_config(args.config, args.override)
        metrics_address(config)  # a bad kraftpy.metrics.listener stops here, as any bad key
    except ConfigError as exc:
        print(f"kraftpy serve: bad configuration: {exc}", file=sys.stderr)
        return 2
    if args.config is None:
        logging.getLogger("kraftpy").info(
            "no --config given: running on the embedded default configuration")
    try:
        return trio.run(serve_node, config)
    except NodeStartError as exc:
        # One line; exit 2 when the data dir's log has lost records (nothing was changed).
        logging.getLogger("kraftpy").error("cannot start: %s", exc)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception:
        logging.getLogger("kraftpy").exception("stopped on an unexpected error")
        return 1
