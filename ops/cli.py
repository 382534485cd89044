"""The `aotx` command."""
from __future__ import annotations

import argparse
import sys

from ops import logs, serve_cmd


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aotx", description="AOTX LLM server")
    sub = parser.add_subparsers(dest="command", required=True)
    serve_cmd.add_arguments(sub.add_parser("serve", help="serve the model over HTTP"))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.configure(args.log_level)
    if args.command == "serve":
        return serve_cmd.run(args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
