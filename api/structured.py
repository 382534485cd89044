"""Structured outputs on the wire: each surface's format field and strict tools -> one Constraint.

What each surface accepts (anything else in these fields is a 400 naming the param):
* Chat and Completions (an extension there) `response_format`: {"type": "text"},
  {"type": "json_object"}, {"type": "json_schema", "json_schema": {"name", "schema", "strict"?,
  "description"?}}.
* Responses `text.format`: the same three, flat ({"type": "json_schema", "name", "schema", ...}).
* Messages `output_config.format` (and the beta's top-level `output_format`):
  {"type": "json_schema", "schema"}.
* Tools with `strict: true`: their arguments follow their schema. A forced call (`tool_choice`
  "required"/"any" or a named tool) is always constrained to a well-formed call.

A schema is checked against its metaschema (api.tool_schemas), then compiled by aotx.structured;
a schema llguidance cannot enforce exactly is a 400 naming the param, never a 200 that ignores it.
`strict` false or absent is enforced as well: this server never does less than the schema.

Compiling a large schema takes milliseconds to seconds: a body that may carry a constraint is
parsed in a worker thread (`parsed`), never on the event loop; a body without one is parsed inline.
"""
from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence

from aotx.chat_types import ToolSpec
from aotx.structured import Constraint, ConstraintError
from aotx.tool_calls import forced_tool_name, tools_active
from api.fields import bad
from api.tool_schemas import check_tool_schema

ANY_OBJECT = {"type": "object"}
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


# the body fields that can make a request constrained (a format, or tools)
_CONSTRAINING = ("response_format", "text", "output_config", "output_format", "tools")


def may_compile(body: dict) -> bool:
    return isinstance(body, dict) and any(body.get(k) is not None for k in _CONSTRAINING)


async def parsed(parse, body: dict, *args, **kw):
    """`parse(body, *args, **kw)`, in a worker thread when the body may carry a constraint (its
    compile would block the loop); its errors (a 400) are raised here as they would be inline."""
    if not may_compile(body):
        return parse(body, *args, **kw)
    return await asyncio.to_thread(parse, body, *args, **kw)


def _schema(holder: dict, key: str, param: str) -> dict:
    schema = holder.get(key)
    if not isinstance(schema, dict):
        raise bad(param, f"'{param}' must be a JSON Schema object.")
    check_tool_schema(schema, param)
    return schema


def _json_schema_fields(holder: dict, param: str) -> dict:
    name = holder.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise bad(f"{param}.name", f"'{param}.name' must be 1-64 letters, digits, '_' or '-'.")
    if holder.get("strict") not in (None, True, False):
        raise bad(f"{param}.strict", f"'{param}.strict' must be a boolean.")
    if not isinstance(holder.get("description", ""), (str, type(None))):
        raise bad(f"{param}.description", f"'{param}.description' must be a string.")
    return _schema(holder, "schema", f"{param}.schema")


def _openai_format(value: object, param: str, *, flat: bool) -> tuple[dict, str] | None:
    """(answer schema, its param) of an OpenAI format value; None for text or absent."""
    if value is None or value == {}:
        return None
    if not isinstance(value, dict):
        raise bad(param, f"'{param}' must be an object.")
    kind = value.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return ANY_OBJECT, param
    if kind == "json_schema":
        if flat:
            return _json_schema_fields(value, param), f"{param}.schema"
        inner = value.get("json_schema")
        if not isinstance(inner, dict):
            raise bad(f"{param}.json_schema", f"'{param}.json_schema' must be an object.")
        return _json_schema_fields(inner, f"{param}.json_schema"), f"{param}.json_schema.schema"
    raise bad(f"{param}.type", f"'{param}.type' must be 'text', 'json_object' or 'json_schema'; "
                               f"got {kind!r}.")


def response_format(body: dict) -> tuple[dict, str] | None:
    """Chat and Completions `response_format`."""
    return _openai_format(body.get("response_format"), "response_format", flat=False)


def text_format(body: dict) -> tuple[dict, str] | None:
    """Responses `text.format`."""
    text = body.get("text")
    if text is None:
        return None
    if not isinstance(text, dict):
        raise bad("text", "'text' must be an object.")
    return _openai_format(text.get("format"), "text.format", flat=True)


def output_format(body: dict) -> tuple[dict, str] | None:
    """Messages `output_config.format` (or the beta's `output_format`)."""
    config = body.get("output_config")
    if config is not None and not isinstance(config, dict):
        raise bad("output_config", "'output_config' must be an object.")
    found = [(v, p) for v, p in ((body.get("output_format"), "output_format"),
                                 ((config or {}).get("format"), "output_config.format")) if v is not None]
    if not found:
        return None
    if len(found) > 1:
        raise bad("output_format", "Give 'output_config.format' or 'output_format', not both.")
    value, param = found[0]
    if not isinstance(value, dict) or value.get("type") != "json_schema":
        raise bad(param, f"'{param}' must be {{\"type\": \"json_schema\", \"schema\": {{...}}}}.")
    return _schema(value, "schema", f"{param}.schema"), f"{param}.schema"


def _compile(build, param: str) -> Constraint:
    try:
        return build()
    except ConstraintError as exc:
        raise bad(param, f"'{param}' cannot be enforced by this server: {exc}.") from None


def constraint(service, answer: tuple[dict, str] | None, tools: Sequence[ToolSpec], tool_choice: str | None,
               primer: str, tool_params: Sequence[str] = ()) -> Constraint | None:
    """The request's constraint, or None (unconstrained). `tool_params`: each tool's schema param
    (for errors); `primer`: the text the prompt already opens the answer with."""
    compiler = service.constraints
    if answer is not None:     # each part on its own first, so an error names its own param
        _compile(lambda: compiler.json_schema(answer[0]), answer[1])
    active = tools_active(tools, tool_choice)
    for k, tool in enumerate(tools):
        if active and tool.strict:
            where = tool_params[k] if k < len(tool_params) else f"tools[{k}]"
            _compile(lambda t=tool: compiler.json_schema(t.parameters or ANY_OBJECT), where)
    if not active:
        return compiler.json_schema(answer[0]) if answer is not None else None
    forced = forced_tool_name(tool_choice)
    mode = "named" if forced else "required" if tool_choice == "required" else "auto"
    if mode == "auto" and answer is None and not any(t.strict for t in tools):
        return None
    return _compile(lambda: compiler.tool_call(tools, mode, forced, primer,
                                               answer[0] if answer and mode == "auto" else None), "tools")
