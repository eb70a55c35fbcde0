"""python -m kraftpy.codegen SCHEMAS_DIR PROTOCOL_DIR  (or --flat SCHEMA_DIR OUT_DIR)."""

from __future__ import annotations

import argparse
import sys

from kraftpy.codegen import SchemaError, generate_dir, generate_tree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kraftpy.codegen", description=__doc__)
    parser.add_argument("schemas", help="schemas/ (with message/ and metadata/), or a flat dir with --flat")
    parser.add_argument("out", help="protocol/ (gets messages/ and records/), or the output dir with --flat")
    parser.add_argument("--flat", action="store_true", help="one directory of schemas to one of modules")
    args = parser.parse_args(argv)
    try:
        written = generate_dir(args.schemas, args.out) if args.flat else generate_tree(args.schemas, args.out)
    except SchemaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{len(written)} modules up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
