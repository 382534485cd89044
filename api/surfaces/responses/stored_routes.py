"""Stored responses' routes (OpenAI's): GET /v1/responses/{id}, DELETE /v1/responses/{id},
GET /v1/responses/{id}/input_items. Everything read or deleted is the caller's own
(api.stored_access.caller_identity): another caller's id answers 404, exactly as an unknown one.
"""
from __future__ import annotations

from quart import request

from aotx.stored import DeleteResponse
from api.stored_access import caller_identity
from api.stored_http import checked, own_response, page_args, page_object, read_port
from api.surfaces.responses.resume import resume_stream
from api.surfaces.responses.routes import blueprint
from api.surfaces.responses.stored_object import response_object
from api.surfaces.route_kit import json_response


def _wants_stream() -> bool:
    return request.args.get("stream", "false").lower() not in ("false", "0", "")


@blueprint.get("/v1/responses/<response_id>")
async def retrieve_response(response_id: str):
    if _wants_stream():   # a resumable stream: `?stream=true&starting_after=N` (api.surfaces.responses.resume)
        return await resume_stream(response_id)
    _, _, view = await own_response(response_id)
    return json_response(response_object(view))


@blueprint.delete("/v1/responses/<response_id>")
async def delete_response(response_id: str):
    port, identity, _ = await own_response(response_id)
    checked(await port.record(identity, DeleteResponse(response_id)))
    return json_response({"id": response_id, "object": "response", "deleted": True})


@blueprint.get("/v1/responses/<response_id>/input_items")
async def list_input_items(response_id: str):
    port = read_port()
    page = checked(await port.reads.input_items(caller_identity(), response_id, **page_args()))
    return json_response(page_object(page))
