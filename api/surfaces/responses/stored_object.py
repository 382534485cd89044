"""A stored response as the Responses surface answers it (GET, cancel's answer, a background run's
object), and what CreateResponse keeps of the echoed request fields.

Refusals of the stored core map to OpenAI errors in one place: api.stored_http.refusal_error
(`stored_error` here is that function).
"""
from __future__ import annotations

from typing import Any

from aotx.stored import ResponseStatus, ResponseView
from api.stored_http import refusal_error as stored_error

__all__ = ["response_object", "stored_error", "stored_params"]

_ECHOED_APART = ("instructions", "metadata", "tools")   # CreateResponse keeps these in their own fields


def stored_params(echo: dict[str, Any]) -> dict[str, Any]:
    """What CreateResponse.params keeps of the response object's echoed request fields."""
    return {k: v for k, v in echo.items() if k not in _ECHOED_APART}


def response_object(view: ResponseView) -> dict[str, Any]:
    """The stored response as OpenAI's `response` object (the fields POST answered, rebuilt)."""
    completed = view.status is ResponseStatus.COMPLETED
    return {"id": view.id, "object": "response", "created_at": view.created_at, "model": view.model,
            "text": {"format": {"type": "text"}}, "truncation": "disabled", "store": True, **view.params,
            "instructions": view.instructions, "metadata": view.metadata, "tools": view.tools,
            "previous_response_id": view.previous_response_id,
            "conversation": {"id": view.conversation} if view.conversation else None,
            "background": view.background, "status": view.status.wire, "error": view.error,
            "incomplete_details": view.incomplete_details,
            "completed_at": view.finished_at if completed else None, "output": view.output, "usage": view.usage}
