"""Where `truncation: "auto"` may cut a stored context: never between a function_call and its output.

Dropping the oldest `d` context items is allowed only when no item kept — a later context item or an
item of the new input — is a `function_call_output` answering a `function_call` among those dropped: a
call and its output go together (an output without its call would be rendered by the chat template as
a tool turn answering nothing). A call whose output is in the new input can never be dropped.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def _call_id(item: Any, kind: str) -> str | None:
    if isinstance(item, dict) and item.get("type") == kind and isinstance(item.get("call_id"), str):
        return item["call_id"]
    return None


def safe_cuts(context: list[dict], new_input: Any) -> list[int]:
    """The drop counts 1..len(context), ascending, that keep every function call with its output."""
    called: dict[str, int] = {}            # call_id -> index of its (first) function_call in the context
    needs: list[int] = []                  # per context index: the call index its output needs (or len)
    n = len(context)
    for i, item in enumerate(context):
        cid = _call_id(item, "function_call_output")
        needs.append(called.get(cid, n) if cid is not None else n)
        cid = _call_id(item, "function_call")
        if cid is not None:
            called.setdefault(cid, i)
    inputs: Iterable[Any] = new_input if isinstance(new_input, list) else ()
    least = min((called.get(cid, n) for cid in (_call_id(x, "function_call_output") for x in inputs)
                 if cid is not None), default=n)   # a call the input answers bounds every cut
    cuts: list[int] = []
    for d in range(n, 0, -1):              # suffix minimum of what the kept items need
        if d < n:
            least = min(least, needs[d])
        if least >= d:
            cuts.append(d)
    return cuts[::-1]
