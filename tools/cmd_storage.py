"""`kraftpy storage`: format a data dir, or print a new cluster id, like `kafka-storage.sh`.

    kraftpy storage format --config server.properties [--cluster-id ID]
        [--release-version 4.1] [--feature NAME=LEVEL ...] [--ignore-formatted]
        [--standalone | --initial-controllers ID@HOST:PORT:DIRID,... | --no-initial-controllers]
    kraftpy storage random-uuid
    kraftpy storage recover-quorum --config server.properties --survivors ID,...
        --lost-controllers ID:DIRECTORY_ID,... [--leader-epoch N] [--skip-producer-ids N]
        --accept-data-loss

`format` writes `meta.properties` and `bootstrap.checkpoint` into `metadata.log.dir`, with the
feature levels Kafka 4.1's `kafka-storage format` finalizes: `--release-version` (default
4.1-IV1) sets metadata.version and the default of every other feature, `--feature` overrides
one; unknown features, unstable levels and unmet dependencies are refused with Kafka's
messages (exit 1) before anything is written. A formatted dir is left alone only with
`--ignore-formatted` (exit 0), otherwise it is an error. `--standalone` and
`--initial-controllers` format a KIP-853 quorum as Kafka does: kraft.version 1 and the voter
set in the raft bootstrap snapshot of __cluster_metadata-0; a node named in
`--initial-controllers` takes its directory id from it.
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
    quorum = fmt.add_mutually_exclusive_group()
    quorum.add_argument(
        "--standalone", "-s", action="store_true",
        help="a KIP-853 quorum (kraft.version 1) whose one voter is this node, recorded in "
        "the log so that brokers find it through controller.quorum.bootstrap.servers",
    )
    quorum.add_argument(
        "--initial-controllers", "-I", metavar="id@host:port:directoryId,...",
        help="the initial voters of a KIP-853 quorum (kraft.version 1); the same value on "
        "every node, each taking its directory id from it. A node not in it starts as an "
        "observer",
    )
    quorum.add_argument(
        "--no-initial-controllers", "-N", action="store_true",
        help="a KIP-853 controller that joins an existing quorum later: it starts as an "
        "observer of controller.quorum.bootstrap.servers until AddRaftVoter adds it",
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
    _register_recover(sub)


def _register_recover(sub: argparse._SubParsersAction) -> None:
    rec = sub.add_parser(
        "recover-quorum",
        help="give a stopped survivor of a KIP-853 quorum that lost its majority a voter set "
        "of the survivors only (accepting the loss of what they lack)",
        description="Recover a KIP-853 controller quorum that lost a majority of its voters: "
        "on a stopped survivor, write a new voter set naming only the survivors, in a control "
        "batch of a new leader epoch. Records the lost voters committed and this disk lacks "
        "are lost. Without --accept-data-loss nothing is written.")
    rec.add_argument("--config", "-c", metavar="FILE", required=True,
                     help="the survivor's server.properties (its metadata.log.dir and node.id)")
    rec.add_argument("--survivors", metavar="ID,...",
                     help="the voters whose data dirs survive, this node among them; they "
                     "form the new voter set")
    rec.add_argument("--lost-controllers", metavar="ID:DIRECTORY_ID,...",
                     help="every other voter, with the directory id the voter set records "
                     "for it: these directories may never take part again")
    rec.add_argument("--leader-epoch", metavar="N", type=int,
                     help="the leader epoch of the recovery (default: the highest epoch the "
                     "data dir knows plus 1001); must be above every epoch any broker or "
                     "controller has seen")
    rec.add_argument("--skip-producer-ids", metavar="N", type=int, default=None,
                     help="move the producer-id counter on by N ids, past blocks the lost "
                     "voters may have granted (default 1000000; 0 leaves it as it is)")
    rec.add_argument("--accept-data-loss", action="store_true",
                     help="accept that whatever the lost voters committed and this data dir "
                     "lacks is gone")
    rec.set_defaults(func=run_recover_quorum)


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
        dynamic = (args.standalone or args.initial_controllers is not None
                   or args.no_initial_controllers)
        features = format_levels(args.release_version, _features(args.feature),
                                 dynamic=dynamic)
    except ValueError as exc:  # Kafka's words, and Kafka's exit status
        print(exc, file=sys.stderr)
        return 1
    metadata_version = features.pop(METADATA_VERSION)
    cluster_id = args.cluster_id or random_uuid()
    log_dir = config.metadata_log_dir
    try:
        voters, directory_id = _voters(args, config)
    except ValueError as exc:
        print(f"kraftpy storage format: {exc}", file=sys.stderr)
        return 1
    try:
        done = format_storage(
            log_dir,
            cluster_id=cluster_id,
            node_id=config.node_id,
            metadata_version=metadata_version,
            features=features,
            now_ms=time.time_ns() // 1_000_000,
            ignore_formatted=args.ignore_formatted,
            voters=voters,
            directory_id=directory_id,
        )
    except (LogDirError, OSError) as exc:
        print(f"kraftpy storage format: {exc}", file=sys.stderr)
        return 1
    if not done:
        print(f"{log_dir} is already formatted; left unchanged.")
        return 0
    levels = ", ".join(f"{n}={lvl}" for n, lvl in sorted(features.items()) if lvl)
    kind = "metadata directory"  # Kafka's Formatter.DirectoryType descriptions
    if voters is not None:
        named = any(v.voter_id == config.node_id for v in voters.voters)  # type: ignore[attr-defined]
        kind = "dynamic metadata voter directory" if named else "dynamic metadata directory"
    print(f"Formatting {kind} {log_dir} with metadata.version "
          f"{metadata_version_name(metadata_version)}.")
    print(f"Cluster {cluster_id}, node {config.node_id}; finalized: "
          f"metadata.version={metadata_version}{', ' + levels if levels else ''}.")
    return 0


def _voters(args: argparse.Namespace, config: object) -> tuple[object, str | None]:
    """(the VotersRecord, this node's directory id) for --standalone / --initial-controllers;
    (None, None) for a static quorum. ValueError, in one line, for what kraftpy cannot run."""
    from kraftpy.controller.log.storage import random_uuid
    from kraftpy.controller.raft.voters import VoterSpec, parse_initial_controllers, voters_record
    from kraftpy.protocol.uuid import kafka_uuid_str, parse_kafka_uuid

    if not args.standalone and args.initial_controllers is None:  # or --no-initial-controllers
        return None, None
    node_id = config.node_id  # type: ignore[attr-defined]
    if args.standalone:
        names = config.controller_listener_names  # type: ignore[attr-defined]
        endpoints = tuple((name, config.advertised(name).host,  # type: ignore[attr-defined]
                           config.advertised(name).port) for name in names  # type: ignore[attr-defined]
                          if any(ep.name == name for ep in config.listeners))  # type: ignore[attr-defined]
        if not endpoints:
            raise ValueError("--standalone needs a CONTROLLER listener in listeners")
        directory = random_uuid()
        spec = VoterSpec(node_id, parse_kafka_uuid(directory), endpoints)
        return voters_record([spec]), directory
    controllers = parse_initial_controllers(args.initial_controllers)
    name = config.controller_listener_names[0]  # type: ignore[attr-defined]
    record = voters_record([VoterSpec(i, directory, ((name, host, port),))
                            for i, host, port, directory in controllers])
    # Kafka's Formatter: a node in the list takes its directory id from there; one that is
    # not gets a new one and the same voter set, and starts as an observer of it.
    mine = [directory for i, _, _, directory in controllers if i == node_id]
    return record, kafka_uuid_str(mine[0]) if mine else random_uuid()


def run_random_uuid(args: argparse.Namespace) -> int:
    from kraftpy.controller.log.storage import random_uuid

    print(random_uuid())
    return 0


def run_recover_quorum(args: argparse.Namespace) -> int:
    from kraftpy.controller import recovery
    from kraftpy.controller.config import ConfigError, load_config
    from kraftpy.controller.log.files import DirLock, LogDirError, read_meta_properties
    from kraftpy.controller.log.partition_log import LogCorruptError
    from kraftpy.controller.log.snapshots import SnapshotError
    from kraftpy.controller.log.storage import MetadataStorage
    from kraftpy.controller.raft import quorum_recovery as qr
    from kraftpy.protocol.errors import DecodeError

    name = "kraftpy storage recover-quorum"
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 2
    log_dir = config.metadata_log_dir
    skip = qr.PRODUCER_ID_MARGIN if args.skip_producer_ids is None else args.skip_producer_ids
    try:
        survivors = None if args.survivors is None else qr.parse_survivors(args.survivors)
        lost = None if args.lost_controllers is None else qr.parse_lost(args.lost_controllers)
        read_meta_properties(log_dir)  # never format here: an unformatted dir is refused
        if not (log_dir / "__cluster_metadata-0").is_dir():
            raise qr.RecoveryRefused(
                f"{log_dir} holds no metadata log (no __cluster_metadata-0): this node never "
                "ran in a quorum, so there is nothing here to recover from")
        lock = DirLock(log_dir)
        try:
            lock.acquire()
        except LogDirError as exc:  # a running node (kraftpy's or Kafka's) holds it
            raise qr.RecoveryRefused(f"{exc}: stop the node first (recover-quorum works on a "
                                     "stopped node's data dir)") from None
        try:  # read-only: a refusal changes nothing; the lock keeps a node from starting
            storage = MetadataStorage.open(log_dir, node_id=config.node_id, read_only=True,
                                           with_txn_log=False, downloads=True)
            try:
                survivor = qr.read_survivor(storage)
            finally:
                storage.close()
        finally:
            lock.release()
    except (LogDirError, LogCorruptError, SnapshotError, DecodeError, OSError,
            qr.RecoveryRefused, qr.RecoveryFileError) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    for line in qr.describe_survivor(survivor):
        print(line)
    try:
        plan = qr.plan(survivor, survivors=survivors, lost=lost, leader_epoch=args.leader_epoch,
                       skip_producer_ids=skip)
    except qr.RecoveryRefused as exc:
        print(f"{name}: refused: {exc}", file=sys.stderr)
        return 1
    for line in qr.describe_loss(survivor) + qr.describe_plan(plan):
        print(line)
    if not args.accept_data_loss:
        print(f"{name}: refused: nothing was written. A lost majority may have committed "
              f"records this data dir lacks (at offset {survivor.log_end} or later): add "
              "--accept-data-loss to accept their loss and write the new voter set",
              file=sys.stderr)
        return 1
    try:
        storage = recovery.open_storage(config, downloads=True)
    except recovery.RecoveryError as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    try:
        plan = qr.plan(qr.read_survivor(storage), survivors=survivors, lost=lost,
                       leader_epoch=args.leader_epoch, skip_producer_ids=skip)
        qr.write(storage, plan, qr.now_ms())
    except (qr.RecoveryRefused, qr.RecoveryFileError, LogDirError, DecodeError, OSError) as exc:
        print(f"{name}: {exc}", file=sys.stderr)
        return 1
    finally:
        storage.close()
    print(f"Wrote the new voter set at offset {plan.offset}, leader epoch {plan.epoch}; "
          f"declared lost: {', '.join(f'{k.id}' for k in plan.lost)} "
          f"(recorded in {log_dir / qr.RECOVERY_FILE}).")
    print(f"Next: start node {plan.survivor.node.id}; it stands for epoch {plan.epoch + 1} "
          "with the new voter set. Bring each lost controller back only on a newly formatted "
          "directory (storage format --no-initial-controllers), then add it with "
          "kafka-metadata-quorum --bootstrap-controller HOST:PORT --command-config ITS_CONFIG "
          "add-controller. Never start one on its old data dir.")
    return 0
