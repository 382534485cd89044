"""Scenarios as data: a list of steps (plain dicts), generated from a seed or written by hand.

A step names an actor and what it does; references to earlier results are indices resolved when
the step runs (modulo what exists then), so any list of steps is runnable:

    {"actor": "alice", "do": "register"}
    {"actor": "alice", "do": "space", "scope": "room"}                 # scope: private | room | instance
    {"actor": "bob", "do": "conversation", "space": 3}                  # the 3rd known space (mod count)
    {"actor": "alice", "do": "member", "space": 0, "target": "bob", "permissions": ["read"]}
    {"actor": "alice", "do": "retry", "back": 1}      # exact retry of its 1st most recent live receipt
    {"actor": "alice", "do": "changed", "back": 2}    # same sequence, other input -> 409
    {"actor": "alice", "do": "future"}                # sequence next+1 -> 409
    {"actor": "alice", "do": "stale"}                 # sequence below the retry floor -> 410
    {"actor": "alice", "do": "retire"}                # retry_floor = this operation's sequence
    {"actor": "bob", "do": "read_space", "space": 2}  # 200 when readable, else 404 (never 403)
    {"actor": "alice", "do": "read_operation", "back": 1}
"""
from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any, Iterable, Iterator

STEP_KINDS = ("register", "space", "conversation", "member", "retry", "changed", "future", "stale", "retire",
              "read_space", "read_operation")
SCOPES = ("private", "room", "instance")
PERMISSION_SETS = ([], ["read"], ["read", "write"], ["read", "write", "manage"], ["write"], ["manage", "read"])

# (kind, weight) of the generated load; spaces are rare because the space table is small (1024 rows)
LOAD_WEIGHTS = (("space", 6), ("conversation", 22), ("member", 18), ("retry", 16), ("changed", 8),
                ("future", 4), ("stale", 4), ("retire", 2), ("read_space", 12), ("read_operation", 8))


def generate(seed: int, n: int, actors: Iterable[str] = ("alice", "bob")) -> list[dict[str, Any]]:
    """Registration of every actor, a first space each, then n seeded random steps."""
    names = list(actors)
    return list(itertools.islice(steps_of(seed, names), 2 * len(names) + n))


def steps_of(seed: int, actors: Iterable[str] = ("alice", "bob")) -> Iterator[dict[str, Any]]:
    """The endless form of `generate` (same steps for the same seed)."""
    rng = random.Random(seed)
    names = list(actors)
    yield from [{"actor": a, "do": "register"} for a in names]
    yield from [{"actor": a, "do": "space", "scope": rng.choice(SCOPES)} for a in names]
    kinds, weights = zip(*LOAD_WEIGHTS)
    while True:
        actor, kind = rng.choice(names), rng.choices(kinds, weights)[0]
        step: dict[str, Any] = {"actor": actor, "do": kind}
        if kind == "space":
            step["scope"] = rng.choice(SCOPES)
        elif kind in ("conversation", "read_space"):
            step["space"] = rng.randrange(1 << 16)
        elif kind == "member":
            step.update(space=rng.randrange(1 << 16), target=rng.choice(names),
                        permissions=list(rng.choice(PERMISSION_SETS)))
        elif kind in ("retry", "changed", "read_operation"):
            step["back"] = rng.randrange(1, 8)
        yield step
    return steps


def check_step(step: dict[str, Any]) -> None:
    if not isinstance(step, dict) or step.get("do") not in STEP_KINDS or not isinstance(step.get("actor"), str):
        raise ValueError(f"not a scenario step: {step!r}")


def load(path: str | Path) -> list[dict[str, Any]]:
    """A scenario file: a JSON array of steps, or JSON lines."""
    text = Path(path).read_text()
    steps = json.loads(text) if text.lstrip().startswith("[") else [json.loads(ln) for ln in text.splitlines()
                                                                     if ln.strip()]
    for s in steps:
        check_step(s)
    return steps
