"""A stored response as the Responses surface answers it, and a stored refusal in the OpenAI envelope.

The minimal form the background runs need (GET /v1/responses/{id} without `stream`, cancel's
answer): the stored request fields (`params` keeps what the response object echoes) and the stored
end. The stored-responses part (S2) owns the full GET; merge its object builder here.
"""
from __future__ import annotations

from typing import Any

from aotx.stored import Reason, ResponseStatus, ResponseView, StoredRefusal
from api.errors import ApiError

_ECHOED_APART = ("instructions", "metadata", "tools")   # CreateResponse keeps these in their own fields
_CODES = {Reason.HOLD: "journal_hold", Reason.FULL: "stored_full", Reason.TOO_LARGE: "stored_too_large"}


def stored_params(echo: dict[str, Any]) -> dict[str, Any]:
    """What CreateResponse.params keeps of the response object's echoed request fields."""
    return {k: v for k, v in echo.items() if k not in _ECHOED_APART}


def response_object(view: ResponseView) -> dict[str, Any]:
    completed = view.status is ResponseStatus.COMPLETED
    return {"id": view.id, "object": "response", "created_at": view.created_at, "model": view.model,
            "previous_response_id": view.previous_response_id, "text": {"format": {"type": "text"}},
            "truncation": "disabled", "store": True, "background": view.background, **view.params,
            "instructions": view.instructions, "metadata": view.metadata, "tools": view.tools,
            "status": view.status.wire, "error": view.error, "incomplete_details": view.incomplete_details,
            "completed_at": view.finished_at if completed else None, "output": view.output,
            "usage": view.usage}


def stored_error(refusal: StoredRefusal) -> ApiError:
    """The refusal in the surface's envelope: its status (404 unknown, 429 journal hold, …)."""
    return ApiError(refusal.status, refusal.message, param=refusal.param, code=_CODES.get(refusal.reason))
