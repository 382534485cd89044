"""POST /v1/chat/completions: body -> ChatRequest (strict, params named)."""
from __future__ import annotations

from dataclasses import dataclass, replace

from aotx.chat_types import ChatMessage, ToolSpec
from aotx.engine.types import SamplingParams
from aotx.tool_calls import forced_call_primer, tools_active
from api import fields, structured
from api.budgets import chat_budget
from api.errors import ApiError
from api.sampling_params import openai_sampling
from api.surfaces.openai_messages import parse_chat_messages, parse_tool_choice, parse_tools

MAX_N = 16


@dataclass(frozen=True)
class ChatRequest:
    model: str
    messages: list[ChatMessage]
    tools: list[ToolSpec]
    tool_choice: str | None
    stream: bool
    include_usage: bool
    logprobs: bool
    params: list[SamplingParams]       # one per choice (seed + i)

    @property
    def parse_tools(self) -> bool:
        return tools_active(self.tools, self.tool_choice)

    @property
    def tool_primer(self) -> str:
        return forced_call_primer(self.tools, self.tool_choice)


def parse_chat_request(body: dict, service) -> ChatRequest:
    model = fields.known_model(body, service)
    messages = parse_chat_messages(body.get("messages"))
    if body.get("functions") is not None or body.get("function_call") is not None:
        raise ApiError(400, "Legacy 'functions'/'function_call' are not supported; use 'tools' "
                            "and 'tool_choice'.", param="functions")
    answer = structured.response_format(body)
    tools = parse_tools(body.get("tools"), flat=False)
    tool_choice = parse_tool_choice(body.get("tool_choice"), tools, flat=False)
    stream = fields.opt_bool(body, "stream")
    options = fields.opt_object(body, "stream_options") or {}
    include_usage = stream and fields.opt_bool(options, "include_usage")
    n = fields.opt_int(body, "n", 1, 1, MAX_N)
    seed = fields.opt_int(body, "seed", None)
    logprobs = fields.opt_bool(body, "logprobs")
    top = fields.opt_int(body, "top_logprobs", None, 0, 20)
    if top is not None and not logprobs:
        raise ApiError(400, "'top_logprobs' requires 'logprobs' to be true.", param="top_logprobs")
    temperature, top_p = fields.sampling_numbers(body, service)
    constraint = structured.constraint(
        service, answer, tools, tool_choice, forced_call_primer(tools, tool_choice),
        [f"tools[{k}].function.parameters" for k in range(len(tools))])
    base = SamplingParams(
        max_tokens=chat_budget(body, service.default_max_tokens), temperature=temperature,
        top_p=top_p, seed=seed, stop=fields.stop_strings(body, "stop"),
        logprobs=(top or 0) if logprobs else None, **openai_sampling(body, service.vocab_size),
        constraint=constraint)
    params = [base if seed is None else replace(base, seed=seed + i) for i in range(n)]
    return ChatRequest(model, messages, tools, tool_choice, stream, include_usage, logprobs, params)
