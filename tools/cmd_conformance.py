"""`kraftpy conformance`: run the wire-level conformance suites against any server.

`--bootstrap` (and `--controller`) run the controller suite; `--broker` runs the broker suite
(exactly-once: KIP-98, KIP-360, KIP-447, KIP-890); both may be given in one run.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kraftpy.tools.conformance import Target
    from kraftpy.tools.conformance.broker import BrokerTarget


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "conformance",
        help="check a Kafka-compatible controller's or broker's wire behaviour (Kafka 4.1 is "
        "the reference)",
    )
    p.add_argument("--bootstrap", metavar="HOST:PORT",
                   help="client listener of a controller: runs the controller suite")
    p.add_argument("--controller", metavar="HOST:PORT", help="CONTROLLER listener")
    p.add_argument("--broker", metavar="HOST:PORT[,HOST:PORT...]",
                   help="bootstrap brokers of a cluster: runs the broker suite (exactly-once: "
                   "idempotence, KIP-360, transactions, KIP-447)")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties for a TLS or SASL client listener (security.protocol, "
                   "sasl.*, ssl.*, as for `kraftpy acls`); used for --bootstrap and --broker")
    p.add_argument("--controller-config", metavar="FILE",
                   help="the same for a TLS or SASL CONTROLLER listener")
    p.add_argument("--transaction-max-timeout-ms", type=int, default=900000)
    p.add_argument("--socket-request-max-bytes", type=int, default=104857600)
    p.add_argument("--check-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="broker suite: the most one check may take, cleanup included")
    p.add_argument("-k", "--only", metavar="TEXT",
                   help="run only checks whose name (broker suite: name, KIP or rule) has TEXT")
    p.add_argument("-v", "--verbose", action="store_true", help="print passing checks too")
    p.add_argument("--json", action="store_true",
                   help="print the results as one JSON document (for CI)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kraftpy.tools.conformance import Target
    from kraftpy.tools.conformance.broker import BrokerTarget
    from kraftpy.tools.kafka_connection import ClientError, parse_address, read_settings

    if args.controller and not args.bootstrap:
        print("kraftpy conformance: --controller needs --bootstrap", file=sys.stderr)
        return 2
    if not args.bootstrap and not args.broker:
        print("kraftpy conformance: give --bootstrap (a controller) or --broker (a cluster's "
              "brokers), or both", file=sys.stderr)
        return 2
    if args.check_timeout <= 0:
        print("kraftpy conformance: --check-timeout must be positive", file=sys.stderr)
        return 2
    target = broker = None
    try:
        client_settings = read_settings(args.command_config)
        if args.bootstrap:
            target = Target(
                client_settings=client_settings,
                controller_settings=read_settings(args.controller_config),
                client=parse_address(args.bootstrap),
                controller=parse_address(args.controller) if args.controller else None,
                transaction_max_timeout_ms=args.transaction_max_timeout_ms,
                socket_request_max_bytes=args.socket_request_max_bytes,
            )
        if args.broker:
            broker = BrokerTarget(
                bootstrap=[parse_address(a) for a in args.broker.split(",") if a.strip()],
                settings=client_settings, check_timeout=args.check_timeout)
    except ClientError as exc:
        print(f"kraftpy conformance: {exc}", file=sys.stderr)
        return 2
    failed = (_unreachable(target) if target else None) or (
        _broker_unreachable(broker) if broker else None)
    if failed:
        print(f"kraftpy conformance: {failed}", file=sys.stderr)
        return 2
    only = args.only
    report: dict[str, Any] = {}
    failures = 0
    if target is not None:
        failures += _controller_suite(target, only, args, report)
    if broker is not None:
        failures += _broker_suite(broker, only, args, report)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
    return 1 if failures else 0


def _controller_suite(target: Target, only: str | None, args: argparse.Namespace,
                      report: dict[str, Any]) -> int:
    from kraftpy.tools.conformance import run_checks

    results = run_checks(target, (lambda name: only in name) if only else (lambda _: True))
    counts = {"pass": 0, "fail": 0, "skip": 0}
    for r in results:
        counts[r.status] += 1
        if not args.json and (r.status != "pass" or args.verbose):
            print(f"{r.status.upper():4}  [{r.listener}] {r.name} ({r.seconds * 1000:.0f} ms)")
            if r.detail:
                print("      " + r.detail.replace("\n", "\n      "))
    if not args.json:
        print(f"{counts['pass']} passed, {counts['fail']} failed, {counts['skip']} skipped")
    report["controller"] = {
        "bootstrap": args.bootstrap, "controller": args.controller, **counts,
        "results": [{"check": r.name, "listener": r.listener, "status": r.status,
                     "detail": r.detail, "seconds": round(r.seconds, 3)} for r in results]}
    return counts["fail"]


def _broker_suite(broker: BrokerTarget, only: str | None, args: argparse.Namespace,
                  report: dict[str, Any]) -> int:
    from kraftpy.tools.conformance.broker_suite import run_broker_checks

    results = run_broker_checks(broker, lambda c: not only or any(
        only in text for text in (c.slug, c.kip, c.rule)))
    counts = {"pass": 0, "fail": 0}
    for r in results:
        counts[r.status] += 1
        if not args.json and (r.status != "pass" or args.verbose):
            print(f"{r.status.upper():4}  {r.kip:8} {r.check}: {r.rule} "
                  f"({r.seconds * 1000:.0f} ms)")
            if r.status != "pass":
                print("      " + r.detail.replace("\n", "\n      "))
            for problem in r.cleanup:
                print(f"      cleanup: {problem}")
    if not args.json:
        print(f"broker suite: {counts['pass']} passed, {counts['fail']} failed "
              f"(run {broker.run_id})")
    report["broker"] = {"bootstrap": args.broker, "run_id": broker.run_id, **counts,
                        "results": [r.to_json() for r in results]}
    return counts["fail"]


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


def _broker_unreachable(broker: BrokerTarget) -> str | None:
    """None if a bootstrap broker answers ApiVersions; else why none does."""
    from kraftpy.protocol.errors import DecodeError
    from kraftpy.tools.kafka_connection import ClientError, KafkaConnection

    reasons = []
    for address in broker.bootstrap:
        try:
            with KafkaConnection(address, broker.settings, timeout=broker.timeout) as conn:
                conn.api_versions()
            return None
        except ClientError as exc:
            reasons.append(str(exc))
        except DecodeError as exc:
            reasons.append(f"{address[0]}:{address[1]} does not answer ApiVersions as Kafka "
                           f"does: {exc}")
    return "broker: " + ("; ".join(reasons) or "no address given")
