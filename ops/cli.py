"""The `aotx` command."""
from __future__ import annotations

import argparse
import sys

from ops import audit_cmd, boot_cmd, cluster_cmd, drill, gateway_cmd, grants_cmd, logs, pack_cmd, serve_cmd
from ops.chat import command as chat_cmd

_COMMANDS = {
    "serve": (serve_cmd, "serve the model, the shared runtime and an embedded nats-server over HTTP"),
    "boot": (boot_cmd, "start the shared runtime alone (commands over NATS request/reply)"),
    "gateway": (gateway_cmd, "start the HTTP gateway alone (/aotx/v1/shared, forwarded over NATS)"),
    "pack": (pack_cmd, "write a runtime file or add/upgrade its shared profile"),
    "grants": (grants_cmd, "write the deployment grant file from a gateway config"),
    "audit": (audit_cmd, "print one decoded line per journal transfer"),
    "cluster": (cluster_cmd, "start a JetStream cluster of nats-servers on loopback (development, drills)"),
    "chat": (chat_cmd, "a terminal chat: plain (stored history) or joined to a shared conversation"),
    "drill": (drill, "recovery drill: SIGKILL the runtime and nats-server under load, check the ledger"),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="aotx", description="AOTX LLM server")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (module, help_text) in _COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        module.add_arguments(p)
        if not any(a.dest == "log_level" for a in p._actions):
            p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logs.configure(args.log_level)
    return _COMMANDS[args.command][0].run(args)


if __name__ == "__main__":
    sys.exit(main())
