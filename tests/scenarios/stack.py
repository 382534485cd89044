"""An `aotx serve`-like stack in this process: a real nats-server, the shared runtime with the real model
service (inputs, memory with the real embedding model), the shared routes over real HTTP (uvicorn on a
loopback port) or a Quart test client; principals alice, bob, carol (every grant) and dave (read and
write, no manage)."""
from __future__ import annotations

import asyncio
import contextlib
import itertools
import secrets
from typing import Any, AsyncIterator

from quart import Quart

from api.shared import attach_shared, token_sha256
from aotx.runtime import SharedRuntime
from eventlog import StreamSpec
from scenarios import HttpTransport, Model, Party, QuartTransport, Runner
from scenarios.client import TransportError
from tests.waiting import wait_until_async

ALL = frozenset({"shared_read", "shared_write", "shared_manage"})
GRANTS = {"alice": ALL, "bob": ALL, "carol": ALL, "dave": frozenset({"shared_read", "shared_write"})}
TOKENS = {n: f"tok-{n}-{secrets.token_hex(16)}" for n in GRANTS}
PRINCIPALS = {token_sha256(TOKENS[n]): (n, set(g)) for n, g in GRANTS.items()}
_streams = itertools.count(1)


def fresh_spec(prefix: str = "SCN") -> StreamSpec:
    n = next(_streams)
    return StreamSpec(name=f"{prefix}{n}", subject_prefix=f"{prefix.lower()}{n}.j")


def shared_app(runtime: SharedRuntime, nats_url: str) -> Quart:
    app = Quart("aotx-scenarios")
    attach_shared(app, runtime, PRINCIPALS, media_url=nats_url)
    return app


@contextlib.asynccontextmanager
async def http_stack(nats_url: str, service: Any, spec: StreamSpec | None = None,
                     **runtime_kw: Any) -> AsyncIterator[tuple[SharedRuntime, HttpTransport]]:
    """The runtime booted from `spec`'s stream, served over real HTTP on 127.0.0.1 (a free port)."""
    from api.server import serve_app
    runtime = SharedRuntime(nats_url, spec or fresh_spec(), progress=False, service=service, **runtime_kw)
    app = shared_app(runtime, nats_url)
    stop, ready = asyncio.Event(), asyncio.get_running_loop().create_future()
    server = asyncio.create_task(serve_app(app, "127.0.0.1", 0, stop,
                                           on_ready=lambda host, port: ready.set_result(port)))
    await asyncio.wait({ready, server}, return_when=asyncio.FIRST_COMPLETED)
    if not ready.done():   # the app's startup failed (no ready then): its error, not a wait for ever
        server.result()
    port = ready.result()
    transport = HttpTransport(f"http://127.0.0.1:{port}", timeout=120)
    try:
        async def serving() -> bool:   # serving starts after the runtime's boot (journal replay)
            try:
                return (await transport.request("GET", "/capabilities", TOKENS["alice"])).status == 200
            except TransportError:   # not listening yet
                return False
        await wait_until_async(serving, "the scenario stack to answer /capabilities")
        yield runtime, transport
    finally:
        await transport.close()
        stop.set()
        await server


@contextlib.asynccontextmanager
async def quart_stack(nats_url: str, service: Any, spec: StreamSpec | None = None,
                      **runtime_kw: Any) -> AsyncIterator[tuple[SharedRuntime, QuartTransport]]:
    """The same through a Quart test client (no sockets)."""
    runtime = SharedRuntime(nats_url, spec or fresh_spec(), progress=False, service=service, **runtime_kw)
    async with shared_app(runtime, nats_url).test_app() as test_app:
        yield runtime, QuartTransport(test_app.test_client())


def runner_for(transport: Any, names: list[str], **kw: Any) -> Runner:
    parties = {n: Party(n, TOKENS[n], transport) for n in names}
    return Runner(parties, Model(names, grants={n: GRANTS[n] for n in names}), **kw)
