"""`aotx boot --runtime FILE --nats URL --service-grants DIR`: the runtime alone.

Loads the model (the same ModelService as `aotx serve`, same model flags; a progress bar on stderr)
and attaches it, so shared inputs admitted through any gateway run here; `--no-model` leaves it out
(inputs then answer 409). Boots by journal replay (progress bar on stderr), then answers shared
commands and reads over NATS request/reply on `aotx.rt.<name>.cmd` and announces state changes on
`aotx.rt.<name>.changed` (gateways' SSE streams wait on it) until SIGINT/SIGTERM. SIGHUP reads the
deployment grant file again (ops/reload.py; issue it first with `aotx grants`).
"""
from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from aotx.engine_service import EngineService
from aotx.engine_wire import engine_facts, pool_engine_name
from aotx.runtime import RuntimeRpcServer, rpc_subject
from aotx.runtime_file import GrantsError, RuntimeFileError, load_grants, read_runtime_file
from aotx.serving import ModelService
from ops.lease_args import add_lease_arguments, lease_policy
from eventlog import NatsAuth
from ops.model_files import missing_model_files
from ops.model_args import add_model_arguments, check_model_arguments, load_service, runtime_options
from ops.nats_args import NatsArgsError, add_nats_arguments, nats_auth
from ops.reload import boot_reloader, on_sighup
from ops.shared_stack import boot_summary, granted_runtime


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--runtime", required=True, help="the runtime file (aotx pack --runtime FILE --shared)")
    add_nats_arguments(p, required=True, help="NATS URL of the journal (JetStream)")
    p.add_argument("--service-grants", required=True, help="directory holding the deployment grant file")
    p.add_argument("--grant-max-age-hours", type=float, default=24.0,
                   help="refuse grants issued longer ago than this (default 24)")
    p.add_argument("--no-model", action="store_true",
                   help="do not load the model: the runtime keeps state and answers reads and mutations, "
                        "but refuses shared inputs (409)")
    add_lease_arguments(p, "lease mode: several runtimes (each `aotx boot --leases`, same --runtime file) share the "
                           "journal; each lineage is written only by the runtime holding its lease, gateways route "
                           "to it, a dead runtime's lineages are taken over within --lease-ttl (docs/SCALE.md)")
    add_model_arguments(p)
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])


def run(args: argparse.Namespace) -> int:
    problem = check_model_arguments(args)
    if problem:
        print(f"aotx boot: {problem}", file=sys.stderr)
        return 2
    missing = None if args.no_model else missing_model_files(args)   # one line naming the package
    if missing:
        print(f"aotx boot: {missing}", file=sys.stderr)
        return 1
    try:
        rf = read_runtime_file(args.runtime)
        grants = load_grants(args.service_grants, max_age_s=args.grant_max_age_hours * 3600)
        auth = nats_auth(args)
        leases = lease_policy(args)
        target = granted_runtime(rf, args.nats, grants, nats_auth=auth, leases=leases, **runtime_options(args))
    except (RuntimeFileError, GrantsError, NatsArgsError, ValueError) as exc:
        print(f"aotx boot: {exc}", file=sys.stderr)
        return 2
    service = None
    if not args.no_model:
        service = load_service(args, "aotx boot")
        if service is None:
            return 1
        target.attach_service(service)  # shared inputs run on this engine and KV pool
    return asyncio.run(_boot(target, rf.name, args.nats, auth, service, args.grant_max_age_hours * 3600))


async def _boot(target, name: str, nats_url: str, auth: NatsAuth | None, service: ModelService | None,
                max_age_s: float) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    on_sighup(boot_reloader(target, target.grants.path.parent, max_age_s))   # SIGHUP: the grant file again
    if service is not None:
        service.start()
    try:
        try:
            await target.start()
        except Exception as exc:  # replay failed closed, or the journal is unreachable
            print(f"aotx boot: the runtime did not boot: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 1
        server = RuntimeRpcServer(target, nats_url, name, auth=auth)
        engine = None
        try:
            await server.start()
            proj = target.runtime.projector
            model = ("no model: shared inputs answer 409" if service is None else
                     f"inputs run on {service.model_id} (backend {service.backend_name})")
            if service is not None:   # gateways' model surfaces (`aotx gateway --model-surfaces`) use it too
                engine_name = pool_engine_name(name, target.runtime.boot_id)
                engine = await EngineService(service, nats_url, engine_name, auth=auth,
                                             facts=engine_facts(service)).start()
                model += f", which also serves gateways' model surfaces as engine {engine_name}"
            if target.runtime.lease_policy is not None:
                model += f"; lease mode, boot {target.runtime.boot_id} ({target.runtime.lease_policy.describe()})"
            print(f"aotx: runtime {name} booted ({proj.messages} journal messages, {proj.transfers} transfers; "
                  f"{boot_summary(target.runtime)}); serving shared commands on nats subject {rpc_subject(name)}; "
                  f"{model}",
                  file=sys.stderr, flush=True)
            await stop.wait()
        finally:
            if engine is not None:
                await engine.stop()
            await server.stop()
            await target.stop()
    finally:
        if service is not None:
            await service.stop()
    return 0
