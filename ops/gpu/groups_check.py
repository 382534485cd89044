"""Issue 14, session 15: a constrained step's mask in two row groups (AOTX_MASK_GROUPS=2, aotx.engine.mask_groups;
kernels/cuda/sample_parts.py) against one (=1, the default), on the GPU: correctness first, then the bench.

    python3 -m ops.gpu.groups_check                       # CUDA: the check, then 2 pairs of the bench (1, 2, 1, 2)
    python3 -m ops.gpu.groups_check --pairs 3 --repeat 6
    python3 -m ops.gpu.groups_check --skip-bench           # the check only
    python3 -m ops.gpu.groups_check --backend numpy --streams 4 --tokens 16 --repeat 1 --pairs 1   # a CPU dry run

Check: the real model, 64 requests (json_schema greedy and seeded, json_object with penalties, a few
unconstrained, budgets that end rows of either group early) submitted before the engine starts (every run sees the
same batches), on the overlapped engine with groups = 1 and = 2, and on the classic loop: groups 2's token ids and
finish reasons must be groups 1's, and the classic loop's wherever groups 1's are; every constrained output ending
in "stop" must validate. Prints PASS or FAIL. Bench: ``ops.bench.structured --backend B --streams 64 --tokens 128
--repeat R --variants plain,json_schema`` in a subprocess per run, AOTX_MASK_GROUPS=1 and =2 alternated; a table of
each run's best tok/s, its rounds' json_schema ÷ plain and their median; raw outputs under --log (default $OUT).
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import subprocess
import sys

SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 16},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120},
                                           "colour": {"enum": ["red", "green", "blue"]}},
          "required": ["name", "age", "colour"], "additionalProperties": False}
QUESTIONS = ["Describe a person as JSON.", "Who is Ann? Answer in JSON.", "Name a colour.",
             "What is the capital of France?"]


def _requests(compiler, n: int):
    from aotx.engine import SamplingParams
    schema, obj = compiler.json_schema(SCHEMA), compiler.json_object()
    out = []
    for i in range(n):
        kind = i % 8
        if kind == 7:
            out.append((i, SamplingParams(max_tokens=24, temperature=0.8, seed=i)))       # unconstrained
        elif kind == 6:
            out.append((i, SamplingParams(max_tokens=40, temperature=0.9, seed=i, constraint=obj,
                                          presence_penalty=0.4, frequency_penalty=0.3)))
        else:
            budget = (12 + i % 17) if i % 5 == 0 else 56      # some rows of each group end early (length)
            out.append((i, SamplingParams(max_tokens=budget, temperature=0 if kind == 0 else 0.7 + 0.05 * kind,
                                          seed=1000 + i, constraint=schema)))
    return out


def check(backend_name: str, n: int) -> bool:
    import jsonschema

    from aotx.engine import Engine, EngineConfig
    from aotx.structured import ConstraintCompiler
    from kernels import create_backend, load_model

    bundle = load_model(progress=False)
    tok = bundle.tokenizer
    be = create_backend(backend_name, bundle, num_pages=2048, page_size=16)
    prompts = [tok.encode(bundle.chat_template.render([{"role": "user", "content": q}], add_generation_prompt=True))
               for q in QUESTIONS]
    reqs = _requests(ConstraintCompiler(tok), n)

    async def go(groups: str, overlap: bool):
        os.environ["AOTX_MASK_GROUPS"] = groups
        e = Engine(be, tok, EngineConfig(max_batch=n, num_pages=2048, page_size=16, max_model_len=2048,
                                         overlap=overlap))
        handles = [e.submit(prompts[i % len(prompts)], p) for i, p in reqs]
        e.start()
        try:
            outs = []
            for h in handles:
                ds = [d async for d in h]
                outs.append(([t for d in ds for t in d.token_ids], ds[-1].finish_reason,
                             "".join(d.text for d in ds)))
            return outs, getattr(e.runner.masks, "groups", 1)
        finally:
            await e.stop()

    prior = os.environ.get("AOTX_MASK_GROUPS")
    try:
        one, g1 = asyncio.run(go("1", True))
        two, g2 = asyncio.run(go("2", True))
        classic, _ = asyncio.run(go("1", False))
    finally:
        if prior is None:
            os.environ.pop("AOTX_MASK_GROUPS", None)
        else:
            os.environ["AOTX_MASK_GROUPS"] = prior
    same12 = sum(a[:2] == b[:2] for a, b in zip(one, two))
    same_c1 = [a[:2] == c[:2] for a, c in zip(one, classic)]
    same_c2 = [b[:2] == c[:2] for b, c in zip(two, classic)]
    worse = sum(s1 and not s2 for s1, s2 in zip(same_c1, same_c2))
    valid = stopped = 0
    for (_, p), (_, reason, text) in zip(reqs, two):
        if p.constraint is not None and reason == "stop":
            stopped += 1
            try:
                if p.constraint is reqs[0][1].constraint:
                    jsonschema.validate(json.loads(text), SCHEMA)
                else:
                    json.loads(text)
                valid += 1
            except (ValueError, jsonschema.ValidationError):
                print(f"invalid constrained output: {text!r}", flush=True)
    ends = {r: sum(o[1] == r for o in two) for r in ("stop", "length", "error")}
    ok = same12 == len(reqs) and worse == 0 and valid == stopped and ends["error"] == 0 and g1 == 1 and g2 == 2
    print(f"[groups_check] {backend_name}, {len(reqs)} requests: groups 2 == groups 1: {same12}/{len(reqs)}; "
          f"== classic: groups 1 {sum(same_c1)}/{len(reqs)}, groups 2 {sum(same_c2)}/{len(reqs)} (groups 2 worse on "
          f"{worse}); valid {valid}/{stopped} stopped; finish {ends}; engines' groups {g1}, {g2}", flush=True)
    print(f"[groups_check] CHECK {'PASS' if ok else 'FAIL'}", flush=True)
    return ok


def bench(args) -> list[dict]:
    log = args.log or os.environ.get("OUT") or "."
    os.makedirs(log, exist_ok=True)
    rows = []
    for k in range(args.pairs):
        for groups in ("1", "2"):
            cmd = [sys.executable, "-m", "ops.bench.structured", "--backend", args.backend, "--streams",
                   str(args.streams), "--tokens", str(args.tokens), "--repeat", str(args.repeat), "--variants",
                   "plain,json_schema"]
            env = dict(os.environ, AOTX_MASK_GROUPS=groups)
            got = subprocess.run(cmd, env=env, capture_output=True, text=True)
            text = got.stdout + got.stderr
            with open(os.path.join(log, f"groups_bench_{k + 1}_g{groups}.log"), "w") as f:
                f.write(text)
            tok_s = dict(re.findall(r"^\| (plain|json_schema) \| \d+ \| ([\d.]+) \|", text, re.M))
            rounds = re.search(r"json_schema / plain in each round \(the same round's plain\): ([\d., ]+); median "
                               r"([\d.]+)x", text)
            rows.append({"run": len(rows) + 1, "groups": groups, "rc": got.returncode,
                         "plain": float(tok_s.get("plain", "nan")), "json": float(tok_s.get("json_schema", "nan")),
                         "rounds": rounds.group(1) if rounds else "?",
                         "median": float(rounds.group(2)) if rounds else float("nan")})
            r = rows[-1]
            print(f"[groups_check] run {r['run']} groups {groups}: rc {got.returncode}, plain {r['plain']:.0f}, "
                  f"json_schema {r['json']:.0f} tok/s, rounds {r['rounds']}, median {r['median']:.3f}x", flush=True)
    print("\n| run | AOTX_MASK_GROUPS | plain tok/s (best) | json_schema (best) | ÷ each round | median |")
    print("|---:|---:|---:|---:|---|---:|")
    for r in rows:
        print(f"| {r['run']} | {r['groups']} | {r['plain']:.0f} | {r['json']:.0f} | {r['rounds']} | "
              f"**{r['median']:.3f}×** |")
    for g in ("1", "2"):
        med = [r["median"] for r in rows if r["groups"] == g]
        print(f"groups {g}: medians {', '.join(f'{m:.3f}' for m in med)}; their median "
              f"{statistics.median(med):.3f}x")
    print(f"(raw outputs, each with its per-step breakdown: {log}/groups_bench_*.log)")
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--requests", type=int, default=64)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=6)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--log", default="")
    ap.add_argument("--skip-check", action="store_true")
    ap.add_argument("--skip-bench", action="store_true")
    args = ap.parse_args(argv)
    ok = True
    if not args.skip_check:
        ok = check(args.backend, args.requests)
    if not args.skip_bench:
        bench(args)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
