"""Stored responses' routes (OpenAI's): GET /v1/responses/{id}, DELETE /v1/responses/{id},
GET /v1/responses/{id}/input_items. Everything read or deleted is the caller's own
(api.stored_access.caller_identity): another caller's id answers 404, exactly as an unknown one.
"""
from __future__ import annotations

from quart import request

from aotx.stored import DeleteResponse, ResponseStatus
from aotx.stored.queries import ResponseView
from api.errors import ApiError
from api.stored_access import caller_identity
from api.stored_http import checked, page_args, page_object, read_port
from api.surfaces.responses.routes import blueprint
from api.surfaces.route_kit import json_response


def response_object(view: ResponseView) -> dict:
    """The stored response as OpenAI's `response` object (the fields POST answered, rebuilt)."""
    return {"id": view.id, "object": "response", "created_at": view.created_at, "model": view.model,
            **view.params, "instructions": view.instructions, "metadata": view.metadata, "tools": view.tools,
            "previous_response_id": view.previous_response_id,
            "conversation": {"id": view.conversation} if view.conversation else None,
            "background": view.background, "status": view.status.wire, "error": view.error,
            "incomplete_details": view.incomplete_details,
            "completed_at": view.finished_at if view.status is ResponseStatus.COMPLETED else None,
            "output": view.output, "usage": view.usage}


def _wants_stream() -> bool:
    return request.args.get("stream", "false").lower() not in ("false", "0", "")


@blueprint.get("/v1/responses/<response_id>")
async def retrieve_response(response_id: str):
    port = read_port()
    identity = caller_identity()
    view = checked(port.reads.response(identity, response_id))
    if _wants_stream():
        # Resumable streams (issue 11 part 4, `?stream=true&starting_after=N`) plug in here.
        raise ApiError(400, "'stream' is not supported on a stored response here yet; retrieve it without "
                            "'stream'.", param="stream", code="unsupported_parameter")
    return json_response(response_object(view))


@blueprint.delete("/v1/responses/<response_id>")
async def delete_response(response_id: str):
    port = read_port()
    identity = caller_identity()
    checked(port.reads.response(identity, response_id))
    checked(await port.record(identity, DeleteResponse(response_id)))
    return json_response({"id": response_id, "object": "response", "deleted": True})


@blueprint.get("/v1/responses/<response_id>/input_items")
async def list_input_items(response_id: str):
    port = read_port()
    page = checked(port.reads.input_items(caller_identity(), response_id, **page_args()))
    return json_response(page_object(page))
