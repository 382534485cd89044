"""POST /v1/responses."""
from __future__ import annotations

import time

from api.budgets import context_fit
from api.errors import OPENAI
from api.idempotency import admit_key, idempotent
from api.ids import new_id
from api.runner import collect, stream_events, submit_all
from api.sse import sse_response
from api.surfaces.responses.buffered import build_response
from api.surfaces.responses.request import parse_responses_request
from api.surfaces.responses.stream import ResponsesStreamProjector
from api.surfaces.route_kit import json_body, json_response, service, surface_blueprint

blueprint = surface_blueprint("responses", OPENAI)


@blueprint.post("/v1/responses")
@idempotent("responses")
async def responses():
    svc = service()
    body = await json_body()
    req = parse_responses_request(body, svc)
    fit = context_fit(svc, body, "max_output_tokens", prompt_field="input", output_word="output")
    prompt = await fit.prompt_ids(svc.chat_prompt_ids, req.messages, req.tools, req.tool_choice,
                                  primer=req.tool_primer)
    await admit_key(body, stream=req.stream)   # Idempotency-Key (api.idempotency)
    lane = "stream" if req.stream else "buffered"
    handles = submit_all(svc, [prompt], [req.params], surface="responses", lane=lane)
    ident = dict(id=new_id("resp_"), created_at=int(time.time()), model=req.model,
                 echo=req.echo, parse_tools=req.parse_tools, logprobs=req.logprobs,
                 tool_primer=req.tool_primer)
    if req.stream:
        return sse_response(stream_events(handles, ResponsesStreamProjector(**ident)))
    deltas = await collect(handles)
    return json_response(build_response(deltas[0], **ident))
