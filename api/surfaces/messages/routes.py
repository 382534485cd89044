"""POST /v1/messages and POST /v1/messages/count_tokens."""
from __future__ import annotations

from api import structured
from api.budgets import context_fit
from api.errors import ANTHROPIC
from api.idempotency import admit_key, idempotent
from api.ids import new_id
from api.runner import collect, stream_events, submit_all
from api.sse import sse_response
from api.surfaces.messages.buffered import build_message
from api.surfaces.messages.request import MessagesRequest, parse_messages_request
from api.surfaces.messages.stream import MessagesStreamProjector
from api.surfaces.route_kit import json_body, json_response, service, surface_blueprint

blueprint = surface_blueprint("messages", ANTHROPIC)


async def _prompt_ids(svc, body: dict, req: MessagesRequest) -> list[int]:
    """The chat prompt (ending in an open assistant turn) plus any prefill, which the
    answer continues; the prefill is tokenized on its own after the turn header. Built off
    the event loop; one that cannot fit the context (beside max_tokens) is a 400."""
    fit = context_fit(svc, body, "max_tokens", anthropic=True)
    return await fit.prompt_ids(svc.chat_prompt_ids, req.messages, req.tools, req.tool_choice,
                                primer=req.tool_primer, prefill=req.prefill)


@blueprint.post("/v1/messages")
@idempotent("messages")
async def messages():
    svc = service()
    body = await json_body()
    req = await structured.parsed(parse_messages_request, body, svc)
    prompt = await _prompt_ids(svc, body, req)
    await admit_key(body, stream=req.stream)   # Idempotency-Key (api.idempotency)
    lane = "stream" if req.stream else "buffered"
    handles = await submit_all(svc, [prompt], [req.params], surface="messages", lane=lane)
    ident = dict(id=new_id("msg_"), model=req.model, input_tokens=len(prompt),
                 parse_tools=req.parse_tools, tool_primer=req.tool_primer)
    if req.stream:
        return sse_response(stream_events(handles, MessagesStreamProjector(**ident)))
    deltas = await collect(handles)
    return json_response(build_message(deltas[0], **ident))


@blueprint.post("/v1/messages/count_tokens")
async def count_tokens():
    svc = service()
    body = await json_body()
    req = await structured.parsed(parse_messages_request, body, svc, count_only=True)
    # counted as /v1/messages would take it: a prompt too long for the context is the same 400
    return json_response({"input_tokens": len(await _prompt_ids(svc, {}, req))})
