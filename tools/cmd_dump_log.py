"""`kraftpy dump-log PATH...`: arguments; the work is in `kraftpy.tools.dump_log`."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "dump-log",
        help="decode metadata log segments, snapshots and the files beside them",
        description="Decode Kafka metadata logs (ours and Apache Kafka's) and Kafka log.dirs "
        "directories. Default output follows kafka-dump-log.sh with the decoder each partition "
        "needs: --cluster-metadata-decoder for __cluster_metadata, --transaction-log-decoder "
        "for __transaction_state, --offsets-decoder for __consumer_offsets, and the default "
        "decoder for other topics. A directory is walked for its segments and snapshots; name "
        "small files (quorum-state, meta.properties, .index, ...) or pass --all-files to see "
        "those too. Exit status 1 when damage was found.",
    )
    p.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")
    p.add_argument("--json", action="store_true",
                   help="one JSON object per record of every partition (JSON lines), with the "
                        "batch fields exactly-once depends on; with --summary, one document")
    p.add_argument("--summary", action="store_true",
                   help="count records by type and leader epoch instead of listing them")
    p.add_argument("--skip-noop", action="store_true", help="hide NoOpRecords (and their batches)")
    p.add_argument("--print-data-log", action="store_true",
                   help="ordinary topics: print each record with its key and value as text "
                        "(as kafka-dump-log.sh --print-data-log); with --json, keys, values "
                        "and header values as text instead of base64")
    p.add_argument("--deep-iteration", action="store_true",
                   help="ordinary topics: print each record's line without key and value "
                        "(as kafka-dump-log.sh --deep-iteration)")
    p.add_argument("--all-files", action="store_true",
                   help="when walking directories, also decode the small files")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar on stderr (default: when stderr is a terminal)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from kraftpy.tools import dump_log  # decoding modules load only when used

    if args.summary:
        mode = "summary-json" if args.json else "summary"
    else:
        mode = "json" if args.json else "text"
    return dump_log.main(args.paths, mode=mode, skip_noop=args.skip_noop,
                         all_files=args.all_files, progress=args.progress,
                         print_data=args.print_data_log, deep_iteration=args.deep_iteration)
