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

Inputs and memory (`generate(..., inputs=True)`; a string reference names what an earlier step
with that `name` created, an integer indexes what exists then, modulo its count):

    {"actor": "alice", "do": "input", "conversation": 0, "text": "...", "max_output_tokens": 6, "name": "a1"}
    {"actor": "alice", "do": "cancel", "back": 1}        # its 1st most recent input (or "input": "a1")
    {"actor": "bob", "do": "read_result", "input": "a1"} # 200 when readable, else 404 (410 own retired);
                                                         # "via": offset | sse (+ "resume": byte) | receipt
    {"actor": "bob", "do": "wait", "input": "a1", "execution": ["completed"]}   # until it ends
    {"actor": "alice", "do": "publish", "memory": "a1", "space": "notes"}     # a1's text memory → notes
    {"actor": "bob", "do": "read_memory", "space": "notes", "contains": ["a1"], "lacks": []}
    {"actor": "bob", "do": "read_memory", "memory": "p1"}                      # one object

Any step may carry `expect` (a status or a list): what its main request must answer, checked on
top of the rule model (sessions written by hand document their outcomes that way).
"""
from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any, Iterable, Iterator

from .steps import STEPS

STEP_KINDS = tuple(STEPS)   # every verb of the steps table
SCOPES = ("private", "room", "instance")
PERMISSION_SETS = ([], ["read"], ["read", "write"], ["read", "write", "manage"], ["write"], ["manage", "read"])

# (kind, weight) of the generated load; spaces are rare because the space table is small (1024 rows)
LOAD_WEIGHTS = (("space", 6), ("conversation", 22), ("member", 18), ("retry", 16), ("changed", 8),
                ("future", 4), ("stale", 4), ("retire", 2), ("read_space", 12), ("read_operation", 8))
# with inputs=True: the journal-core load plus inputs, cancellations, result reads and memory
INPUT_LOAD_WEIGHTS = LOAD_WEIGHTS + (("input", 24), ("cancel", 6), ("read_result", 14), ("publish", 5),
                                     ("read_memory", 8))
INPUT_WORDS = ("river", "copper", "lantern", "harbour", "orchard", "comet", "violin", "granite", "meadow",
               "falcon", "saffron", "glacier", "tulip", "compass", "ember", "willow")


def generate(seed: int, n: int, actors: Iterable[str] = ("alice", "bob"), *, inputs: bool = False,
             max_output_tokens: int = 6) -> list[dict[str, Any]]:
    """Registration of every actor, a first space each, then n seeded random steps (with inputs=True
    also a first conversation each, and input, cancel, read_result, publish and read_memory steps)."""
    names = list(actors)
    head = 2 * len(names) + (len(names) if inputs else 0)
    return list(itertools.islice(steps_of(seed, names, inputs=inputs, max_output_tokens=max_output_tokens),
                                 head + n))


def steps_of(seed: int, actors: Iterable[str] = ("alice", "bob"), *, inputs: bool = False,
             max_output_tokens: int = 6) -> Iterator[dict[str, Any]]:
    """The endless form of `generate` (same steps for the same seed; without inputs, the same steps
    as before inputs existed)."""
    rng = random.Random(seed)
    names = list(actors)
    yield from [{"actor": a, "do": "register"} for a in names]
    yield from [{"actor": a, "do": "space", "scope": rng.choice(SCOPES)} for a in names]
    if inputs:
        yield from [{"actor": a, "do": "conversation", "space": i} for i, a in enumerate(names)]
    kinds, weights = zip(*(INPUT_LOAD_WEIGHTS if inputs else LOAD_WEIGHTS))
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
        elif kind == "input":
            step.update(conversation=rng.randrange(1 << 16), max_output_tokens=max_output_tokens,
                        text=f"Remember the word {rng.choice(INPUT_WORDS)}. Say it.")
        elif kind == "cancel":
            step["back"] = rng.randrange(1, 4)
        elif kind == "read_result":
            step.update(input=rng.randrange(1 << 16), via=rng.choice(("offset", "offset", "sse", "receipt")))
            if step["via"] == "sse":
                step["resume"] = rng.randrange(0, 24)
            elif step["via"] == "offset":
                step["limit"] = rng.choice((None, 1, 3, 7))
        elif kind == "publish":
            step.update(memory=rng.randrange(1 << 16), space=rng.randrange(1 << 16))
        elif kind == "read_memory":
            step["space"] = rng.randrange(1 << 16)
        yield step


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
