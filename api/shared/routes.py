"""The blueprint: every shared route, authenticated, answering JSON with Cache-Control: no-store.

The routes live by resource: participant.py (participant, capabilities, OpenAPI), spaces.py (spaces,
members, conversations, inputs, cancellations), operations.py (receipts, results), memory.py
(memory, publications), media.py (uploads), streams.py (the SSE streams); common.py holds what they
share. Bearer parsing is api.auth's, errors are api.errors' shared envelope, SSE framing api.sse's.
"""

from __future__ import annotations

from typing import Any, Mapping

from quart import Blueprint, g, request
from werkzeug.exceptions import HTTPException

from ..errors import ApiError, shared_error_response
from . import memory, operations, participant, spaces, streams
from .auth import BOOTING, UNAUTHORIZED, UNAUTHORIZED_HEADERS, authenticate
from .common import BASE_PATH, EXT, http_error, runtime, shared
from .media import MEDIA_MAX_BYTES
from .media import register as register_media

_EXT = EXT   # the app extension's key (attach.py, api/config_reload.py)
__all__ = ["BASE_PATH", "MEDIA_MAX_BYTES", "make_blueprint"]


def make_blueprint(models: tuple[Mapping[str, Any], ...] = (), page_grant: int | None = None) -> Blueprint:
    bp = Blueprint("aotx_shared", __name__, url_prefix=BASE_PATH)

    @bp.before_request
    async def _authenticate():
        found = authenticate(shared()["principals"], request.headers.get("Authorization"))
        if found is None:
            return shared_error_response(UNAUTHORIZED, UNAUTHORIZED_HEADERS)
        g.shared_actor, g.shared_token = found[0].actor, found[1]
        if not runtime().started:
            return shared_error_response(BOOTING)
        return None

    @bp.after_request
    async def _no_store(response):
        response.headers["Cache-Control"] = "no-store"
        return response

    @bp.errorhandler(ApiError)
    async def _api_error(err: ApiError):
        return shared_error_response(err)

    @bp.errorhandler(HTTPException)
    async def _http(exc: HTTPException):
        return shared_error_response(http_error(exc))

    participant.register(bp, tuple(models), page_grant)
    spaces.register(bp)
    operations.register(bp)
    memory.register(bp)
    register_media(bp)
    streams.register(bp)

    @bp.route("/<path:rest>", methods=["GET", "POST", "PUT", "PATCH", "DELETE"])
    async def unknown(rest: str):
        raise ApiError(404, f"no shared route {BASE_PATH}/{rest}", type="not_found")

    return bp
