"""POST /v1/messages and POST /v1/messages/count_tokens."""
from __future__ import annotations

from api.errors import ANTHROPIC
from api.ids import new_id
from api.runner import collect, stream_events, submit_all
from api.sse import sse_response
from api.surfaces.messages.buffered import build_message
from api.surfaces.messages.request import MessagesRequest, parse_messages_request
from api.surfaces.messages.stream import MessagesStreamProjector
from api.surfaces.route_kit import json_body, json_response, service, surface_blueprint

blueprint = surface_blueprint("messages", ANTHROPIC)


def _prompt_ids(svc, req: MessagesRequest) -> list[int]:
    """The chat prompt (ending in an open assistant turn) plus any prefill, which the
    answer continues; the prefill is tokenized on its own after the turn header."""
    ids = svc.chat_prompt(req.messages, req.tools, req.tool_choice, primer=req.tool_primer)
    return ids + svc.text_prompt(req.prefill) if req.prefill else ids


@blueprint.post("/v1/messages")
async def messages():
    svc = service()
    req = parse_messages_request(await json_body(), svc)
    prompt = _prompt_ids(svc, req)
    lane = "stream" if req.stream else "buffered"
    handles = submit_all(svc, [prompt], [req.params], surface="messages", lane=lane)
    ident = dict(id=new_id("msg_"), model=req.model, input_tokens=len(prompt),
                 parse_tools=req.parse_tools, tool_primer=req.tool_primer)
    if req.stream:
        return sse_response(stream_events(handles, MessagesStreamProjector(**ident)))
    deltas = await collect(handles)
    return json_response(build_message(deltas[0], **ident))


@blueprint.post("/v1/messages/count_tokens")
async def count_tokens():
    svc = service()
    req = parse_messages_request(await json_body(), svc, count_only=True)
    return json_response({"input_tokens": len(_prompt_ids(svc, req))})
