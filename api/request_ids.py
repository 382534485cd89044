"""Request ids: one per request, on every answer of every route, and on the request's log line.

A client-sent `x-request-id` is honoured when it is a sane token (1..128 of `A-Z a-z 0-9 . _ : -`,
starting with a letter or digit); otherwise one is generated: `req_` + 24 hex digits. The id goes
out as `x-request-id` (what the openai SDK reads into `_request_id`) and `request-id` (what the
anthropic SDK reads), and inside Anthropic error bodies as `request_id` (api.errors). Logger
`aotx.http` writes one structured line per request at info level (quiet at the default warning).
"""
from __future__ import annotations

import logging
import re
import secrets
import time

from quart import g, has_request_context, request

HEADER = "x-request-id"
ANTHROPIC_HEADER = "request-id"
_SANE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}")
_EXT = "aotx_request_ids"
log = logging.getLogger("aotx.http")


def current_request_id() -> str | None:
    """This request's id (decided on first use); None outside a request."""
    if not has_request_context():
        return None
    rid = g.get("request_id")
    if rid is None:
        rid = g.request_id = id_for(request.headers.get(HEADER, ""))
    return rid


def id_for(sent: str) -> str:
    """The id of a request whose client sent `sent` as its x-request-id ("" for none)."""
    return sent if _SANE.fullmatch(sent) else f"req_{secrets.token_hex(12)}"


def log_request(rid: str, method: str, path: str, status: int, began: float | None) -> None:
    """The request's `aotx.http` line (info level)."""
    if log.isEnabledFor(logging.INFO):
        log.info("request", extra={"fields": {
            "request_id": rid, "method": method, "path": path, "status": status,
            "ms": None if began is None else round((time.perf_counter() - began) * 1000, 3)}})


def install(app) -> None:
    """Stamp every response of `app` (idempotent: serve, the lone gateway and attach_shared all call it)."""
    if app.extensions.get(_EXT):
        return
    app.extensions[_EXT] = True

    @app.before_request
    async def _begin() -> None:
        g.request_began = time.perf_counter()
        current_request_id()

    @app.after_request
    async def _stamp(response):
        rid = current_request_id()
        response.headers[HEADER] = rid
        response.headers[ANTHROPIC_HEADER] = rid
        log_request(rid, request.method, request.path, response.status_code, g.get("request_began"))
        return response
