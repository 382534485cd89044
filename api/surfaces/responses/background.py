"""POST /v1/responses with `background: true`: record the response, start its run, answer at once.

Background responses are stored (OpenAI: they need `store`): `store: false` with it is a 400, and so
is a gateway with no stored state (a bare create_app, without the shared runtime). During a journal
hold the request answers 429 (OpenAI envelope, code `journal_hold`) and stores nothing.

The answer: buffered, the response object with status `queued`; with `stream: true`, the SSE stream
of the run as it is saved — the same bytes every later reader gets from GET
/v1/responses/{id}?stream=true (resume.follow). The engine request is admitted first (a full engine
answers 429 before anything is stored); recording the response and starting its run are shielded from
the request, so a client that leaves at that moment leaves a run that goes on, never a stored response
that nothing runs.
"""
from __future__ import annotations

import asyncio
import time
from typing import Optional

from quart import Response, current_app

from aotx.stored import CreateResponse, Reason, StoredRefusal
from api import fields
from api.errors import ApiError
from api.ids import new_id
from api.runner import cancel_all, submit_all
from api.sse import sse_response
from api.stored_access import caller_identity
from api.stored_http import require_port
from api.surfaces.responses.background_stream import BackgroundProjector
from api.surfaces.responses.request import ResponsesRequest
from api.surfaces.responses.resume import follow
from api.surfaces.responses.runs import BackgroundRun, runs_of
from api.surfaces.response_items import as_items
from api.surfaces.responses.stored_object import stored_error, stored_params
from api.surfaces.route_kit import json_response



def wants_background(body: dict) -> bool:
    return fields.opt_bool(body, "background")


def _check(body: dict):
    port = require_port("background")
    if not fields.opt_bool(body, "store", True):
        raise ApiError(400, "'background' requires 'store': true: a background response is stored so that "
                            "it can be retrieved, streamed again and cancelled.", param="background")
    if port.on_hold():
        raise stored_error(StoredRefusal(Reason.HOLD, "a background response is stored", "background"))
    return port


async def start_background(svc, body: dict, req: ResponsesRequest, prompt: list[int], *,
                           items: Optional[list[dict]] = None, previous_response_id: Optional[str] = None,
                           conversation: Optional[str] = None, echo: Optional[dict] = None) -> Response:
    port = _check(body)
    identity = caller_identity()
    rid, created_at = new_id("resp_"), int(time.time())
    echo = {**req.echo, **(echo or {}), "store": True, "background": True}
    projector = BackgroundProjector(id=rid, created_at=created_at, model=req.model, echo=echo,
                                    parse_tools=req.parse_tools, logprobs=req.logprobs,
                                    tool_primer=req.tool_primer)
    queued = projector.response("queued")
    command = CreateResponse(rid, created_at, req.model, as_items(body.get("input")) if items is None else items,
                             instructions=req.echo["instructions"], tools=req.echo["tools"],
                             params=stored_params(echo), metadata=req.echo["metadata"],
                             previous_response_id=previous_response_id, conversation=conversation,
                             background=True)
    handles = await submit_all(svc, [prompt], [req.params], surface="responses", lane="stream" if req.stream else "buffered")
    runs = runs_of(current_app)

    async def begin():
        try:
            out = await port.record(identity, command)
        except BaseException:
            cancel_all(handles)
            raise
        if isinstance(out, StoredRefusal):
            cancel_all(handles)
            return out
        runs.start(BackgroundRun(port, identity, rid, handles[0], projector))
        return None

    refusal = await asyncio.shield(asyncio.ensure_future(begin()))
    if refusal is not None:
        raise stored_error(refusal)
    if req.stream:
        return sse_response(follow(port, identity, rid, None))
    return json_response(queued)
