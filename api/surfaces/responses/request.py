"""POST /v1/responses: body -> ResponsesRequest (strict, params named)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from aotx.chat_types import ChatMessage, ToolCall, ToolSpec
from aotx.engine.types import SamplingParams
from aotx.tool_calls import forced_call_primer, tools_active
from api import fields, structured, unsupported
from api.budgets import decode_budget
from api.fields import bad
from api.stored_http import check_metadata
from api.surfaces.openai_messages import content_text, parse_tool_choice, parse_tools
from api.surfaces.response_items import as_items

LOGPROBS_INCLUDE = "message.output_text.logprobs"
_ROLES = {"user": "user", "assistant": "assistant", "system": "system", "developer": "system"}
_TEXT_PARTS = ("input_text", "output_text", "text")


@dataclass(frozen=True)
class ResponsesRequest:
    model: str
    messages: list[ChatMessage]
    tools: list[ToolSpec]
    tool_choice: str | None
    stream: bool
    logprobs: bool
    params: SamplingParams
    echo: dict = field(default_factory=dict)   # request fields echoed in the response object

    @property
    def parse_tools(self) -> bool:
        return tools_active(self.tools, self.tool_choice)

    @property
    def tool_primer(self) -> str:
        return forced_call_primer(self.tools, self.tool_choice)


def _output_text(raw: object, param: str) -> str:
    if isinstance(raw, str):
        return raw
    return content_text(raw, param, text_types=_TEXT_PARTS)


def parse_input(raw: object, *, name: str = "input", allow_empty: bool = False) -> list[ChatMessage]:
    """The chat messages of a response's input (a string or an array of items); errors name `name[k]`."""
    if isinstance(raw, str):
        return [ChatMessage("user", raw)]
    if not isinstance(raw, list) or not (raw or allow_empty):
        raise bad(name, f"'{name}' must be a string or a non-empty array of items.")
    out: list[ChatMessage] = []
    names: dict[str, str] = {}
    for k, item in enumerate(raw):
        where = f"{name}[{k}]"
        if not isinstance(item, dict):
            raise bad(where, f"'{where}' must be an object.")
        kind = item.get("type", "message")
        if kind == "message":
            role = _ROLES.get(item.get("role")) if isinstance(item.get("role"), str) else None
            if role is None:
                raise bad(f"{where}.role", f"'{where}.role' must be one of {sorted(_ROLES)}.")
            text = content_text(item.get("content"), f"{where}.content", text_types=_TEXT_PARTS)
            out.append(ChatMessage(role, text))
        elif kind == "function_call":
            for key in ("call_id", "name", "arguments"):
                if not isinstance(item.get(key), str):
                    raise bad(f"{where}.{key}", f"'{where}.{key}' must be a string.")
            call = ToolCall(item["call_id"], item["name"], item["arguments"])
            names[call.id] = call.name
            last = out[-1] if out else None
            if last is not None and last.role == "assistant":
                out[-1] = ChatMessage("assistant", last.content, last.tool_calls + (call,))
            else:
                out.append(ChatMessage("assistant", "", (call,)))
        elif kind == "function_call_output":
            cid = item.get("call_id")
            if not isinstance(cid, str):
                raise bad(f"{where}.call_id", f"'{where}.call_id' must be a string.")
            text = _output_text(item.get("output"), f"{where}.output")
            out.append(ChatMessage("tool", text, tool_call_id=cid, name=names.get(cid)))
        elif kind == "reasoning":
            continue
        elif kind == "item_reference":
            raise bad(where, "'item_reference' is not supported; replay full input instead.")
        else:
            raise bad(f"{where}.type", f"Unsupported input item type {kind!r} at '{where}'.")
    return out


def _echo_tools(tools: list[ToolSpec]) -> list[dict]:
    return [{"type": "function", "name": t.name, "description": t.description or None,
             "parameters": t.parameters, "strict": t.strict} for t in tools]


def parse_responses_request(body: dict, service, context: Sequence[dict] = ()) -> ResponsesRequest:
    """`context`: the stored items the response continues (previous_response_id's chain, or the
    conversation's items; api.surfaces.responses.stored_run), parsed before the input as one history."""
    model = fields.known_model(body, service)
    answer = structured.text_format(body)
    messages = parse_input(body.get("input"))
    if context:
        messages = parse_input(list(context) + as_items(body.get("input")))
    instructions = fields.opt_str(body, "instructions")
    if instructions:
        messages = [ChatMessage("system", instructions)] + messages
    tools = parse_tools(body.get("tools"), flat=True, strict_default=True)   # OpenAI: strict unless false
    tool_choice = parse_tool_choice(body.get("tool_choice"), tools, flat=True)
    include = fields.opt_list(body, "include") or []
    if not all(isinstance(x, str) for x in include):
        raise bad("include", "'include' must be an array of strings.")
    logprobs = LOGPROBS_INCLUDE in include
    top = fields.opt_int(body, "top_logprobs", None, 0, 20)
    unsupported.check_foreign_sampling(body, "responses")
    temperature, top_p = fields.sampling_numbers(body, service)
    budget = decode_budget(body, "max_output_tokens", service.default_max_tokens)
    metadata = check_metadata(body.get("metadata"))
    constraint = structured.constraint(service, answer, tools, tool_choice,
                                       forced_call_primer(tools, tool_choice),
                                       [f"tools[{k}].parameters" for k in range(len(tools))])
    params = SamplingParams(max_tokens=budget, temperature=temperature, top_p=top_p,
                            logprobs=(top or 0) if logprobs else None, constraint=constraint)
    raw_choice = body.get("tool_choice")
    echo = {"instructions": instructions, "metadata": metadata,
            "max_output_tokens": body.get("max_output_tokens"), "temperature": temperature,
            "top_p": top_p, "top_logprobs": top or 0,
            "parallel_tool_calls": fields.opt_bool(body, "parallel_tool_calls", True),
            "tool_choice": raw_choice if raw_choice is not None else "auto",
            "tools": _echo_tools(tools), "user": fields.opt_str(body, "user")}
    if answer is not None:      # the format it was constrained to, echoed as given (validated above)
        echo["text"] = {"format": body["text"]["format"]}
    return ResponsesRequest(model, messages, tools, tool_choice, fields.opt_bool(body, "stream"),
                            logprobs, params, echo)
