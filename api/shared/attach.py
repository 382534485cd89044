"""attach_shared: register the shared blueprint on an app and tie the runtime to its lifecycle."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from quart import Quart

from aotx.runtime import GrantedRuntime, RemoteRuntime, SharedRuntime

from .auth import normalise
from .routes import _EXT, make_blueprint


def attach_shared(app: Quart, runtime: SharedRuntime | GrantedRuntime | RemoteRuntime,
                  principals: Mapping[str, tuple[str, Iterable[str]]], *,
                  models: tuple[Mapping[str, Any], ...] = (), page_grant: int | None = None) -> None:
    """Serve /aotx/v1/shared on `app`.

    runtime: a SharedRuntime, a GrantedRuntime (the same behind the deployment grants; `aotx serve`)
    or a RemoteRuntime (forwarded over NATS request/reply; `aotx gateway`).

    principals: {sha256 hex of a bearer token: (principal name, {"shared_read", "shared_write",
    "shared_manage"} ⊆ actions)}. The runtime boots (journal replay) before serving starts and
    closes its log connection after serving stops; start() and stop() are idempotent, so a
    caller that booted it already may attach it as it is.
    """
    app.extensions[_EXT] = {"runtime": runtime, "principals": normalise(principals)}
    app.register_blueprint(make_blueprint(tuple(models), page_grant))

    @app.before_serving
    async def _start_shared_runtime() -> None:
        await runtime.start()

    @app.after_serving
    async def _stop_shared_runtime() -> None:
        await runtime.stop()
