"""The named reads of the shared state, so a read can travel as (view name, arguments)."""

from __future__ import annotations

from typing import Any, Callable, Mapping

from ..state import (State, conversation_events, conversation_view, list_conversations, list_members, list_spaces, operation_view,
                     participant_view, result_view, space_view)
from ..memory.store import MemoryStore
from ..memory.views import list_memory, memory_object
from ..state.rights import Actor
from .outcome import Outcome

VIEWS: Mapping[str, Callable[..., Any]] = {
    "participant": lambda s, a, participant=None: participant_view(s, a, participant),
    "spaces": lambda s, a, cursor=0, limit=100: list_spaces(s, a, cursor, limit),
    "space": lambda s, a, space: space_view(s, a, space),
    "members": lambda s, a, space, cursor=0, limit=100: list_members(s, a, space, cursor, limit),
    "conversations": lambda s, a, space, cursor=0, limit=100: list_conversations(s, a, space, cursor, limit),
    "conversation": lambda s, a, con: conversation_view(s, a, con),
    "operation": lambda s, a, op: operation_view(s, a, op),
    "conversation_events": lambda s, a, con, cursor=0, limit=100: conversation_events(s, a, con, cursor, limit),
    "result": lambda s, a, op, offset=0, limit=None: result_view(s, a, op, offset, limit),
}
# the reads of retained memory, over the state (rights) and the memory store
MEMORY_VIEWS: Mapping[str, Callable[..., Any]] = {
    "memory": lambda s, m, a, space, cursor=0, limit=100: list_memory(s, m, a, space, cursor, limit),
    "memory_object": lambda s, m, a, object, offset=0: memory_object(s, m, a, object, offset),
}


def run_view(state: State, view: str, actor: Actor, args: Mapping[str, Any],
             memory: MemoryStore | None = None) -> Outcome:
    if view in MEMORY_VIEWS and memory is not None:
        fn = MEMORY_VIEWS[view]
        call = lambda: fn(state, memory, actor, **args)  # noqa: E731
    else:
        fn = VIEWS.get(view)
        if fn is None:
            return Outcome.error(400, "invalid_request", f"no shared view {view!r}")
        call = lambda: fn(state, actor, **args)  # noqa: E731
    try:
        result = call()
    except TypeError as exc:  # wrong arguments for the view (only from a malformed remote request)
        return Outcome.error(400, "invalid_request", f"view {view!r}: {exc}")
    if isinstance(result, Outcome):
        return result
    if isinstance(result, dict):
        return Outcome(200, result)
    return Outcome.refusal(result)
