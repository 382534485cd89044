"""What crosses NATS between HTTP worker processes and the engine process (`aotx serve --http-workers N`).

Subjects, for an engine named `<name>` (random per `aotx serve`, so two servers on one NATS never mix):

* `aotx.eng.<name>.gen`   request/reply, worker -> engine: submit generations.
      request {"v": 1, "w": worker id, "inbox": the worker's delta subject, "surface": str, "lane": str,
               "items": [[rid, prompt token ids, sampling params map], ...]}   (one per choice)
      reply   {"ok": [[engine request id, prompt tokens, max tokens], ...]}
              or {"rejected": code, "message": str} (aotx.engine.RequestRejected; nothing was queued)
* `aotx.eng.<name>.ctl`   worker -> engine: {"op": "cancel", "w", "rids": [...]}, {"op": "hb", "w"} (every
      HEARTBEAT seconds), {"op": "bye", "w"}. A worker silent for WORKER_TIMEOUT has its generations cancelled.
* `aotx.eng.<name>.alive` engine -> workers: {"v": 1} every HEARTBEAT seconds. A worker that hears nothing
      for ENGINE_TIMEOUT ends its open generations with ENGINE_UNAVAILABLE.
* the worker's inbox     engine -> worker: [item, ...]: every delta of that worker's generations of one
      engine step, in one message (split only past the NATS payload limit; step_to_wire / step_from_wire).
      An item is [rid, text, token ids, prompt tokens, completion tokens] for a plain token (no finish,
      stop sequence, error or logprobs: the common case), else [rid, delta] with the delta as
      delta_to_wire's list (logprobs as nested lists).

A rid is the worker's own integer. Version 2: plain tokens in the short 5-item form (version 1 sent every
delta as [rid, delta]).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Any

import nats.errors

from aotx.engine.types import Delta, SamplingParams, TokenLogprob, TopLogprob

WIRE_VERSION = 2
HEARTBEAT = 1.0          # seconds between heartbeats, both ways
WORKER_TIMEOUT = 3.0     # seconds of worker silence before the engine cancels its generations
ENGINE_TIMEOUT = 3.0     # seconds of engine silence before a worker ends its open generations
ENGINE_UNAVAILABLE = "engine unavailable"   # the `error` of a generation the engine process left


def gen_subject(name: str) -> str:
    return f"aotx.eng.{name}.gen"


def ctl_subject(name: str) -> str:
    return f"aotx.eng.{name}.ctl"


def alive_subject(name: str) -> str:
    return f"aotx.eng.{name}.alive"


def worker_inbox(name: str, worker: str) -> str:
    return f"aotx.eng.{name}.w.{worker}"


# -- a runtime's engines, for gateways (aotx.engine_pool) --------------------------------------------
# An `aotx boot` with a model serves its engine as `<runtime>.<boot>` (two subject tokens), and its alive
# beat carries the model's facts and its load: {"v", "model", "backend", "created", "context_tokens",
# "default_max_tokens", "sampling_defaults": {...}, "load": {"active": running + waiting, "capacity": max
# batch}}. A gateway hears every engine of the runtime on one wildcard subscription.

def pool_engine_name(runtime: str, boot: str) -> str:
    return f"{runtime}.{boot}"


def pool_alive_subject(runtime: str) -> str:
    """Every pooled engine's alive beat of the runtime `runtime` (the boot token a wildcard)."""
    return alive_subject(pool_engine_name(runtime, "*"))


def engine_facts(service) -> dict[str, Any]:
    """What a gateway needs of a ModelService to serve its model surfaces (as ops.serve_workers'
    worker spec carries them to HTTP workers)."""
    return {"model": service.model_id, "backend": service.backend_name, "created": int(service.created),
            "context_tokens": int(service.context_tokens), "default_max_tokens": int(service.default_max_tokens),
            "sampling_defaults": service.sampling_defaults.json()}


def params_to_wire(p: SamplingParams) -> dict[str, Any]:
    out = {f.name: getattr(p, f.name) for f in dataclasses.fields(SamplingParams)}
    out["stop"], out["stop_token_ids"] = list(p.stop), list(p.stop_token_ids)
    c = out.get("constraint")
    if c is not None:   # a structured-output constraint travels as its grammar (compiled again, cached, there)
        out["constraint"] = {"kind": c.kind, "grammar": c.grammar}
    if p.seed is not None:   # the engine reads any integer seed mod 2**64; msgpack carries at most 64 bits
        out["seed"] = p.seed % 2**64
    return out


_PARAM_FIELDS = frozenset(f.name for f in dataclasses.fields(SamplingParams))


def params_from_wire(m: dict[str, Any], constraints: Any = None) -> SamplingParams:
    """`constraints`: the engine process's ConstraintCompiler (aotx.structured), which turns a
    constraint's grammar back into a Constraint; a constrained request without one is refused
    (ValueError) — never run unconstrained."""
    kw = {k: v for k, v in m.items() if k in _PARAM_FIELDS}
    c = kw.get("constraint")
    if c is not None:
        if constraints is None or not isinstance(c, dict):
            raise ValueError("a constrained request reached an engine that cannot compile constraints")
        kw["constraint"] = constraints.from_grammar(str(c["kind"]), str(c["grammar"]))
    kw["stop"] = tuple(kw.get("stop") or ())
    kw["stop_token_ids"] = tuple(kw.get("stop_token_ids") or ())
    kw["logit_bias"] = tuple((int(t), float(b)) for t, b in kw.get("logit_bias") or ())
    return SamplingParams(**kw)


def _lp_to_wire(lp: TokenLogprob) -> list:
    return [lp.token_id, lp.token, lp.bytes, lp.logprob, [[t.token_id, t.token, t.bytes, t.logprob] for t in lp.top]]


def _lp_from_wire(w: list) -> TokenLogprob:
    return TokenLogprob(w[0], w[1], w[2], w[3], tuple(TopLogprob(*t) for t in w[4]))


def delta_to_wire(d: Delta) -> list:
    return [d.text, list(d.token_ids), d.finish_reason, d.stop_sequence, d.prompt_tokens, d.completion_tokens,
            d.error, [_lp_to_wire(x) for x in d.logprobs] if d.logprobs else None,
            [_lp_to_wire(x) for x in d.prompt_logprobs] if d.prompt_logprobs else None]


def delta_from_wire(w: list) -> Delta:
    return Delta(text=w[0], token_ids=tuple(w[1]), finish_reason=w[2], stop_sequence=w[3], prompt_tokens=w[4],
                 completion_tokens=w[5], error=w[6],
                 logprobs=tuple(_lp_from_wire(x) for x in w[7]) if w[7] else (),
                 prompt_logprobs=tuple(_lp_from_wire(x) for x in w[8]) if w[8] else ())


def item_to_wire(rid: int, d: Delta) -> tuple:
    """One (rid, delta) pair as an inbox message's item (see the module doc)."""
    if (d.finish_reason is None and d.stop_sequence is None and d.error is None and not d.logprobs
            and not d.prompt_logprobs):
        return rid, d.text, d.token_ids, d.prompt_tokens, d.completion_tokens
    return rid, delta_to_wire(d)


def step_to_wire(items: list[tuple[int, Delta]]) -> list:
    """One step's (rid, delta) pairs of one worker as the inbox message's items (see the module doc)."""
    return [item_to_wire(rid, d) for rid, d in items]


def step_from_wire(items) -> list[tuple[int, Delta]]:
    """step_to_wire's items (unpacked as lists or tuples) back as (rid, delta) pairs."""
    out = []
    for w in items:
        if len(w) == 5:
            out.append((w[0], Delta(w[1], tuple(w[2]), (), None, None, w[3], w[4])))
        else:
            out.append((w[0], delta_from_wire(w[1])))
    return out


def split_to_fit(items: list, pack, limit: int) -> list[bytes]:
    """`pack(items)` in as few messages as fit `limit` bytes each (halving the list where one does not)."""
    data = pack(items)
    if len(data) <= limit or len(items) <= 1:
        return [data]
    half = len(items) // 2
    return split_to_fit(items[:half], pack, limit) + split_to_fit(items[half:], pack, limit)


async def heartbeat(nc, subject: str, data, what: str) -> None:
    """Publish `data` (bytes, or a callable giving them: taken afresh each time) on `subject` every
    HEARTBEAT seconds until cancelled (the engine process's and each worker's liveness); a publish that
    fails is logged and the next one tried."""
    while True:
        try:
            await nc.publish(subject, data() if callable(data) else data)
        except nats.errors.Error as exc:
            logging.getLogger("aotx.engine_wire").warning("%s heartbeat not sent: %s", what, exc)
        await asyncio.sleep(HEARTBEAT)
