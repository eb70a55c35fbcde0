"""The `kraftpy` command: one subcommand per module, each owning its own arguments."""

from __future__ import annotations

import argparse
import importlib
import sys

# (subcommand, module). Each module has `register(subparsers)` that adds its parser and
# sets `func` on it; `func(args) -> int` is the exit status.
SUBCOMMANDS: list[tuple[str, str]] = [
    ("dump-log", "kraftpy.tools.cmd_dump_log"),
    ("metadata-state", "kraftpy.tools.cmd_metadata_state"),
    ("pid-audit", "kraftpy.tools.cmd_pid_audit"),
    ("eos-audit", "kraftpy.tools.cmd_eos_audit"),
    ("pipeline", "kraftpy.tools.cmd_pipeline"),
    ("serve", "kraftpy.tools.cmd_serve"),
    ("conformance", "kraftpy.tools.cmd_conformance"),
    ("acls", "kraftpy.tools.cmd_acls"),
    ("broker-sim", "kraftpy.tools.cmd_broker_sim"),
    ("storage", "kraftpy.tools.cmd_storage"),
    ("cluster", "kraftpy.tools.cmd_cluster"),
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kraftpy", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    for _name, module in SUBCOMMANDS:
        importlib.import_module(module).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
