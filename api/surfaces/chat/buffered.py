"""Chat Completions buffered builder: every choice's Deltas -> chat.completion."""
from __future__ import annotations

from typing import Sequence

from aotx.engine.types import Delta
from api.decode import ChoiceDecoder, ErrorOut, FinishOut, TextOut, ToolArgs, ToolStart
from api.errors import engine_failure
from api.ids import new_id
from api.logprobs import chat_logprobs
from api.surfaces.openai_chunks import usage_object


def _choice(index: int, deltas: Sequence[Delta], parse_tools: bool, logprobs: bool,
            tool_primer: str = "") -> tuple:
    decoder = ChoiceDecoder(parse_tools, tool_primer, logprobs, buffered=True)
    text, calls, lps, finish = [], [], [], None
    for delta in deltas:
        for out in decoder.feed(delta):
            if isinstance(out, TextOut):
                text.append(out.text)
                lps.extend(out.logprobs)
            elif isinstance(out, ToolStart):
                calls.append({"id": new_id("call_"), "type": "function",
                              "function": {"name": out.name, "arguments": ""}})
            elif isinstance(out, ToolArgs):
                calls[out.index]["function"]["arguments"] += out.fragment
            elif isinstance(out, FinishOut):
                finish = out.reason
            elif isinstance(out, ErrorOut):
                raise engine_failure(out.message)
    if finish is None:
        raise engine_failure("generation ended without a finish")
    content = "".join(text)
    message = {"role": "assistant", "content": content if content or not calls else None,
               "refusal": None, "annotations": []}
    if calls:
        message["tool_calls"] = calls
    choice = {"index": index, "message": message,
              "logprobs": chat_logprobs(lps) if logprobs else None, "finish_reason": finish}
    return choice, decoder


def build_chat_completion(deltas: Sequence[Sequence[Delta]], *, id: str, created: int,
                          model: str, fingerprint: str, parse_tools: bool,
                          logprobs: bool, tool_primer: str = "") -> dict:
    built = [_choice(i, d, parse_tools, logprobs, tool_primer) for i, d in enumerate(deltas)]
    prompt = max(dec.prompt_tokens for _, dec in built)
    completion = sum(dec.completion_tokens for _, dec in built)
    return {"id": id, "object": "chat.completion", "created": created, "model": model,
            "system_fingerprint": fingerprint, "service_tier": None,
            "choices": [c for c, _ in built], "usage": usage_object(prompt, completion)}
