"""What the OpenAI stored surfaces (stored Responses, Conversations) share on the wire: the port or a
precise refusal where the app has none, refusals of the stored core as OpenAI errors, list paging
arguments and objects, and OpenAI's metadata bounds.

A refusal of the stored core (aotx.stored.StoredRefusal) becomes an ApiError in the OpenAI envelope
with its status — 404 unknown (another identity's records read exactly as unknown ones), 400 malformed
or a bad cursor, 409 a conflict, 413 too large, 422 a mismatch, 429 during a journal hold — except two
that are no fault of the server's code: a full stored table or byte budget is a 400
`stored_limit_reached` (never a 5xx), and a stopped runtime is the shutdown's 503.
"""
from __future__ import annotations

from typing import Any

from quart import request

from aotx.stored import Reason, StoredRefusal
from aotx.stored.port import StoredJournal
from api.errors import ApiError, shutting_down
from api.stored_access import caller_identity, stored_port

NO_STORE = ("this gateway keeps no stored state (it was started without a stored port, e.g. a bare "
            "create_app(service)); send 'store': false and replay the full input instead")
MAX_METADATA_PAIRS, MAX_METADATA_KEY, MAX_METADATA_VALUE = 16, 64, 512
MAX_PAGE = 100

_CODES = {Reason.UNKNOWN: "not_found", Reason.HOLD: "journal_hold", Reason.MISMATCH: "idempotency_mismatch",
          Reason.TOO_LARGE: "request_too_large", Reason.BAD_CURSOR: "invalid_cursor"}


def require_port(param: str | None = None) -> StoredJournal:
    """The stored port, or a 400 naming `param` that says this app stores nothing."""
    port = stored_port()
    if port is None:
        raise ApiError(400, f"'{param}' needs stored state, but {NO_STORE}." if param else
                       f"This route needs stored state, but {NO_STORE}.", param=param, code="store_unavailable")
    return port


def read_port() -> StoredJournal:
    """The stored port for a read; where there is none nothing was ever stored: 404."""
    port = stored_port()
    if port is None:
        raise ApiError(404, f"Nothing is stored here: {NO_STORE}.", code="not_found")
    return port


def refusal_error(refusal: StoredRefusal) -> ApiError:
    if refusal.reason is Reason.FULL:
        return ApiError(400, f"Stored state is full: {refusal.message}. Delete stored responses or "
                             "conversations, or wait for retention to free room.", param=refusal.param,
                        code="stored_limit_reached")
    if refusal.reason is Reason.UNAVAILABLE:
        return shutting_down(f"Stored state is unavailable: {refusal.message}.")
    if refusal.reason is Reason.HOLD:
        return ApiError(429, "The journal is on hold: nothing was stored; retry later. "
                             f"({refusal.message})", param=refusal.param, code="journal_hold")
    return ApiError(refusal.status, refusal.message, param=refusal.param, code=_CODES.get(refusal.reason))


async def own_response(response_id: str) -> tuple[StoredJournal, str, Any]:
    """(port, caller identity, the stored response view) for a route about one stored response; 404
    where it is unknown, another caller's, or the app stores nothing."""
    port = read_port()
    identity = caller_identity()
    return port, identity, checked(await port.reads.response(identity, response_id))


def checked(result: Any) -> Any:
    """`result` itself, or the refusal it is raised as an ApiError."""
    if isinstance(result, StoredRefusal):
        raise refusal_error(result)
    return result


def page_args() -> dict:
    """`after`, `limit` (1..100, default 20) and `order` (asc | desc, default desc) of the query string."""
    args = request.args
    raw_limit = args.get("limit")
    limit = 20
    if raw_limit is not None:
        if not raw_limit.isdigit() or not 1 <= int(raw_limit) <= MAX_PAGE:
            raise ApiError(400, f"'limit' must be an integer in 1..{MAX_PAGE}; got {raw_limit[:40]!r}.",
                           param="limit", code="invalid_cursor")
        limit = int(raw_limit)
    order = args.get("order", "desc")
    if order not in ("asc", "desc"):
        raise ApiError(400, f"'order' must be 'asc' or 'desc'; got {order[:40]!r}.", param="order",
                       code="invalid_cursor")
    after = args.get("after")
    return {"after": after or None, "limit": limit, "order": order}


def page_object(page) -> dict:
    return {"object": "list", "data": page.data, "first_id": page.first_id, "last_id": page.last_id,
            "has_more": page.has_more}


def check_metadata(value: Any, param: str = "metadata") -> dict:
    """OpenAI's metadata: an object of at most 16 pairs, keys ≤ 64 characters, values strings ≤ 512."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ApiError(400, f"'{param}' must be an object.", param=param)
    if len(value) > MAX_METADATA_PAIRS:
        raise ApiError(400, f"'{param}' has {len(value)} pairs; at most {MAX_METADATA_PAIRS} are allowed.",
                       param=param)
    for key, item in value.items():
        if len(key) > MAX_METADATA_KEY:
            raise ApiError(400, f"'{param}' key {key[:40]!r}… is longer than {MAX_METADATA_KEY} characters.",
                           param=param)
        if not isinstance(item, str):
            raise ApiError(400, f"'{param}.{key}' must be a string.", param=f"{param}.{key}")
        if len(item) > MAX_METADATA_VALUE:
            raise ApiError(400, f"'{param}.{key}' is longer than {MAX_METADATA_VALUE} characters.",
                           param=f"{param}.{key}")
    return value
