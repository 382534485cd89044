"""GET /v1/responses/{id} without `stream`: the stored response as it is now (queued, in_progress,
completed, …). Minimal (what background runs need); the stored-responses part's GET replaces it,
keeping the `stream=true` hook of routes.retrieve (resume.resume_stream)."""
from __future__ import annotations

from quart import Response

from aotx.stored import StoredRefusal
from api.stored_access import caller_identity, stored_port
from api.surfaces.responses.resume import unknown
from api.surfaces.responses.stored_object import response_object, stored_error
from api.surfaces.route_kit import json_response


async def retrieve_response(response_id: str) -> Response:
    port = stored_port()
    if port is None:
        raise unknown(response_id)
    view = port.reads.response(caller_identity(), response_id)
    if isinstance(view, StoredRefusal):
        raise stored_error(view)
    return json_response(response_object(view))
