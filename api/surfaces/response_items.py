"""Items as OpenAI stores them (stored Responses' input items, Conversation items): a request's input in
item form, each item with its id.

`as_items(raw, name)` validates the input as a response's input is validated (api.surfaces.responses.
request.parse_input: 400 naming `name[k]`), then writes it as items: a string is one user message; a
message's string content becomes one `input_text` part (`output_text` for an assistant's); messages,
function calls and their outputs get `status: "completed"` where they have none (a status that is not
in_progress | completed | incomplete is a 400 naming `name[k].status`); every item gets an id
of its type's prefix (`msg_`, `fc_`, `fco_`, `rs_`, …) unless it brings a valid one that is not taken
(`taken`: the ids already in the conversation, and those of the items before it).
"""
from __future__ import annotations

from collections.abc import Iterable

from aotx.stored import is_item_id
from api.errors import ApiError
from api.ids import new_id

PREFIX = {"message": "msg_", "function_call": "fc_", "function_call_output": "fco_", "reasoning": "rs_"}
_STATUS = ("message", "function_call", "function_call_output")
STATUSES = ("in_progress", "completed", "incomplete")   # an item's status (absent or null: completed)


def _content(content, role: str) -> list:
    if isinstance(content, str):
        return [{"type": "output_text" if role == "assistant" else "input_text", "text": content,
                 **({"annotations": []} if role == "assistant" else {})}]
    return list(content)


def as_items(raw: object, name: str = "input", taken: Iterable[str] = (), *, allow_empty: bool = False) -> list[dict]:
    from api.surfaces.responses.request import parse_input
    parse_input(raw, name=name, allow_empty=allow_empty)                      # the same validation and errors as a request's input
    items = [{"type": "message", "role": "user", "content": raw}] if isinstance(raw, str) else raw
    used = set(taken)
    out = []
    for n, item in enumerate(items):
        kind = item.get("type", "message")
        new = {"type": kind, **{k: v for k, v in item.items() if k != "type"}}
        if kind == "message":
            new["content"] = _content(item.get("content"), item.get("role"))
        if new.get("status") is None:
            new.pop("status", None)
        elif new["status"] not in STATUSES:
            raise ApiError(400, f"'{name}[{n}].status' must be one of {list(STATUSES)}.", param=f"{name}[{n}].status")
        if kind in _STATUS and "status" not in new:
            new["status"] = "completed"
        if not is_item_id(new.get("id")) or new["id"] in used:
            new["id"] = new_id(PREFIX.get(kind, "item_"))
        used.add(new["id"])
        out.append({"id": new.pop("id"), **new})
    return out
