"""What every shared route module uses: the app's shared extension, answers, query-string counters.

Errors are `api.errors.ApiError` with the shared `type`, raised or rendered with
`shared_error_response` (the blueprint's handler renders a raised one); JSON answers go through
the app's JSON provider (jsonify), with Cache-Control: no-store (the blueprint adds it).
"""

from __future__ import annotations

import re
from typing import Any, Mapping

from quart import current_app, g, jsonify, request
from werkzeug.exceptions import HTTPException

from aotx.runtime import Outcome, RuntimePort
from aotx.runtime.read_fresh import retry_after
from aotx.state import Refusal

from ..errors import ApiError, with_id
from ..request_ids import current_request_id

BASE_PATH = "/aotx/v1/shared"
EXT = "aotx_shared"
_DECIMAL_MAX = 20
# ASCII only: str.isdigit() also holds for "²", "١", "１", which int() refuses or reads as numbers
_CANONICAL_DECIMAL = re.compile(rf"0|[1-9][0-9]{{0,{_DECIMAL_MAX - 1}}}")


def shared() -> dict[str, Any]:
    """The app's shared extension: runtime, principals, media store and its cap."""
    return current_app.extensions[EXT]


def runtime() -> RuntimePort:
    return shared()["runtime"]


def actor() -> Any:
    """The authenticated principal's actor (set by the blueprint's authentication)."""
    return g.shared_actor


def answer_body(status: int, body: Any, rid: str | None) -> Any:
    """What a JSON answer carries: an error body gets the request's id (api.errors)."""
    if status >= 400 and isinstance(body, dict) and "error" in body:
        return with_id(body, rid)
    return body


def json_answer(status: int, body: Mapping[str, Any]):
    response = jsonify(answer_body(status, body, current_request_id()))
    response.status_code = status
    return response


def answer_parts(result: Any) -> tuple[int, Any, dict[str, str]]:
    """A runtime's result as (status, JSON body, extra headers): the one reading of it, for the routes
    here and for the fast path (api.shared.fast)."""
    if isinstance(result, Refusal):
        return result.status, result.error(), {}
    if isinstance(result, Outcome):
        wait = retry_after(result)   # a runtime behind the log (503 lagging): when to ask again
        return result.status, result.body, {} if wait is None else {"Retry-After": str(wait)}
    return 200, result, {}


def answer(result: Any):
    status, body, headers = answer_parts(result)
    response = json_answer(status, body)
    for name, value in headers.items():
        response.headers[name] = value
    return response


def http_error(exc: HTTPException) -> ApiError:
    """A framework error (404, 405, 408, 413, ...) as the shared envelope's ApiError."""
    return ApiError(exc.code or 500, exc.description or exc.name, type=exc.name.lower().replace(" ", "_"))


def invalid(message: str) -> ApiError:
    return ApiError(400, message, type="invalid_request")


def canonical_decimal(text: str) -> int | None:
    """The value of a canonical ASCII decimal string (no sign, no leading zero, at most 20 digits); else None.
    Every counter a client puts in a query string or a Last-Event-ID is read with this."""
    return int(text) if _CANONICAL_DECIMAL.fullmatch(text) else None


def query_int(name: str, default: int) -> int:
    text = request.args.get(name)
    if text is None:
        return default
    value = canonical_decimal(text)
    if value is None:
        raise invalid(f"query parameter {name} must be a canonical decimal string of ASCII digits, got {text!r}")
    return value


def resume_cursor(path: str, name: str) -> int:
    """?{name}= when given; else the cursor of a Last-Event-ID of this stream (`path@cursor`); else 0."""
    if request.args.get(name) is not None:
        return query_int(name, 0)
    last = request.headers.get("Last-Event-ID")
    if last is None:
        return 0
    prefix = f"{BASE_PATH}{path}@"
    value = canonical_decimal(last[len(prefix):]) if last.startswith(prefix) else None
    if value is None:
        raise invalid(f"Last-Event-ID {last!r} is not an event ID of {prefix}<cursor> (ASCII decimal)")
    return value


def read(view: str):
    """GET of one named view with the route's arguments (its `query_view`: the fast path, api.shared.fast,
    serves such a rule's GETs without a query string)."""
    async def handler(**kwargs: Any):
        return answer(await runtime().query(view, actor(), **kwargs))
    handler.query_view = view   # type: ignore[attr-defined]
    return handler


def space_list(view: str):
    """GET /spaces/{space}/<view>: one page (cursor, limit) of what the space holds."""
    async def handler(space: str):
        return answer(await runtime().query(view, actor(), space=space, cursor=query_int("cursor", 0),
                                            limit=query_int("limit", 100)))
    return handler
