"""`aotx boot --runtime FILE --nats URL --service-grants DIR`: the runtime alone.

Boots by journal replay (progress bar on stderr), then answers shared commands and reads over
NATS request/reply on `aotx.rt.<name>.cmd` until SIGINT/SIGTERM.
"""
from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from aotx.runtime import RuntimeRpcServer, rpc_subject
from aotx.runtime_file import GrantsError, RuntimeFileError, load_grants, read_runtime_file
from ops.shared_stack import granted_runtime


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runtime", required=True, help="the runtime file (aotx pack --runtime FILE --shared)")
    p.add_argument("--nats", required=True, help="NATS URL of the journal (JetStream)")
    p.add_argument("--service-grants", required=True, help="directory holding the deployment grant file")
    p.add_argument("--grant-max-age-hours", type=float, default=24.0,
                   help="refuse grants issued longer ago than this (default 24)")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])


def run(args: argparse.Namespace) -> int:
    try:
        rf = read_runtime_file(args.runtime)
        grants = load_grants(args.service_grants, max_age_s=args.grant_max_age_hours * 3600)
        target = granted_runtime(rf, args.nats, grants)
    except (RuntimeFileError, GrantsError) as exc:
        print(f"aotx boot: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_boot(target, rf.name, args.nats))


async def _boot(target, name: str, nats_url: str) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await target.start()
    except Exception as exc:  # replay failed closed, or the journal is unreachable
        print(f"aotx boot: the runtime did not boot: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    server = RuntimeRpcServer(target, nats_url, name)
    try:
        await server.start()
        proj = target.runtime.projector
        print(f"aotx: runtime {name} booted ({proj.messages} journal messages, {proj.transfers} transfers "
              f"replayed); serving shared commands on nats subject {rpc_subject(name)}", file=sys.stderr, flush=True)
        await stop.wait()
    finally:
        await server.stop()
        await target.stop()
    return 0
