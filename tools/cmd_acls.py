"""`kraftpy acls list|add|remove`: arguments; the work is in `kraftpy.tools.acls`."""

from __future__ import annotations

import argparse
import sys

OPERATIONS = ("All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
              "AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens, TwoPhaseCommit")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "acls", help="list, add or remove ACLs on a running kraftpy (as kafka-acls.sh does)",
        description="Manage ACLs over the wire protocol (DescribeAcls, CreateAcls, DeleteAcls). "
        "The server needs authorizer.class.name set, and the caller ALTER (add, remove) or "
        "DESCRIBE (list) on the cluster, or to be in super.users.")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--command-config", metavar="FILE",
                   help="client properties: security.protocol, sasl.mechanism, sasl.username, "
                   "sasl.password, ssl.ca.location, ssl.certificate.location, ssl.key.location")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds (default 10)")
    sub = p.add_subparsers(dest="action", required=True)
    for name, text in (("list", "show the ACLs that match"), ("add", "grant or deny"),
                       ("remove", "remove the ACLs that match")):
        a = sub.add_parser(name, help=text)
        res = a.add_argument_group("resource (at most one)")
        res.add_argument("--cluster", action="store_true", help="the cluster resource")
        res.add_argument("--topic", metavar="NAME")
        res.add_argument("--group", metavar="NAME")
        res.add_argument("--transactional-id", metavar="ID")
        a.add_argument("--resource-pattern-type", default=None,
                       help="literal or prefixed (add); any, match, literal or prefixed "
                       "(list, remove; default any)")
        a.add_argument("--operation", action="append", default=[], metavar="OP",
                       help=f"repeatable: {OPERATIONS}")
        if name == "add":
            a.add_argument("--allow-principal", action="append", default=[], metavar="P")
            a.add_argument("--deny-principal", action="append", default=[], metavar="P")
            a.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                           help="default * for allow principals")
            a.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                           help="default * for deny principals")
        else:
            a.add_argument("--principal", metavar="P", help="only this principal")
            a.add_argument("--host", metavar="HOST", help="only this host")
            a.add_argument("--permission", choices=("allow", "deny"), default=None)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kraftpy.controller.security.acl import (
        AclOperation,
        AclPermissionType,
        PatternType,
        ResourceType,
        parse_enum,
    )
    from kraftpy.protocol.messages.create_acls_request import AclCreation
    from kraftpy.tools import acls
    from kraftpy.tools.kafka_connection import ClientError, KafkaConnection, read_settings

    try:
        rt, name = acls.resource_of(args.cluster, args.topic, args.group, args.transactional_id)
        ops = [parse_enum(AclOperation, o) for o in args.operation]
        default_pattern = "literal" if args.action == "add" else "any"
        pattern = parse_enum(PatternType, args.resource_pattern_type or default_pattern)
    except ValueError as exc:
        print(f"kraftpy acls: {exc}", file=sys.stderr)
        return 2
    try:
        conf = read_settings(args.command_config)
        with KafkaConnection(args.bootstrap_server, conf, timeout=args.timeout,
                             client_id="kraftpy-acls") as conn:
            if args.action == "add":
                if rt == ResourceType.ANY or not ops or not (args.allow_principal
                                                             or args.deny_principal):
                    print("kraftpy acls add: needs a resource, --operation and a principal",
                          file=sys.stderr)
                    return 2
                creations = [
                    AclCreation(resource_type=rt, resource_name=name,
                                resource_pattern_type=pattern, principal=principal, host=host,
                                operation=op, permission_type=perm)
                    for perm, principals, hosts in (
                        (AclPermissionType.ALLOW, args.allow_principal, args.allow_host or ["*"]),
                        (AclPermissionType.DENY, args.deny_principal, args.deny_host or ["*"]))
                    for principal in principals for host in hosts for op in ops
                ]
                return acls.add_acls(conn, creations)
            perm = {"allow": AclPermissionType.ALLOW, "deny": AclPermissionType.DENY}.get(
                args.permission or "", AclPermissionType.ANY)
            filters = [
                {"resource_type_filter": rt, "resource_name_filter": name,
                 "pattern_type_filter": pattern, "principal_filter": args.principal,
                 "host_filter": args.host, "operation": op, "permission_type": perm}
                for op in (ops or [AclOperation.ANY])
            ]
            if args.action == "list":
                return max(acls.list_acls(conn, f) for f in filters)
            if rt == ResourceType.ANY and args.principal is None:
                print("kraftpy acls remove: name a resource or --principal (removing every ACL "
                      "at once is not offered)", file=sys.stderr)
                return 2
            return acls.remove_acls(conn, filters)
    except ClientError as exc:
        print(f"kraftpy acls: {exc}", file=sys.stderr)
        return 2
