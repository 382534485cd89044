"""The drill's runtime process: `aotx boot` (same runtime, same model, same RPC server) plus one drill-only reply.

`python -m ops.drill.node --runtime FILE --nats URL [--nats-* credentials] --service-grants DIR [model flags]
[--no-model] [--leases [--lease-ttl S] --state-id N]`
loads the model (the ModelService of `aotx boot`, same flags: ops.model_args) and attaches it,
boots by journal replay, serves shared commands on `aotx.rt.<name>.cmd` exactly as `aotx boot`
does, and answers `aotx.drill.<name>.state` with the live state hash (and how many inputs the
executor holds), so the drill can compare it with a fresh replay. It is a separate process so the
drill can SIGKILL it. `--leases` is `aotx boot --leases` (the cluster drill runs two); `--state-id N` answers
on `aotx.drill.<name>.state.N` instead, so each of several runtimes is asked on its own.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys

from aotx.runtime import RuntimeRpcServer
from aotx.runtime.ownership import LeasePolicy
from aotx.runtime_file import load_grants, read_runtime_file
from eventlog import connect, flush_subscriptions
from ops.model_args import add_model_arguments, load_service, runtime_options
from ops.nats_args import add_nats_arguments, nats_auth
from ops.shared_stack import boot_summary, granted_runtime

from .cluster import state_subject


async def _quiet(exc: Exception) -> None:  # the drill kills nats-server on purpose
    pass


def _executing(runtime) -> int:
    ex = runtime.executor
    if ex is None:
        return 0
    return len(ex.running) + len(getattr(ex, "queue", ()))


async def _main(args: argparse.Namespace) -> int:
    rf = read_runtime_file(args.runtime)
    auth = nats_auth(args)
    leases = LeasePolicy(ttl=args.lease_ttl) if args.leases else None
    target = granted_runtime(rf, args.nats, load_grants(args.service_grants), progress=False, nats_auth=auth,
                             leases=leases, **runtime_options(args))
    service = None
    if not args.no_model:
        service = load_service(args, "drill node", progress=False)
        if service is None:
            return 1
        target.attach_service(service)
        service.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await target.start()
    except Exception as exc:
        print(f"drill node: the runtime did not boot: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        if service is not None:
            await service.stop()
        return 1
    runtime = target.runtime
    server = await RuntimeRpcServer(target, args.nats, rf.name, auth=auth).start()
    nc = await connect(args.nats, auth, name="aotx-drill-node", error_cb=_quiet, max_reconnect_attempts=-1,
                       reconnect_time_wait=0.2)

    async def state(msg) -> None:
        proj = runtime.projector
        await msg.respond(json.dumps({"state_hash": runtime.state_hash(), "boot": runtime.boot_id,
                                      "messages": proj.messages if proj else None, "failed": runtime.failed,
                                      "hold": runtime.hold.active, "executing": _executing(runtime)}).encode())

    await nc.subscribe(state_subject(rf.name, args.state_id), cb=state)
    await flush_subscriptions(nc)
    proj = runtime.projector
    model = "no model" if service is None else f"model {service.model_id} ({service.backend_name})"
    print(f"drill node: runtime {rf.name} booted ({proj.messages} journal messages, {proj.transfers} transfers "
          f"replayed; {boot_summary(runtime)}) boot {runtime.boot_id}, {model}", file=sys.stderr, flush=True)
    try:
        await stop.wait()
    finally:
        await nc.close()
        await server.stop()
        await target.stop()
        if service is not None:
            await service.stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m ops.drill.node")
    p.add_argument("--runtime", required=True)
    add_nats_arguments(p, required=True, help="NATS URL of the journal")
    p.add_argument("--service-grants", required=True)
    p.add_argument("--no-model", action="store_true", help="no model: inputs answer 409")
    p.add_argument("--leases", action="store_true", help="lease mode, as `aotx boot --leases`")
    p.add_argument("--lease-ttl", type=float, default=LeasePolicy().ttl, help="lease mode: the lease TTL in seconds")
    p.add_argument("--state-id", help="answer the drill's state requests on aotx.drill.<name>.state.<ID>")
    add_model_arguments(p)
    return asyncio.run(_main(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())
