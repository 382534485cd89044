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

# CreateResponse keeps these in fields of its own (response_object renders them from there)
_KEPT_APART = frozenset(("id", "object", "created_at", "model", "instructions", "tools", "metadata",
                         "previous_response_id", "conversation", "background"))


def stored_params(fields: dict[str, Any]) -> dict[str, Any]:
    """What CreateResponse.params keeps of a response object's fields (its base, or the echoed request
    fields): everything CreateResponse does not keep in a field of its own."""
    return {k: v for k, v in fields.items() if k not in _KEPT_APART}


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
