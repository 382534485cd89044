"""Chat Completions message and tool parsing (also the shape Responses echoes)."""
from __future__ import annotations

import json

from aotx.chat_types import ChatMessage, ToolCall, ToolSpec
from aotx.tool_calls import named_choice
from api import strict_schema
from api.fields import bad
from api.tool_schemas import check_tool_schema
from api.unsupported import MEDIA_PARTS, refuse_media

_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant",
          "tool": "tool"}


def content_text(content: object, param: str, *, allow_null: bool = False,
                 text_types: tuple[str, ...] = ("text",)) -> str:
    """A content string or an array of text parts, joined; media parts are refused."""
    if content is None:
        if allow_null:
            return ""
        raise bad(param, f"'{param}' must be a string or an array of content parts.")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise bad(param, f"'{param}' must be a string or an array of content parts.")
    texts = []
    for k, part in enumerate(content):
        where = f"{param}[{k}]"
        if not isinstance(part, dict):
            raise bad(where, f"'{where}' must be an object.")
        kind = part.get("type")
        if kind in MEDIA_PARTS:
            raise refuse_media(kind, where)
        if kind not in text_types and kind != "refusal":
            raise bad(f"{where}.type", f"Unsupported content part type {kind!r} at '{where}'.")
        text = part.get("refusal" if kind == "refusal" else "text")
        if not isinstance(text, str):
            raise bad(f"{where}.text", f"'{where}.text' must be a string.")
        texts.append(text)
    return "".join(texts)


def _tool_calls(raw: object, param: str) -> tuple[ToolCall, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise bad(param, f"'{param}' must be an array.")
    calls = []
    for k, call in enumerate(raw):
        where = f"{param}[{k}]"
        fn = call.get("function") if isinstance(call, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise bad(where, f"'{where}' must be {{\"type\": \"function\", \"function\": "
                             "{\"name\": ..., \"arguments\": ...}}.")
        args = fn.get("arguments", "{}")
        if isinstance(args, dict):
            args = json.dumps(args, ensure_ascii=False)
        if not isinstance(args, str):
            raise bad(f"{where}.function.arguments", "Tool call arguments must be a JSON string.")
        cid = call.get("id")
        calls.append(ToolCall(cid if isinstance(cid, str) else f"call_{k}", fn["name"], args))
    return tuple(calls)


def parse_chat_messages(raw: object) -> list[ChatMessage]:
    if not isinstance(raw, list) or not raw:
        raise bad("messages", "'messages' must be a non-empty array.")
    names: dict[str, str] = {}
    out = []
    for k, msg in enumerate(raw):
        where = f"messages[{k}]"
        if not isinstance(msg, dict):
            raise bad(where, f"'{where}' must be an object.")
        role = msg.get("role")
        if role not in _ROLES:
            raise bad(f"{where}.role", f"'{where}.role' must be one of "
                                        f"{sorted(_ROLES)}; got {role!r}.")
        role = _ROLES[role]
        is_assistant = role == "assistant"
        text = content_text(msg.get("content"), f"{where}.content", allow_null=is_assistant)
        if role == "tool":
            cid = msg.get("tool_call_id")
            if not isinstance(cid, str):
                raise bad(f"{where}.tool_call_id", f"'{where}.tool_call_id' must be a string.")
            out.append(ChatMessage("tool", text, tool_call_id=cid, name=names.get(cid)))
            continue
        calls = _tool_calls(msg.get("tool_calls"), f"{where}.tool_calls") if is_assistant else ()
        names.update((c.id, c.name) for c in calls)
        out.append(ChatMessage(role, text, tool_calls=calls))
    return out


def parse_tool_spec(raw: object, param: str, *, flat: bool, strict_default: bool = False) -> ToolSpec:
    """Chat: {"type":"function","function":{name,description,parameters}}; Responses: flat.
    `strict_default`: an omitted `strict` means strict, the schema normalized (api.strict_schema:
    the Responses API's default; Chat's is non-strict)."""
    if not isinstance(raw, dict) or raw.get("type") != "function":
        kind = raw.get("type") if isinstance(raw, dict) else None
        raise bad(param, f"Only function tools are supported; '{param}' has type {kind!r}.")
    fn = raw if flat else raw.get("function")
    if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
        raise bad(param, f"'{param}' must name its function.")
    desc = fn.get("description") or ""
    params = fn.get("parameters") or {}
    if not isinstance(desc, str) or not isinstance(params, dict):
        raise bad(param, f"'{param}': description must be a string and parameters an object.")
    check_tool_schema(params, f"{param}.parameters" if flat else f"{param}.function.parameters")
    strict = fn.get("strict")
    if strict not in (None, True, False):
        raise bad(f"{param}.strict" if flat else f"{param}.function.strict", "'strict' must be a boolean.")
    if strict is None and strict_default:
        strict, params = True, strict_schema.normalized(params)
    return ToolSpec(fn["name"], desc, params, strict=strict is True)


def parse_tools(raw: object, *, flat: bool, strict_default: bool = False) -> list[ToolSpec]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise bad("tools", "'tools' must be an array.")
    return [parse_tool_spec(t, f"tools[{k}]", flat=flat, strict_default=strict_default)
            for k, t in enumerate(raw)]


def parse_tool_choice(raw: object, tools: list[ToolSpec], *, flat: bool) -> str | None:
    """"none" | "auto" | "required" | a named function (Chat nests the name, Responses not)."""
    if raw is None:
        return None
    if raw in ("none", "auto", "required"):
        if raw == "required" and not tools:
            raise bad("tool_choice", "'tool_choice' is 'required' but no tools were given.")
        return raw
    if isinstance(raw, dict) and raw.get("type") == "function":
        holder = raw if flat else raw.get("function")
        name = holder.get("name") if isinstance(holder, dict) else None
        if not isinstance(name, str) or name not in {t.name for t in tools}:
            raise bad("tool_choice", f"'tool_choice' names an unknown tool {name!r}.")
        return named_choice(name)
    raise bad("tool_choice", "'tool_choice' must be 'none', 'auto', 'required' or a function.")
