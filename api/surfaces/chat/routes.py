"""POST /v1/chat/completions."""
from __future__ import annotations

import time

from api import structured
from api.budgets import context_fit
from api.errors import OPENAI
from api.idempotency import admit_key, idempotent
from api.ids import new_id, system_fingerprint
from api.runner import collect, stream_events, submit_all
from api.sse import sse_response
from api.surfaces.chat.buffered import build_chat_completion
from api.surfaces.chat.request import parse_chat_request
from api.surfaces.chat.stream import ChatStreamProjector
from api.surfaces.route_kit import json_body, json_response, service, surface_blueprint

blueprint = surface_blueprint("chat", OPENAI)


@blueprint.post("/v1/chat/completions")
@idempotent("chat.completions")
async def chat_completions():
    svc = service()
    body = await json_body()
    req = await structured.parsed(parse_chat_request, body, svc)   # a schema compiles off the loop
    fit = context_fit(svc, body, "max_tokens", "max_completion_tokens")
    prompt = await fit.prompt_ids(svc.chat_prompt_ids, req.messages, req.tools, req.tool_choice,
                                  primer=req.tool_primer)
    await admit_key(body, stream=req.stream)   # Idempotency-Key (api.idempotency)
    lane = "stream" if req.stream else "buffered"
    handles = await submit_all(svc, [prompt] * len(req.params), req.params, surface="chat", lane=lane)
    ident = dict(id=new_id("chatcmpl-"), created=int(time.time()), model=req.model,
                 fingerprint=system_fingerprint(svc.model_id))
    if req.stream:
        projector = ChatStreamProjector(**ident, n=len(req.params), parse_tools=req.parse_tools,
                                        tool_primer=req.tool_primer, include_usage=req.include_usage, logprobs=req.logprobs)
        return sse_response(stream_events(handles, projector))
    deltas = await collect(handles)
    return json_response(build_chat_completion(deltas, **ident, parse_tools=req.parse_tools,
                                               logprobs=req.logprobs, tool_primer=req.tool_primer))
