"""The pure stored core driven like the runtime drives it: decide, then apply the accepted events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from aotx.stored import (Accepted, StoredLimits, StoredRefusal, StoredState, Saved, apply_stored_into, decide,
                         identity_of_key)

ALICE = "alice"
BOB = identity_of_key("sk-bob")
T0 = 1_800_000_000


def rid(n: int) -> str:
    return f"resp_{n:048x}"


def cid(n: int) -> str:
    return f"conv_{n:048x}"


def iid(n: int, prefix: str = "msg") -> str:
    return f"{prefix}_{n:048x}"


def message(n: int, text: str, role: str = "user") -> dict:
    kind = "input_text" if role == "user" else "output_text"
    return {"id": iid(n), "type": "message", "role": role, "content": [{"type": kind, "text": text}]}


def call(n: int, name: str = "get_weather", arguments: str = '{"city":"Paris"}') -> dict:
    return {"id": iid(n, "fc"), "type": "function_call", "call_id": f"call_{n}", "name": name,
            "arguments": arguments}


def call_output(n: int, output: str = "sunny") -> dict:
    return {"id": iid(n, "fco"), "type": "function_call_output", "call_id": f"call_{n}", "output": output}


@dataclass
class Store:
    limits: StoredLimits = field(default_factory=StoredLimits)
    state: StoredState = field(default_factory=StoredState)
    now: int = T0
    journal: list = field(default_factory=list)

    def do(self, identity: str, command: Any) -> Saved | StoredRefusal:
        decision = decide(self.state, identity, command, self.now, self.limits)
        if isinstance(decision, StoredRefusal):
            return decision
        assert isinstance(decision, Accepted)
        for event in decision.events:
            apply_stored_into(self.state, event)
            self.journal.append(event)
        return Saved(len(decision.events), decision.key)

    def ok(self, identity: str, command: Any) -> Saved:
        out = self.do(identity, command)
        assert isinstance(out, Saved), out
        return out
