"""gpu-check (with --real): structured outputs through the engine on the GPU.

Constrained requests (a closed JSON schema; greedy and sampled) share batches with unconstrained
ones on the backend's default launcher (CUDA: overlapped, so the mask kernel, its uploads and the
classic read-back of constrained steps all run). Checks: every constrained output that ends with
"stop" is JSON valid against the schema (value 1.0), and the unconstrained greedy outputs are the
ones the same requests give alone (the mask touches constrained rows only). Then the same
constrained requests, submitted before the engine starts (so every run sees the same batches), with
the mask worker (aotx.engine.mask_worker: masks filled on its thread, which then enqueues the step's
sampling: kernels/cuda/overlap.py) and without it (AOTX_MASK_WORKER=0: filled on the engine thread between the forward and
the sampling): the same token ids, seeded draws included (value 1.0); on CUDA also with the sampling
enqueued at the launch behind a gate the worker opens (kernels/cuda/mask_gate.py, the default) against
enqueued by the worker after the fill (gate off). The CPU suite runs the same
logic on numpy (tests/structured/test_structured_check.py).
"""
from __future__ import annotations

import asyncio
import dataclasses
import json
import os

import jsonschema

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 16},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120},
                                           "colour": {"enum": ["red", "green", "blue"]}},
          "required": ["name", "age", "colour"], "additionalProperties": False}
QUESTIONS = ["Describe a person as JSON.", "Who is Ann? Answer in JSON.", "Name a colour.",
             "What is the capital of France?"]


def run(bundle, record, backend: str = "cuda") -> None:
    from aotx.engine import Engine, EngineConfig, SamplingParams
    from aotx.structured import ConstraintCompiler
    from kernels import create_backend

    be = create_backend(backend, bundle, num_pages=512, page_size=16)
    engine = Engine(be, bundle.tokenizer, EngineConfig(max_batch=32, num_pages=512, page_size=16, max_model_len=2048))
    constraint = ConstraintCompiler(bundle.tokenizer).json_schema(SCHEMA)
    prompts = [bundle.tokenizer.encode(bundle.chat_template.render([{"role": "user", "content": q}],
                                                                   add_generation_prompt=True)) for q in QUESTIONS]
    constrained = [SamplingParams(max_tokens=48, temperature=0, constraint=constraint)] + [
        SamplingParams(max_tokens=48, temperature=1.0, seed=s, constraint=constraint) for s in range(7)]
    free = SamplingParams(max_tokens=16, temperature=0)

    async def text(handle):
        deltas = [d async for d in handle]
        return "".join(d.text for d in deltas), deltas[-1].finish_reason

    async def go():
        engine.start()
        try:
            mixed = await asyncio.gather(*[text(engine.submit(prompts[i % 2], p)) for i, p in enumerate(constrained)],
                                         *[text(engine.submit(p, free)) for p in prompts[2:]])
            alone = [await text(engine.submit(p, free)) for p in prompts[2:]]
        finally:
            await engine.stop()
        return mixed[:len(constrained)], mixed[len(constrained):], alone

    outs, beside, alone = asyncio.run(go())
    stopped = [t for t, f in outs if f == "stop"]
    valid = 0
    for t in stopped:
        try:
            jsonschema.validate(json.loads(t), SCHEMA)
            valid += 1
        except (ValueError, jsonschema.ValidationError):
            print(f"invalid constrained output: {t!r}", flush=True)
    cut = sum(f == "length" for _, f in outs)
    record(f"structured: constrained outputs valid ({backend})", valid / max(1, len(stopped)) if stopped else 0.0,
           1.0, f"stop {len(stopped)}/{len(outs)}, length {cut}")
    same = sum(a == b for a, b in zip(beside, alone)) / len(alone)
    record(f"structured: unconstrained rows unchanged beside constrained ({backend})", same, 1.0)

    # (overlapped on every backend: numpy's device thread too; the CPU suite runs two requests)
    same_ids = constrained if backend != "numpy" else [dataclasses.replace(p, max_tokens=16) for p in constrained[:2]]

    async def ids(worker: bool, gated: bool = True, procs: int = 0):
        prior = os.environ.get("AOTX_MASK_GATE")
        os.environ["AOTX_MASK_GATE"] = "1"   # the default; set against an outer AOTX_MASK_GATE=0
        try:
            e = Engine(be, bundle.tokenizer, EngineConfig(max_batch=32, num_pages=512, page_size=16,
                                                          max_model_len=2048, overlap=True))
        finally:
            if prior is None:
                os.environ.pop("AOTX_MASK_GATE", None)
            else:
                os.environ["AOTX_MASK_GATE"] = prior
        if procs:       # the rows' matchers in matcher processes (aotx.engine.mask_procs, AOTX_MASK_PROCS)
            from aotx.engine.mask_procs import ProcMaskWorker
            e.runner.masks.close()
            e.runner.masks = ProcMaskWorker(procs, bundle.tokenizer)
        e.runner.masks.enabled = worker
        gate = getattr(e.runner.launcher, "gate", None) is not None
        if gate:
            e.runner.launcher.gated = gated
        handles = [e.submit(prompts[i % 2], p) for i, p in enumerate(same_ids)]
        e.start()
        try:
            return [[t for d in [d async for d in h] for t in d.token_ids] for h in handles], e.runner.masks.started, gate
        finally:
            await e.stop()

    (on, started, gate), (off, _, _) = asyncio.run(ids(True)), asyncio.run(ids(False))
    record(f"structured: token ids with the mask worker == without it ({backend})",
           sum(a == b for a, b in zip(on, off)) / len(on), 1.0, f"{started} masks on the worker")
    if gate:     # CUDA: the sampling behind a gate (kernels/cuda/mask_gate.py) against enqueued by the worker
        ungated, _, _ = asyncio.run(ids(True, gated=False))
        record(f"structured: token ids with the mask gate == without it ({backend})",
               sum(a == b for a, b in zip(on, ungated)) / len(on), 1.0)
    procs, _, _ = asyncio.run(ids(True, procs=2))
    record(f"structured: token ids with 2 matcher processes == the mask worker thread ({backend})",
           sum(a == b for a, b in zip(on, procs)) / len(on), 1.0)
