"""POST /v1/responses and POST /v1/responses/{id}/cancel. Stored responses: what a request continues and
whether it is stored in stored_plan / stored_run, their reads in stored_routes; background runs and
resumable streams in background / runs / resume / cancel; Idempotency-Key in api.idempotency."""
from __future__ import annotations

import time

from quart import current_app

from api.errors import OPENAI
from api.idempotency import admit_key, idempotent
from api.idempotency.gate import bound_gate
from api.ids import new_id
from api.runner import stream_events, submit_all
from api.sse import sse_response
from api.surfaces.responses.background import start_background, wants_background
from api.surfaces.responses.bound_run import BoundRun, render_stored
from api.surfaces.responses.cancel import cancel_response
from api.surfaces.responses.runs import runs_of
from api.surfaces.responses.stored_plan import fit_prompt, plan_for
from api.surfaces.responses.stored_run import run_for
from api.surfaces.responses.stream import ResponsesStreamProjector
from api.surfaces.route_kit import json_body, json_response, service, surface_blueprint

blueprint = surface_blueprint("responses", OPENAI)


@blueprint.post("/v1/responses")
@idempotent("responses")
async def responses():
    svc = service()
    body = await json_body()
    plan = await plan_for(body)
    req, prompt = await fit_prompt(plan, body, svc)
    background = wants_background(body)
    response_id = new_id("resp_")
    # Idempotency-Key (api.idempotency); a stored foreground response is the key's answer (saved once)
    await admit_key(body, stream=req.stream, bound=response_id if plan.store and not background else None,
                    render=render_stored)
    if background:
        return await start_background(svc, body, req, prompt, items=plan.input_items or None,
                                      previous_response_id=plan.previous_response_id,
                                      conversation=plan.conversation, echo=plan.echo)
    ident = dict(id=response_id, created_at=int(time.time()), model=req.model,
                 echo={**req.echo, **plan.echo}, parse_tools=req.parse_tools, logprobs=req.logprobs,
                 tool_primer=req.tool_primer)
    projector = ResponsesStreamProjector(**ident)
    gate = bound_gate() if plan.store else None   # a keyed stored response: the key's answer, saved once
    run = BoundRun(plan, ident, gate) if gate is not None else run_for(plan, ident)
    lane = "stream" if req.stream else "buffered"
    # CreateResponse is journalled while the engine starts; the answer waits for it (stored_run.begin)
    handles = await run.begin(projector.base, lambda: submit_all(svc, [prompt], [req.params], surface="responses",
                                                                 lane=lane))
    if req.stream:
        return sse_response(run.stream(stream_events(handles, projector), projector))
    return json_response(await run.buffered(handles, ident))


@blueprint.post("/v1/responses/<response_id>/cancel")
async def cancel(response_id: str):
    return await cancel_response(response_id)


@blueprint.after_app_serving
async def _finish_background_runs():
    """After the drain stopped the engine: every background run journals its end (api.surfaces.responses.runs)."""
    await runs_of(current_app).finish()
