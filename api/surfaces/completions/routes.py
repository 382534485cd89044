"""POST /v1/completions."""
from __future__ import annotations

import time

from api import structured
from api.budgets import ContextFit, context_fit
from api.errors import OPENAI, ApiError
from api.idempotency import admit_key, idempotent
from api.ids import new_id, system_fingerprint
from api.runner import collect, stream_events, submit_all
from api.sse import sse_response
from api.surfaces.completions.buffered import build_completion
from api.surfaces.completions.request import PromptInput, parse_completion_request
from api.surfaces.completions.stream import CompletionStreamProjector
from api.surfaces.route_kit import json_body, json_response, service, surface_blueprint

blueprint = surface_blueprint("completions", OPENAI)


async def _prompt_ids(svc, fit: ContextFit, prompt: PromptInput) -> list[int]:
    if prompt.text is not None:
        return await fit.prompt_ids(svc.text_prompt_ids, prompt.text)
    fit.check(len(prompt.token_ids))
    return prompt.token_ids


def _echo_text(svc, prompt: PromptInput) -> str:
    if prompt.text is not None:
        return prompt.text
    try:
        raw = b"".join(svc.token_bytes(t) for t in prompt.token_ids)
    except (IndexError, KeyError, ValueError) as exc:
        raise ApiError(400, f"'prompt' holds an invalid token id: {exc}", param="prompt") from None
    return raw.decode("utf-8", errors="replace")


@blueprint.post("/v1/completions")
@idempotent("completions")
async def completions():
    svc = service()
    body = await json_body()
    req = await structured.parsed(parse_completion_request, body, svc)
    fit = context_fit(svc, body, "max_tokens", prompt_field="prompt")
    prompt_ids = [await _prompt_ids(svc, fit, p) for p in req.prompts]
    echo = [_echo_text(svc, p) if req.echo else None for p in req.prompts]
    flat_ids = [ids for ids in prompt_ids for _ in range(req.n)]
    flat_echo = [e for e in echo for _ in range(req.n)]
    flat_params = req.params * len(req.prompts)
    await admit_key(body, stream=req.stream)   # Idempotency-Key (api.idempotency)
    lane = "stream" if req.stream else "buffered"
    handles = await submit_all(svc, flat_ids, flat_params, surface="completions", lane=lane)
    ident = dict(id=new_id("cmpl-"), created=int(time.time()), model=req.model,
                 fingerprint=system_fingerprint(svc.model_id), n=req.n, echo_texts=flat_echo,
                 logprobs=req.logprobs)
    if req.stream:
        projector = CompletionStreamProjector(**ident, include_usage=req.include_usage)
        return sse_response(stream_events(handles, projector))
    return json_response(build_completion(await collect(handles), **ident))
