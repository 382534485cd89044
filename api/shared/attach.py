"""attach_shared: register the shared blueprint on an app and tie the runtime to its lifecycle."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from quart import Quart

from aotx.media import MEDIA_BUCKET, NatsAuth, close_media, open_media
from aotx.runtime import RuntimePort
from api.app_common import install_common

from ..drain import drain_of
from .auth import normalise
from .fast import install as install_fast_path
from .routes import _EXT, MEDIA_MAX_BYTES, make_blueprint


def attach_shared(app: Quart, runtime: RuntimePort,
                  principals: Mapping[str, tuple[str, Iterable[str]]], *,
                  models: tuple[Mapping[str, Any], ...] = (), page_grant: int | None = None,
                  media_url: str | None = None, media_bucket: str = MEDIA_BUCKET,
                  media_max_bytes: int = MEDIA_MAX_BYTES, media_auth: NatsAuth | None = None) -> None:
    """Serve /aotx/v1/shared on `app`.

    runtime: a SharedRuntime, a GrantedRuntime (the same behind the deployment grants; `aotx serve`)
    or a RemoteRuntime (forwarded over NATS request/reply; `aotx gateway`).

    principals: {sha256 hex of a bearer token: (principal name, {"shared_read", "shared_write",
    "shared_manage"} ⊆ actions)}. The runtime boots (journal replay) before serving starts and
    closes its log connection after serving stops; start() and stop() are idempotent, so a
    caller that booted it already may attach it as it is.

    media_url: the nats-server holding the media object store (default: the runtime's nats_url, also a
    RemoteRuntime's, so a lone gateway stores media itself; none: POST /media answers 409 and inputs may
    reference no media);
    POST /media stores blobs of at most media_max_bytes there, in bucket media_bucket; media_auth: the
    credentials for it (default: the runtime's, with the runtime's URL).
    """
    inner = getattr(runtime, "runtime", runtime)  # a GrantedRuntime's SharedRuntime
    if media_url is None:
        media_url, media_auth = getattr(inner, "nats_url", None), media_auth or getattr(inner, "nats_auth", None)
    ext: dict[str, Any] = {"runtime": runtime, "principals": normalise(principals), "media": None,
                           "media_max_bytes": media_max_bytes, "media_nc": None}
    app.extensions[_EXT] = ext
    install_common(app)  # request ids, strict JSON, framework errors (405 + Allow) in the shared envelope
    app.register_blueprint(make_blueprint(tuple(models), page_grant))
    install_fast_path(app, ext)   # the mutation POSTs without Quart's request machinery (api.shared.fast)

    @app.before_serving
    async def _start_shared_runtime() -> None:
        await runtime.start()
        if media_url and ext["media"] is None:
            ext["media"], ext["media_nc"] = await open_media(media_url, media_bucket, media_auth)

    @app.after_serving
    async def _stop_shared_runtime() -> None:
        await drain_of(app).finish()   # shared SSE streams have ended
        try:
            await runtime.stop()
        finally:
            nc, ext["media"], ext["media_nc"] = ext["media_nc"], None, None
            await close_media(nc)


def replace_principals(app: Quart, principals: Mapping[str, tuple[str, Iterable[str]]]) -> None:
    """Swap the shared routes' principals (same mapping as attach_shared's) on a running app: the
    next request, and the next read of every open SSE stream, authenticate and grant by these.
    Malformed input raises ValueError and changes nothing. Every open stream reads again now."""
    ext = app.extensions[_EXT]
    ext["principals"] = normalise(principals)
    ext["runtime"].broker.resync_all()
