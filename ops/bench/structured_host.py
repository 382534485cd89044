"""The engine's time per decode step over a simulated GPU: plain against json_schema, no GPU needed.

    .venv/bin/python -m ops.bench.structured_host                              # instant device
    .venv/bin/python -m ops.bench.structured_host --forward-ms 8 --sample-ms 2  # a device slower than the host

The real engine loop, the real tokenizer and detokenizer, the real llguidance matchers and mask worker,
and the CUDA launcher's host side (kernels/cuda/overlap.py) over a stand-in driver with a simulated
stream: one thread runs what the host enqueues, in order (the staging, the token feed, a forward that
takes ``--forward-ms``, a sampling that takes ``--sample-ms``, the ids' copy back, events with the host
clock). Its sampler draws what a model writing the bench's JSON would: token p of a row is token p of
``{"story": "`` and a story in English (each row from its own place in the story), the lowest token its
mask allows where that one is not (never EOS). With an instant device a step takes what the host needs
for it (the ceiling the host puts on the GPU's step rate); with device times above the host's, plain is
device-bound and a constrained step shows what its mask costs the device's timeline. The ``*_engine`` runs
have each sampling enqueued by the engine thread (the session-5 way: the A/B of
CudaStepLauncher.sample_on_worker, in one process), the ``*_worker`` runs by the mask worker after the fill
(the session-6 way: the A/B of the gate, kernels/cuda/mask_gate.py); the others at the launch, behind a
gate that the mask worker opens. Prints ms per step,
the launcher's per-step breakdown (kernels/cuda/step_timing.py) and the engine thread's parts
(ops/bench/structured_probe.py). No GPU, no weights on a device (the tokenizer comes from the GGUF).
"""
from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import asyncio
import ctypes
import importlib
import queue
import subprocess
import sys
import threading
import time
import types

import numpy as np

_SAMPLE_OUT, _TOKENS = 0xD0, 0x100000
STORY = ("Once upon a time a young dragon lived at the edge of a quiet village. Every morning the smell of "
         "warm bread drifted up the hill to her cave, and every morning she wondered how the baker made it. "
         "One day she flew down, folded her wings, and asked the old baker to teach her. He laughed, handed "
         "her an apron, and showed her how to mix flour, water, salt and yeast, how to knead the dough until "
         "it was smooth, and how to wait while it rose. Her first loaves were burnt black by her own breath, "
         "but she learned to breathe gently, and soon the whole valley came to buy her golden bread. ")


class HostPinned:
    """Page-locked memory's stand-in (kernels.cuda.driver.Pinned) for a stand-in driver: plain host memory
    with the same `ptr`, `view` and `free` (also the tests' stand-in driver's)."""

    def __init__(self, nbytes):
        self.nbytes = max(int(nbytes), 64)
        self._raw = (ctypes.c_uint8 * self.nbytes)()
        self.ptr = ctypes.addressof(self._raw)

    def view(self, dtype, n, offset=0):
        return np.frombuffer(self._raw, dtype=np.dtype(dtype), count=n, offset=offset)

    def free(self):
        pass


class SimStream:
    """The simulated device: one thread runs the enqueued operations in order."""

    def __init__(self) -> None:
        self._ops: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="sim-gpu", daemon=True)
        self._thread.start()

    def put(self, op) -> None:
        self._ops.put(op)

    def _run(self) -> None:
        while (op := self._ops.get()) is not None:
            op()

    def synchronize(self) -> None:
        done = threading.Event()
        self.put(done.set)
        done.wait()

    def close(self) -> None:
        self._ops.put(None)
        self._thread.join()


class _Event:
    def __init__(self, timing=False):
        self.t = 0.0
        self._done = threading.Event()
        self._done.set()

    def record(self, stream):
        self._done.clear()
        stream.put(self._fire)

    def _fire(self):
        self.t = time.perf_counter()
        self._done.set()

    def synchronize(self):
        self._done.wait()

    def since(self, earlier):
        return 1e3 * (self.t - earlier.t)


class SimWord:
    """kernels.cuda.driver.HostWord's stand-in: the simulated stream waits on it (kernels/cuda/mask_gate.py)."""

    def __init__(self) -> None:
        self._v = 0
        self._cond = threading.Condition()

    @property
    def value(self) -> int:
        return self._v

    def wait(self, stream, value: int) -> None:
        def op():
            with self._cond:
                self._cond.wait_for(lambda: (self._v - value) & 0xFFFFFFFF < 0x80000000)
        stream.put(op)

    def open(self, value: int) -> None:
        with self._cond:
            self._v = value & 0xFFFFFFFF
            self._cond.notify_all()

    def free(self) -> None:
        pass


def _standin_overlap(memory: dict):
    """kernels.cuda.overlap imported over a stand-in driver whose memory is `memory` (a dict of arrays)
    and whose stream is a SimStream."""
    def dtod(dst, src, nbytes, stream):
        def op():
            memory[_TOKENS][(dst - _TOKENS) // 4:(dst - _TOKENS) // 4 + nbytes // 4] = \
                memory[_SAMPLE_OUT][(src - _SAMPLE_OUT) // 4:][:nbytes // 4]
        stream.put(op)

    def dtoh_async(dst, src, nbytes, stream):
        stream.put(lambda: ctypes.memmove(dst, memory[src].ctypes.data, nbytes))

    sys.modules["kernels.cuda.driver"] = types.SimpleNamespace(
        Pinned=HostPinned, Event=_Event, htod_pinned=lambda *a: None, dtod=dtod, dtoh_async=dtoh_async,
        HostWord=SimWord)
    for name in ("kernels.cuda.overlap", "kernels.cuda.step_timing", "kernels.cuda.mask_gate"):
        sys.modules.pop(name, None)
    return importlib.import_module("kernels.cuda.overlap")


class _Rows:
    """A step's logits rows, by index only (nothing is computed)."""

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows

    @property
    def shape(self):
        return (len(self.rows), 0)

    def __getitem__(self, idx):
        return _Rows(self.rows[idx])


class InstantDevice:
    """The CUDA backend's interface to the launcher; every device operation takes no time."""
    t_cap, r_cap, ints_cap, sample_out = 10**6, 10**6, 4096, _SAMPLE_OUT
    name = "instant"
    gated_masks = True      # a mask's bits may come later: the stream waits for them (mask.gate)

    def __init__(self, memory: dict, vocab: int, num_pages: int, page_size: int, forward_s: float,
                 sample_s: float, prefix: list[int], story: list[int]) -> None:
        self.memory, self.vocab, self.num_pages, self.page_size = memory, vocab, num_pages, page_size
        self.prefix, self.story = np.array(prefix, np.int64), np.array(story, np.int64)
        self.forward_s, self.sample_s = forward_s, sample_s
        self.stream = SimStream()
        self.dev = types.SimpleNamespace(stream=self.stream, make_current=lambda: None,
                                         synchronize=self.stream.synchronize)
        self.step = 0

    def forward(self, batch, patch=None):
        tokens = np.array(batch.token_ids, dtype=np.int32)
        self.stream.put(lambda: self.memory.__setitem__(_TOKENS, tokens))       # the staged tokens
        if patch is not None:
            patch({"tokens": _TOKENS})
        if self.forward_s:
            self.stream.put(lambda: time.sleep(self.forward_s))
        return _Rows(np.asarray(batch.logits_rows, dtype=np.int32))

    def masked_logits(self, logits, mask):
        return (logits, mask)

    def sample_enqueue(self, logits, sampling):
        mask = None
        if isinstance(logits, tuple):
            logits, mask = logits
        n = len(logits.rows)
        pos, seed = np.asarray(sampling.step, np.int64), np.asarray(sampling.seed, np.int64)
        if getattr(mask, "gate", None) is not None:
            mask.gate(self.stream)           # the bits are read after the mask's thread opened the gate
        self.stream.put(lambda: self._sample(pos, seed, mask))
        return n

    def _sample(self, pos: np.ndarray, seed: np.ndarray, mask) -> None:
        if self.sample_s:
            time.sleep(self.sample_s)
        k = len(self.prefix)
        ids = np.where(pos < k, self.prefix[np.minimum(pos, k - 1)],
                       self.story[(pos - k + 37 * seed) % len(self.story)])
        if mask is not None:
            rows = mask.rows
            words = mask.bits[np.arange(len(rows)), ids[rows] >> 5]
            refused = np.flatnonzero(((words >> (ids[rows] & 31).astype(np.uint32)) & 1) == 0)
            for j in refused.tolist():          # (few: most tokens are allowed inside a string)
                r = rows[j]
                allowed = np.flatnonzero(np.unpackbits(mask.bits[j].view(np.uint8), bitorder="little"))
                later = allowed[allowed >= ids[r]]
                ids[r] = later[0] if len(later) else allowed[0]
        self.memory[_SAMPLE_OUT] = ids.astype(np.int32)


def _dump(path: str, tok, prompt: list[int], vocab: int, eos: int) -> None:
    import json
    with open(path, "w") as f:
        json.dump({"hf_json": tok.hf_json(), "special": sorted(tok.special_ids), "bos": tok.bos_id, "eos": eos,
                   "vocab": vocab, "prompt": prompt}, f)


def _loaded(path: str):
    """(tokenizer, prompt ids, vocab size, EOS) from a --dump: the tokenizer rebuilt from its HF definition."""
    import json

    from kernels.tokenizer import Tokenizer
    with open(path) as f:
        src = json.load(f)
    model = json.loads(src["hf_json"])["model"]
    tokens = sorted(model["vocab"], key=model["vocab"].get)
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    special = set(src["special"])
    types = [3 if i in special else 1 for i in range(len(tokens))]     # 3: control (kernels/tokenizer.py)
    return Tokenizer(tokens, merges, types, src["bos"], src["eos"]), src["prompt"], src["vocab"], src["eos"]


def _sunk(handle, items: list) -> asyncio.Future:
    """Read `handle` as the engine service does (aotx.engine_service: RequestHandle.redirect with a plain sink):
    each delta's wire item appended to `items`, a quiet token's made from its parts (no Delta at all); the
    future is set by its final delta."""
    done = asyncio.get_running_loop().create_future()
    rid, prompt_tokens = handle.request_id, handle.prompt_tokens

    def sink(d) -> None:
        items.append((rid, d.text, d.token_ids, d.prompt_tokens, d.completion_tokens))
        if d.finish_reason is not None:
            done.set_result(d.finish_reason)

    def plain(text: str, token_ids: tuple, completion_tokens: int) -> None:
        items.append((rid, text, token_ids, prompt_tokens, completion_tokens))
    handle.redirect(sink, plain)
    return done


async def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--streams", type=int, default=64)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--forward-ms", type=float, default=0.0, help="the simulated forward's time")
    ap.add_argument("--sample-ms", type=float, default=0.0, help="the simulated sampling's time")
    ap.add_argument("--dump", help="write the tokenizer and the prompt here (for a host without the GGUF) and stop")
    ap.add_argument("--load", help="read them from here instead of loading the GGUF")
    ap.add_argument("--kinds", default="", help="comma-separated runs to make (plain and any of json_schema, "
                    "all_allowed, json_schema_worker, all_allowed_worker, json_schema_engine, all_allowed_engine); all "
                    "by default")
    ap.add_argument("--sink", action="store_true", help="the readers take the deltas as the engine service does "
                    "(a sink, and a plain sink for the quiet tokens' parts: no Delta for those), not by iterating")
    args = ap.parse_args(argv)

    from aotx.engine import Engine, EngineConfig, SamplingParams
    from aotx.structured import ConstraintCompiler
    from kernels import load_model
    from ops.bench.structured import PROMPT, SCHEMA
    from ops.bench.structured_probe import (
        AllAllowed,
        HostClocks,
        MaskClock,
        MaskTimes,
        ThreadCpu,
        breakdown_table,
        mask_chain_table,
    )

    if args.load:
        tok, prompt, vocab, eos = _loaded(args.load)
    else:
        bundle = load_model(progress=False)
        tok, vocab, eos = bundle.tokenizer, bundle.config.vocab_size, bundle.config.eos_id
        prompt = tok.encode(bundle.chat_template.render([{"role": "user", "content": PROMPT}], add_generation_prompt=True))
    if args.dump:
        _dump(args.dump, tok, prompt, vocab, eos)
        return
    page_size = 16
    num_pages = args.streams * -(-(len(prompt) + args.tokens) // page_size) + 8
    memory: dict = {}
    overlap = _standin_overlap(memory)
    device = InstantDevice(memory, vocab, num_pages, page_size, args.forward_ms / 1e3,
                           args.sample_ms / 1e3, tok.encode('{"story": "'), tok.encode(STORY * 4))
    launcher = overlap.CudaStepLauncher(device)
    launcher.breakdown(True)
    engine = Engine(device, tok, EngineConfig(max_batch=args.streams, num_pages=num_pages, page_size=page_size,
                                              max_model_len=4096), launcher=launcher)
    schema = ConstraintCompiler(tok).json_schema(SCHEMA)
    allowed = AllAllowed(schema.vocab_size, eos)
    # *_worker: the sampling enqueued by the mask worker after the fill, not at the launch behind a gate
    # (the session-6 way); *_engine: by the engine thread (the session-5 way)
    kinds = {"plain": None, "json_schema": schema, "all_allowed": allowed, "json_schema_worker": schema,
             "all_allowed_worker": allowed, "json_schema_engine": schema, "all_allowed_engine": allowed}
    if args.kinds:
        want = ["plain"] + [k for k in args.kinds.split(",") if k and k != "plain"]
        if not set(want) <= set(kinds):
            ap.error(f"--kinds: of {', '.join(kinds)}")
        kinds = {k: kinds[k] for k in want}
    clock, host, chain = MaskClock(eos), HostClocks(), MaskTimes()
    cpu: dict[str, list] = {k: [{}, 0] for k in kinds}     # CPU ms by thread summed over the rounds, steps
    engine.start()
    best: dict[str, tuple[float, dict]] = {}
    try:
        for i in range(args.repeat + 1):                # round 0 warms up
            for kind, constraint in kinds.items():
                params = [SamplingParams(max_tokens=args.tokens, temperature=0.7, seed=s, constraint=constraint)
                          for s in range(args.streams)]
                launcher.reset_timing()
                launcher.sample_on_worker = not kind.endswith("_engine")
                launcher.gated = launcher.gate is not None and not kind.endswith(("_engine", "_worker"))
                host.start()
                chain.reset()
                cpu0 = ThreadCpu.snapshot()
                counted = i and kind == os.environ.get("AOTX_CALLGRIND_KIND")   # (instructions: under callgrind)
                if counted:
                    subprocess.run(["callgrind_control", "-i", "on", str(os.getpid())], check=True,
                                   stdout=subprocess.DEVNULL)
                start = time.perf_counter()
                handles = [engine.submit(prompt, p) for p in params]
                if args.sink:
                    await asyncio.gather(*(_sunk(h, []) for h in handles))
                else:
                    for h in handles:
                        async for _ in h:
                            pass
                wall = time.perf_counter() - start
                steps = launcher.timing()["steps"]
                if counted:
                    subprocess.run(["callgrind_control", "-i", "off", str(os.getpid())], check=True,
                                   stdout=subprocess.DEVNULL)
                    print(f"[structured_host] {kind}: {steps} steps counted", file=sys.stderr)
                if i:
                    for name, ms_ in ThreadCpu.per_step(cpu0, ThreadCpu.snapshot(), 1).items():
                        cpu[kind][0][name] = cpu[kind][0].get(name, 0.0) + ms_
                    cpu[kind][1] += steps
                ms = 1e3 * wall / max(steps, 1)
                if i and (kind not in best or ms < best[kind][0]):
                    parts = launcher.timeline.summary()
                    parts["rows_per_step"] = args.streams * args.tokens / max(steps, 1)
                    best[kind] = (ms, host.since(), parts, chain.summary())
            if i:
                print(f"[structured_host] round {i}: " + ", ".join(f"{k} {best[k][0]:.3f} ms/step" for k in kinds),
                      file=sys.stderr)
    finally:
        await engine.stop()
        device.stream.close()
    print(f"\n## Steps over a simulated device (forward {args.forward_ms} ms, sampling {args.sample_ms} ms; "
          f"{args.streams} streams, {args.tokens} tokens, best of {args.repeat}; {os.cpu_count()} CPUs; "
          f"AOTX_SAMPLE_ON_WORKER={os.environ.get('AOTX_SAMPLE_ON_WORKER', '1')})\n")
    print("| run | ms per step (wall ÷ steps) | ÷ plain |")
    print("|---|---:|---:|")
    for kind, (ms, _, _, _) in best.items():
        print(f"| {kind} | {ms:.3f} | {ms / best['plain'][0]:.2f} |")
    print()
    print(breakdown_table([(kind, parts, host_ms) for kind, (_, host_ms, parts, _) in best.items()]))
    print()
    print(mask_chain_table([(kind, m) for kind, (_, _, _, m) in best.items()]))
    names = sorted({n for by, _ in cpu.values() for n in by})
    print("\n| run | " + " | ".join(f"CPU ms a step: {n}" for n in names) + " |")
    print("|---|" + "---:|" * len(names))
    for kind, (by, steps) in cpu.items():
        print(f"| {kind} | " + " | ".join(f"{by.get(n, 0.0) / max(steps, 1):.3f}" for n in names) + " |")
    print("\n(each thread's CPU time over every measured round ÷ their steps: /proc/self/task/*/schedstat)")
    if clock.calls:
        print(f"\nmask fill: {1e3 * clock.seconds / clock.calls:.3f} ms per call ({clock.rows / clock.calls:.1f} rows)")


if __name__ == "__main__":
    asyncio.run(main())
