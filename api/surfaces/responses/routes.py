"""POST /v1/responses; GET /v1/responses/{id} and POST /v1/responses/{id}/cancel (stored responses:
background runs and resumable streams in background / resume / cancel)."""
from __future__ import annotations

import time

from api.budgets import context_fit
from api.errors import OPENAI
from api.ids import new_id
from api.runner import collect, stream_events, submit_all
from api.sse import sse_response
from api.surfaces.responses.background import start_background, wants_background
from api.surfaces.responses.buffered import build_response
from api.surfaces.responses.cancel import cancel_response
from api.surfaces.responses.request import parse_responses_request
from api.surfaces.responses.resume import resume_stream
from api.surfaces.responses.retrieve import retrieve_response
from api.surfaces.responses.runs import runs_of
from api.surfaces.responses.stream import ResponsesStreamProjector
from api.surfaces.route_kit import json_body, json_response, service, surface_blueprint
from quart import current_app, request

blueprint = surface_blueprint("responses", OPENAI)


@blueprint.post("/v1/responses")
async def responses():
    svc = service()
    body = await json_body()
    req = parse_responses_request(body, svc)
    fit = context_fit(svc, body, "max_output_tokens", prompt_field="input", output_word="output")
    prompt = await fit.prompt_ids(svc.chat_prompt_ids, req.messages, req.tools, req.tool_choice,
                                  primer=req.tool_primer)
    if wants_background(body):
        return await start_background(svc, body, req, prompt)
    lane = "stream" if req.stream else "buffered"
    handles = submit_all(svc, [prompt], [req.params], surface="responses", lane=lane)
    ident = dict(id=new_id("resp_"), created_at=int(time.time()), model=req.model,
                 echo=req.echo, parse_tools=req.parse_tools, logprobs=req.logprobs,
                 tool_primer=req.tool_primer)
    if req.stream:
        return sse_response(stream_events(handles, ResponsesStreamProjector(**ident)))
    deltas = await collect(handles)
    return json_response(build_response(deltas[0], **ident))


@blueprint.get("/v1/responses/<response_id>")
async def retrieve(response_id: str):
    if request.args.get("stream", "").lower() == "true":
        return await resume_stream(response_id)
    return await retrieve_response(response_id)


@blueprint.post("/v1/responses/<response_id>/cancel")
async def cancel(response_id: str):
    return await cancel_response(response_id)


@blueprint.after_app_serving
async def _finish_background_runs():
    """After the drain stopped the engine: every background run journals its end (api.surfaces.responses.runs)."""
    await runs_of(current_app).finish()
