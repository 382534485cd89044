"""POST /v1/messages (and count_tokens): body -> MessagesRequest (strict, params named)."""
from __future__ import annotations

import json
from dataclasses import dataclass

from aotx.chat_types import ChatMessage, ToolCall, ToolSpec
from aotx.engine.types import SamplingParams
from aotx.tool_calls import forced_call_primer, named_choice, tools_active
from api import fields, structured, unsupported
from api.budgets import decode_budget
from api.fields import bad
from api.tool_schemas import check_tool_schema
from api.unsupported import MEDIA_PARTS, refuse_media

_SKIPPED_BLOCKS = ("thinking", "redacted_thinking")


@dataclass(frozen=True)
class MessagesRequest:
    model: str
    messages: list[ChatMessage]
    prefill: str                  # a trailing assistant turn: the answer continues it
    tools: list[ToolSpec]
    tool_choice: str | None
    stream: bool
    params: SamplingParams | None  # None for count_tokens

    @property
    def parse_tools(self) -> bool:
        return tools_active(self.tools, self.tool_choice)

    @property
    def tool_primer(self) -> str:
        """A client's prefill already opens the answer; then it wins over a forced call."""
        return "" if self.prefill else forced_call_primer(self.tools, self.tool_choice)


def _text_of(content: object, param: str) -> str:
    """A string, or text blocks only (system prompts, tool_result contents)."""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad(param, f"'{param}' must be a string or an array of text blocks.")
    texts = []
    for k, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in MEDIA_PARTS:
            raise refuse_media(kind, f"{param}[{k}]")
        if kind != "text" or not isinstance(block.get("text"), str):
            raise bad(f"{param}[{k}]", f"'{param}[{k}]' must be a text block.")
        texts.append(block["text"])
    return "".join(texts)


def _message(msg: object, where: str, names: dict[str, str]) -> list[ChatMessage]:
    if not isinstance(msg, dict):
        raise bad(where, f"'{where}' must be an object.")
    role = msg.get("role")
    if role not in ("user", "assistant", "system"):
        raise bad(f"{where}.role", f"'{where}.role' must be 'user' or 'assistant'; got {role!r}.")
    content = msg.get("content")
    if isinstance(content, str):
        return [ChatMessage(role, content)]
    if not isinstance(content, list):
        raise bad(f"{where}.content", f"'{where}.content' must be a string or an array of blocks.")
    texts, calls, results = [], [], []
    for k, block in enumerate(content):
        param = f"{where}.content[{k}]"
        kind = block.get("type") if isinstance(block, dict) else None
        if kind in MEDIA_PARTS:
            raise refuse_media(kind, param)
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
        elif kind == "tool_use" and role == "assistant":
            if not isinstance(block.get("id"), str) or not isinstance(block.get("name"), str) \
                    or not isinstance(block.get("input", {}), dict):
                raise bad(param, f"'{param}' must have string id and name and an object input.")
            names[block["id"]] = block["name"]
            calls.append(ToolCall(block["id"], block["name"],
                                  json.dumps(block.get("input", {}), ensure_ascii=False)))
        elif kind == "tool_result" and role == "user":
            cid = block.get("tool_use_id")
            if not isinstance(cid, str):
                raise bad(f"{param}.tool_use_id", f"'{param}.tool_use_id' must be a string.")
            text = _text_of(block.get("content", ""), f"{param}.content")
            if block.get("is_error") is True:
                text = f"Error: {text}"
            results.append(ChatMessage("tool", text, tool_call_id=cid, name=names.get(cid)))
        elif kind in _SKIPPED_BLOCKS:
            continue
        else:
            raise bad(param, f"Unsupported content block {kind!r} at '{param}' for role {role}.")
    out = results
    if texts or calls or not results:
        out = out + [ChatMessage(role, "".join(texts), tool_calls=tuple(calls))]
    return out


def _tools(raw: object) -> list[ToolSpec]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise bad("tools", "'tools' must be an array.")
    tools = []
    for k, tool in enumerate(raw):
        param = f"tools[{k}]"
        if not isinstance(tool, dict) or tool.get("type", "custom") != "custom" \
                or not isinstance(tool.get("name"), str):
            raise bad(param, f"'{param}' must be a client tool with a name (server tools are "
                             "not supported).")
        schema = tool.get("input_schema", {})
        desc = tool.get("description") or ""
        if not isinstance(schema, dict) or not isinstance(desc, str):
            raise bad(param, f"'{param}': input_schema must be an object.")
        check_tool_schema(schema, f"{param}.input_schema")
        if tool.get("strict") not in (None, True, False):
            raise bad(f"{param}.strict", f"'{param}.strict' must be a boolean.")
        tools.append(ToolSpec(tool["name"], desc, schema, strict=tool.get("strict") is True))
    return tools


def _tool_choice(raw: object, tools: list[ToolSpec]) -> str | None:
    if raw is None:
        return None
    kind = raw.get("type") if isinstance(raw, dict) else None
    if kind in ("auto", "none"):
        return kind
    if kind == "any":
        return "required"
    if kind == "tool":
        name = raw.get("name")
        if name not in {t.name for t in tools}:
            raise bad("tool_choice", f"'tool_choice' names an unknown tool {name!r}.")
        return named_choice(name)
    raise bad("tool_choice", "'tool_choice.type' must be 'auto', 'any', 'tool' or 'none'.")


def parse_messages_request(body: dict, service, *, count_only: bool = False) -> MessagesRequest:
    model = fields.known_model(body, service)
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise bad("messages", "'messages' must be a non-empty array.")
    answer = structured.output_format(body)
    names: dict[str, str] = {}
    system = body.get("system")
    messages = [ChatMessage("system", _text_of(system, "system"))] if system else []
    for k, msg in enumerate(raw):
        messages += _message(msg, f"messages[{k}]", names)
    prefill = ""
    if messages[-1].role == "assistant" and not messages[-1].tool_calls:
        prefill = messages.pop().content
    tools = _tools(body.get("tools"))
    tool_choice = _tool_choice(body.get("tool_choice"), tools)
    if count_only:
        return MessagesRequest(model, messages, prefill, tools, tool_choice, False, None)
    unsupported.check_foreign_sampling(body, "messages")
    temperature, top_p = fields.sampling_numbers(body, service, temperature_max=1.0)
    if prefill and (answer is not None or any(t.strict for t in tools)):
        raise bad("messages", "An assistant prefill cannot be combined with structured outputs "
                              "('output_config.format' or strict tools): the output must follow the schema from its start.")
    request = MessagesRequest(model, messages, prefill, tools, tool_choice, False, None)
    constraint = None if prefill else structured.constraint(
        service, answer, tools, tool_choice, request.tool_primer,
        [f"tools[{k}].input_schema" for k in range(len(tools))])
    params = SamplingParams(
        max_tokens=decode_budget(body, "max_tokens", service.default_max_tokens),
        temperature=temperature, top_p=top_p,
        top_k=fields.opt_int(body, "top_k", 0, 0),
        stop=fields.stop_strings(body, "stop_sequences"), constraint=constraint)
    return MessagesRequest(model, messages, prefill, tools, tool_choice,
                           fields.opt_bool(body, "stream"), params)
