"""`kraftpy conformance`: run the wire-level conformance suite against any server."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kraftpy.tools.conformance import Target


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "conformance",
        help="check a Kafka-compatible controller's wire behaviour (Kafka 4.1 is the reference)",
    )
    p.add_argument("--bootstrap", required=True, metavar="HOST:PORT", help="client listener")
    p.add_argument("--controller", metavar="HOST:PORT", help="CONTROLLER listener")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties for a TLS or SASL client listener (security.protocol, "
                   "sasl.*, ssl.*, as for `kraftpy acls`)")
    p.add_argument("--controller-config", metavar="FILE",
                   help="the same for a TLS or SASL CONTROLLER listener")
    p.add_argument("--transaction-max-timeout-ms", type=int, default=900000)
    p.add_argument("--socket-request-max-bytes", type=int, default=104857600)
    p.add_argument("-k", "--only", metavar="TEXT", help="run only checks whose name has TEXT")
    p.add_argument("-v", "--verbose", action="store_true", help="print passing checks too")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kraftpy.tools.conformance import Target, run_checks
    from kraftpy.tools.kafka_connection import ClientError, parse_address, read_settings

    try:
        target = Target(
            client_settings=read_settings(args.command_config),
            controller_settings=read_settings(args.controller_config),
            client=parse_address(args.bootstrap),
            controller=parse_address(args.controller) if args.controller else None,
            transaction_max_timeout_ms=args.transaction_max_timeout_ms,
            socket_request_max_bytes=args.socket_request_max_bytes,
        )
    except ClientError as exc:
        print(f"kraftpy conformance: {exc}", file=sys.stderr)
        return 2
    failed = _unreachable(target)
    if failed:
        print(f"kraftpy conformance: {failed}", file=sys.stderr)
        return 2
    only = args.only
    results = run_checks(target, (lambda name: only in name) if only else (lambda _: True))
    counts = {"pass": 0, "fail": 0, "skip": 0}
    for r in results:
        counts[r.status] += 1
        if r.status != "pass" or args.verbose:
            print(f"{r.status.upper():4}  [{r.listener}] {r.name} ({r.seconds * 1000:.0f} ms)")
            if r.detail:
                print("      " + r.detail.replace("\n", "\n      "))
    print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    return 1 if counts["fail"] else 0


def _unreachable(target: Target) -> str | None:
    """Why a listener under test cannot be reached (connect, TLS or SASL), or None: one line
    for the operator instead of every check failing the same way."""
    from kraftpy.tools.kafka_connection import ClientError

    for listener in ["client"] + (["controller"] if target.controller else []):
        try:
            target.connect(listener).close()
        except ClientError as exc:
            return f"{listener} listener: {exc}"
    return None
