"""`kraftpy broker-sim`: one simulated broker registers, is unfenced and takes producer-ID blocks."""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "broker-sim", help="register a simulated broker with a KRaft controller and take "
        "producer-ID blocks (KIP-631, KIP-730)",
        description="Speak to a controller's CONTROLLER listener as a broker would: "
        "BrokerRegistration, BrokerHeartbeat until unfenced, AllocateProducerIds; each block "
        "is printed as `block FIRST-LAST (LENGTH ids)`.")
    p.add_argument("--controller", required=True, metavar="HOST:PORT",
                   help="the controller's CONTROLLER listener")
    p.add_argument("--broker-id", required=True, type=int, metavar="N")
    p.add_argument("--blocks", type=int, default=1, metavar="K",
                   help="producer-ID blocks to take (default 1; 0 only registers)")
    p.add_argument("--cluster-id", metavar="ID",
                   help="default: the one the controller reports in DescribeCluster")
    p.add_argument("--unregister", action="store_true", help="unregister before leaving")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties for a TLS or SASL listener (as for `kraftpy acls`)")
    p.add_argument("--timeout", type=float, default=10.0,
                   help="seconds per answer and to get unfenced (default 10)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kraftpy.tools.broker_sim import BrokerError, BrokerSim
    from kraftpy.tools.kafka_connection import ClientError, read_settings

    if args.blocks < 0:
        print("kraftpy broker-sim: --blocks must be 0 or more", file=sys.stderr)
        return 2
    try:
        conf = read_settings(args.command_config)
        broker = BrokerSim(args.controller, args.broker_id, args.cluster_id,
                           timeout=args.timeout, settings=conf)
        with broker.conn:
            epoch = broker.register(retry_for=args.timeout)
            print(f"registered broker {args.broker_id} in cluster {broker.cluster_id}: "
                  f"broker epoch {epoch}")
            broker.wait_unfenced(args.timeout)
            print(f"broker {args.broker_id} unfenced")
            for _ in range(args.blocks):
                first, length = broker.allocate()
                print(f"block {first}-{first + length - 1} ({length} ids)", flush=True)
            if args.unregister:
                code = broker.unregister()
                if code:
                    raise BrokerError("UnregisterBroker", code)
                print(f"broker {args.broker_id} unregistered")
    except (BrokerError, ClientError, TimeoutError) as exc:
        print(f"kraftpy broker-sim: {exc}", file=sys.stderr)
        return 1
    return 0
