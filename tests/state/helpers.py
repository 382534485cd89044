"""A tiny in-memory driver for the pure core: build bodies, decide, apply what is accepted."""

from __future__ import annotations

from aotx.state import (SCHEMA, Accepted, Actor, Command, Grants, MutationKind, apply, decide, empty_state,
                        lineage_for, parse_mutation)


def body(principal: str, seq: int, key: int, **fields) -> dict:
    return {"schema": SCHEMA, "lineage": lineage_for(principal).hex(), "operation_key": f"{key:032x}",
            "sequence": str(seq), **fields}


class Driver:
    def __init__(self, capacities=None):
        self.state = empty_state(capacities)
        self.log: list = []
        self.grants: dict[str, Grants] = {}

    def actor(self, principal: str) -> Actor:
        return Actor(principal, self.grants.get(principal, Grants.all()))

    def send(self, principal: str, kind: MutationKind, seq: int, key: int, space: str | None = None, **fields):
        mutation = parse_mutation(kind, body(principal, seq, key, **fields), space)
        decision = decide(self.state, Command(self.actor(principal), mutation))
        if isinstance(decision, Accepted):
            for event in decision.events:
                self.state = apply(self.state, event)
                self.log.append(event)
        return decision

    def register(self, principal: str, key: int = 1):
        return self.send(principal, MutationKind.REGISTER, 1, key)

    def par(self, principal: str, key: int = 1) -> str:
        return f"par-{lineage_for(principal).hex()}-{key:032x}"

    def spc(self, principal: str, ident: int) -> str:
        return f"spc-{lineage_for(principal).hex()}-{ident:032x}"
