"""The `aotx` command. A subcommand's module is imported only when it runs (or when the whole parser
is built), so a light one such as `aotx chat` starts without loading the server's packages."""
from __future__ import annotations

import argparse
import importlib
import sys

from ops import logs

_COMMANDS = {
    "serve": ("ops.serve_cmd", "serve the model, the shared runtime and an embedded nats-server over HTTP"),
    "boot": ("ops.boot_cmd", "start the shared runtime alone (commands over NATS request/reply)"),
    "gateway": ("ops.gateway_cmd", "start the HTTP gateway alone (/aotx/v1/shared, forwarded over NATS)"),
    "pack": ("ops.pack_cmd", "write a runtime file or add/upgrade its shared profile"),
    "grants": ("ops.grants_cmd", "write the deployment grant file from a gateway config"),
    "audit": ("ops.audit_cmd", "print one decoded line per journal transfer"),
    "cluster": ("ops.cluster_cmd", "start a JetStream cluster of nats-servers on loopback (development, drills)"),
    "chat": ("ops.chat.command", "a terminal chat: plain (stored history) or joined to a shared conversation"),
    "drill": ("ops.drill", "recovery drill: SIGKILL the runtime and nats-server under load, check the ledger"),
}


def _module(name: str):
    return importlib.import_module(_COMMANDS[name][0])


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every subcommand's flags, or with `only` just that one's (the others keep their help line)."""
    parser = argparse.ArgumentParser(prog="aotx", description="AOTX LLM server")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (_, help_text) in _COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        if only is not None and name != only:
            continue
        _module(name).add_arguments(p)
        if not any(a.dest == "log_level" for a in p._actions):
            p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    only = argv[0] if argv and argv[0] in _COMMANDS else None
    args = build_parser(only).parse_args(argv)
    logs.configure(args.log_level)
    return _module(args.command).run(args)


if __name__ == "__main__":
    sys.exit(main())
