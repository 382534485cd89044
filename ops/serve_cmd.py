"""`aotx serve`: the model, the embedded nats-server, the shared runtime and the gateway in one process.

Under `--var DIR` (default `var`): `nats/` (the embedded server's store), `gateway.json` and
`tokens/` (development principals alice and bob, written on first start), `nats/users/aotx` (the
embedded nats-server's one user's password, 0600, written on first start), `runtime.aotxrt` (the
runtime file, packed with the shared profile) and `grants/` (deployment grants, issued afresh from
the gateway config at every start). `--nats URL` uses an existing NATS instead of the embedded one.

One server per state directory: `aotx.lock` (flock, released when the process ends, kill -9 too) is
taken before anything is written, then the HTTP port is bound, and only then the nats-server starts
and the runtime boots. A second instance on the same `--var`, or one whose port is taken, exits with
one line and touches nothing.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import socket
import sys
from pathlib import Path

from api.app import create_app
from api.drain import DEFAULT_GRACE, drain_of
from api.gateway_config import GatewayConfig, GatewayConfigError, ensure_dev_config, load_gateway_config
from api.server import bind_socket, run_serving, serve_app
from api.settings import GatewaySettings, is_loopback
from api.shared import attach_shared
from api.stored_access import attach_stored
from aotx.runtime import GrantedRuntime, rpc_subject
from aotx.runtime.routed import routed
from aotx.runtime_file import GrantsError, RuntimeFileError, load_grants, pack_shared, write_grants
from aotx.serving import ModelService
from eventlog import DirectoryLock, DirectoryLocked, EmbeddedNats, NatsAuth, NatsServerError, redact_url
from ops.model_files import missing_model_files
from ops.model_args import add_model_arguments, check_model_arguments, load_service, runtime_options
from ops.nats_args import NatsArgsError, add_nats_arguments, nats_auth
from ops.http_workers import auto_workers, bind_reuseport
from ops.lease_args import add_lease_arguments, lease_policy
from ops.ready_block import ReadyFacts, model_file, print_ready, tokens_note
from ops.reload import on_sighup, serve_reloader
from ops.serve_workers import serve_with_workers
from ops.shared_stack import boot_summary, granted_runtime
from ops.shutdown import cancel_leftovers, graceful_timeout, install_shutdown_signals

log = logging.getLogger("aotx.serve")
RUNTIME_FILE = "runtime.aotxrt"
LOCK_FILE = "aotx.lock"  # one `aotx serve` per state directory (flock; dies with the process)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8080, help="TCP port (default 8080; 0 picks a free one)")
    add_model_arguments(p)
    p.add_argument("--config", help="gateway config (principals, token digests, actions); required when "
                                    "binding a non-loopback address; default: the development config "
                                    "VAR/gateway.json (written on first start)")
    p.add_argument("--var", default="var", help="state directory (default var)")
    add_nats_arguments(p, required=False, help="use this NATS URL instead of starting an embedded nats-server")
    p.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    p.add_argument("--http-workers", default="1", type=_workers, metavar="N|auto",
                   help="HTTP worker processes on --port (default 1: this process serves HTTP itself); with N > 1 "
                        "this process keeps the engine and the state and N workers serve HTTP, reaching the engine "
                        "over NATS (ops.serve_workers); auto = min(8, cores - 2)")
    add_lease_arguments(p, "lease mode (with --nats and one --config shared by every instance): several `aotx "
                           "serve --leases` share the journal; each lineage is written only by the instance holding "
                           "its lease, and a request for another's lineage is sent to it over NATS "
                           "(aotx.runtime.routed; docs/SCALE.md)")
    p.add_argument("--shutdown-grace", type=float, default=DEFAULT_GRACE,
                   help=f"seconds running requests may take to finish after SIGTERM (default {DEFAULT_GRACE:g}); "
                        "then they end with their surface's native error; a second signal ends the grace")


def _workers(value: str) -> int:
    if value == "auto":
        return auto_workers()
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--http-workers takes a number or auto, not {value!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError("--http-workers must be at least 1")
    return n


def lease_problem(args: argparse.Namespace) -> str | None:
    if not getattr(args, "leases", False):
        return None
    if not args.nats:
        return ("--leases needs --nats URL: the instances that share the journal must share its NATS (an "
                "embedded nats-server serves this instance alone)")
    try:
        lease_policy(args)
    except ValueError as exc:
        return str(exc)
    return None


def bind_problem(args: argparse.Namespace) -> str | None:
    if not args.config and not is_loopback(args.host):
        return (f"refusing to bind {args.host}: a non-loopback address requires bearer tokens; "
                "pass --config FILE with at least one principal")
    return None


def gateway_config(args: argparse.Namespace) -> GatewayConfig:
    if args.config:
        return load_gateway_config(args.config)
    problem = bind_problem(args)
    if problem:
        raise GatewayConfigError(problem)
    config_path, _, _ = ensure_dev_config(args.var)   # where the tokens are: the ready block (ops.ready_block)
    return load_gateway_config(config_path)


def settings_from(args: argparse.Namespace, config: GatewayConfig) -> GatewaySettings:
    return GatewaySettings(host=args.host, port=args.port, token_digests=config.token_digests(),
                           shutdown_grace=max(0.0, args.shutdown_grace))


def run(args: argparse.Namespace) -> int:
    problem = check_model_arguments(args) or bind_problem(args) or lease_problem(args)
    if problem:
        print(f"aotx serve: {problem}", file=sys.stderr)
        return 2
    missing = missing_model_files(args)   # one line naming the package, before anything starts
    if missing:
        print(f"aotx serve: {missing}", file=sys.stderr)
        return 1
    try:
        auth = nats_auth(args)
    except NatsArgsError as exc:
        print(f"aotx serve: {exc}", file=sys.stderr)
        return 2
    var = Path(args.var)
    try:  # before anything starts or writes: a second instance on this var leaves it as it is
        lock = DirectoryLock(var, LOCK_FILE).acquire()
    except DirectoryLocked as exc:
        print(f"aotx serve: the state directory {exc}; stop that server or pass another --var", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"aotx serve: cannot lock the state directory {var}: {exc}", file=sys.stderr)
        return 2
    try:  # the port before boot: a taken port fails before the journal is touched
        sock = (bind_socket(args.host, args.port) if args.http_workers == 1 else
                bind_reuseport(args.host, args.port, args.http_workers))
    except OSError as exc:
        print(f"aotx serve: cannot bind {args.host}:{args.port}: {exc.strerror or exc}", file=sys.stderr)
        lock.release()
        return 1
    try:
        return _run(args, var, sock, auth)
    finally:
        for s in sock if isinstance(sock, list) else [sock]:
            s.close()  # no-op once the server (or a worker) took it over
        lock.release()


def _run(args: argparse.Namespace, var: Path, sock: socket.socket | list[socket.socket],
         auth: NatsAuth | None) -> int:
    try:
        config = gateway_config(args)
        rf, _ = pack_shared(var / RUNTIME_FILE)
        write_grants(var / "grants", config.actions(), config.config_sha256)
        grants = load_grants(var / "grants", config_sha256=config.config_sha256)
    except (GatewayConfigError, RuntimeFileError, GrantsError) as exc:
        print(f"aotx serve: {exc}", file=sys.stderr)
        return 2
    settings = settings_from(args, config)
    embedded: EmbeddedNats | None = None
    try:
        if args.nats:
            nats_url = args.nats
        else:
            try:
                embedded = EmbeddedNats(var / "nats").start()  # main thread: it dies with us
            except NatsServerError as exc:
                print(f"aotx serve: the embedded nats-server did not start: {exc}", file=sys.stderr)
                return 1
            nats_url, auth = embedded.url, embedded.auth()  # its one user (VAR/nats/users/aotx)
        service = load_service(args, "aotx serve")
        if service is None:
            return 1
        shared = granted_runtime(rf, nats_url, grants, nats_auth=auth, leases=lease_policy(args),
                                 **runtime_options(args))
        shared.attach_service(service)  # shared inputs run on the same engine and KV pool
        if isinstance(sock, list):   # --http-workers N > 1
            return run_serving(_serve_workers(args, service, settings, config, shared, nats_url, auth,
                                              embedded is not None, sock, rf.name))
        return run_serving(_serve(args, service, settings, config, shared, redact_url(nats_url), embedded is not None,
                                  sock, rf.name))
    finally:
        if embedded is not None:
            embedded.stop()


async def _serve_workers(args, service: ModelService, settings: GatewaySettings, config: GatewayConfig,
                         shared: GrantedRuntime, nats_url: str, auth: NatsAuth | None, embedded: bool,
                         sockets: list[socket.socket], name: str) -> int:
    try:
        await shared.start()
    except Exception as exc:  # replay failed closed, or the journal is unreachable
        print(f"aotx serve: the shared runtime did not boot: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return await serve_with_workers(args, service, settings, config, shared, nats_url, auth, redact_url(nats_url),
                                    embedded, sockets, name, _lease_note(shared.runtime, name))


async def _serve(args: argparse.Namespace, service: ModelService, settings: GatewaySettings, config: GatewayConfig,
                 shared: GrantedRuntime, nats_url: str, embedded: bool, sock: socket.socket, name: str) -> int:
    try:
        await shared.start()  # boot = journal replay, before the gateway answers
    except Exception as exc:  # replay failed closed, or the journal is unreachable
        print(f"aotx serve: the shared runtime did not boot: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    port, stored = shared, shared.runtime.stored
    if shared.runtime.lease_policy is not None:   # re-routes to the lineage's holder (aotx.runtime.routed)
        try:
            port = await routed(shared, name, config.config_sha256)
        except Exception as exc:  # NATS refused the rpc subjects (permissions) or went away
            print(f"aotx serve: lease mode could not answer on NATS: {type(exc).__name__}: {exc}", file=sys.stderr)
            await shared.stop()   # gives its leases back
            return 1
        stored = port.stored
    app = create_app(service, settings)
    attach_shared(app, port, config.shared_principals(),
                  models=({"id": service.model_id, "media": False, "automatic_memory": False},))
    attach_stored(app, stored)   # stored Responses, Conversations, Idempotency-Key (issue 11)
    stop = asyncio.Event()
    install_shutdown_signals(stop, drain_of(app))   # stop serving, then drain (api.drain)
    on_sighup(serve_reloader(app, shared, config.path, shared.grants.path.parent))  # config + grants again

    def ready(host: str, port: int) -> None:
        note, token_dir = tokens_note(args)
        print_ready(ReadyFacts(host, port, service.model_id, service.backend_name, model_file(service),
                               settings.require_auth, note, nats_url, embedded, boot_summary(shared.runtime)
                               + _lease_note(shared.runtime, name),
                               token_dir))

    try:
        await serve_app(app, settings.host, settings.port, stop, on_ready=ready, sock=sock,
                        graceful_timeout=graceful_timeout(settings.shutdown_grace), freeze_gc=True)
    finally:
        await port.stop()   # a RoutedRuntime stops its rpc server and NATS client first, then the runtime
        await cancel_leftovers()
    return 0


def _lease_note(runtime, name: str) -> str:
    if runtime.lease_policy is None:
        return ""
    return (f"; lease mode as boot {runtime.boot_id} of runtime {name} ({runtime.lease_policy.describe()}; nats "
            f"subject {rpc_subject(name)}: requests for lineages another instance holds go to it)")
