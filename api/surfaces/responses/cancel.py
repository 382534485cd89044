"""POST /v1/responses/{id}/cancel: cancel a background response.

As OpenAI: only a response created with `background: true` can be cancelled (another one: 400); an
unknown id, or one of another identity, is a 404; cancelling one that has already ended (or
cancelling twice) answers its final object as it is (200). Otherwise the cancellation is journalled
(`stored.response.cancel_requested`), the run's engine request is cancelled at once, the run
journals its end (`cancelled`, with the output generated so far) and the answer is that final
object. A response whose run is not in this process (none should be: a boot ends every run left
unfinished) is ended `cancelled` here. A journal hold answers 429 and changes nothing.
"""
from __future__ import annotations

import asyncio

from quart import Response, current_app

from aotx.stored import CancelResponse, FinishResponse, Reason, ResponseStatus, StoredRefusal
from api.errors import ApiError
from api.stored_http import own_response
from api.surfaces.responses.runs import runs_of
from api.surfaces.responses.stored_object import response_object, stored_error
from api.surfaces.route_kit import json_response

END_TIMEOUT = 30.0    # seconds the answer waits for the run to journal its end


async def cancel_response(response_id: str) -> Response:
    port, identity, view = await own_response(response_id)
    if not view.background:
        raise ApiError(400, "Only responses created with 'background': true can be cancelled.", param="response_id")
    if not view.status.terminal:
        out = await port.record(identity, CancelResponse(response_id))
        if isinstance(out, StoredRefusal) and out.reason is not Reason.FINISHED:
            raise stored_error(out)
        if not isinstance(out, StoredRefusal) and not runs_of(current_app).cancel(response_id):
            ended = await port.record(identity, FinishResponse(response_id, ResponseStatus.CANCELLED))
            if isinstance(ended, StoredRefusal) and ended.reason is not Reason.FINISHED:
                raise stored_error(ended)
        view = await _ended(port, identity, response_id)
    return json_response(response_object(view))


async def _ended(port, identity: str, response_id: str):
    """The response once it has ended (at most END_TIMEOUT seconds: then as it is)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + END_TIMEOUT
    while True:
        view = await port.reads.response(identity, response_id)
        if isinstance(view, StoredRefusal):
            raise stored_error(view)
        left = deadline - loop.time()
        if view.status.terminal or left <= 0:
            return view
        await port.wait_events(identity, response_id, view.events, left)
