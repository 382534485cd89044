"""Constrained decoding in the engine, over the real SmolLM2-135M numpy backend."""
from __future__ import annotations

import asyncio
import json

import jsonschema
import numpy as np
import pytest

from aotx.engine import SamplingParams
from aotx.structured import ConstraintCompiler
from kernels.token_mask import TokenMask
from tests.driver_standin import use_standin_driver

PERSON = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 12},
                                           "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
QUESTION = "Describe a person called Ann who is 31 as JSON with keys name and age."


@pytest.fixture(scope="module")
def compiler(bundle):
    return ConstraintCompiler(bundle.tokenizer)


async def run(handle):
    deltas = [d async for d in handle]
    return "".join(d.text for d in deltas), deltas[-1]


@pytest.mark.parametrize("overlap", [False, True])
async def test_constrained_output_validates_greedy_and_sampled(make_real_engine, chat_prompt, compiler, overlap):
    engine = make_real_engine(overlap=overlap)
    c = compiler.json_schema(PERSON)
    prompt = chat_prompt(QUESTION)
    params = [SamplingParams(max_tokens=40, temperature=0, constraint=c)] + [
        SamplingParams(max_tokens=40, temperature=1.0, seed=s, constraint=c) for s in range(3)]
    free = SamplingParams(max_tokens=8, temperature=0)
    results = await asyncio.gather(*(run(engine.submit(prompt, p)) for p in params),
                                   run(engine.submit(prompt, free)))
    for text, last in results[:-1]:
        assert last.finish_reason == "stop", (text, last)
        jsonschema.validate(json.loads(text), PERSON)
    # the unconstrained neighbour is what it is alone: rows without a constraint are untouched
    alone = await run(engine.submit(prompt, free))
    assert results[-1][0] == alone[0]


async def test_json_object_mode_gives_an_object_or_says_length(make_real_engine, chat_prompt, compiler):
    engine = make_real_engine()
    text, last = await run(engine.submit(chat_prompt("List three fruits."),
                                         SamplingParams(max_tokens=24, temperature=0, constraint=compiler.json_object())))
    assert last.finish_reason in ("stop", "length")
    if last.finish_reason == "stop":
        assert isinstance(json.loads(text), dict)
    else:
        assert text.startswith("{")


async def test_a_budget_cut_is_length_not_stop(make_real_engine, chat_prompt, compiler):
    engine = make_real_engine()
    text, last = await run(engine.submit(chat_prompt(QUESTION),
                                         SamplingParams(max_tokens=3, temperature=0, constraint=compiler.json_schema(PERSON))))
    assert last.finish_reason == "length"
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)


async def test_one_step_behind_the_mask_learns_the_pending_token_late(make_real_engine, chat_prompt, compiler,
                                                                        monkeypatch):
    """Overlapped: a constrained step is not read back before the next launch; the next launch's mask
    reads the pending token itself (after the forward is enqueued), and the output still validates."""
    from aotx.engine import masks
    late = []
    real_call = masks.LateMask.__call__

    def spy(self):
        late.append(sum(row >= 0 for _, row, _ in self._seqs))
        return real_call(self)

    monkeypatch.setattr(masks.LateMask, "__call__", spy)
    engine = make_real_engine(overlap=True)
    text, last = await run(engine.submit(chat_prompt(QUESTION),
                                         SamplingParams(max_tokens=40, temperature=0, constraint=compiler.json_schema(PERSON))))
    assert last.finish_reason == "stop"
    jsonschema.validate(json.loads(text), PERSON)
    assert late and sum(late) >= len(late) - 1      # every mask after the first learnt its token late


_CLASSIC: dict[str, list] = {}      # the classic loop's token ids of _worker_params, run once per module


def _worker_params(compiler):
    c = compiler.json_schema(PERSON)
    return [SamplingParams(max_tokens=40, temperature=0, constraint=c),
            SamplingParams(max_tokens=40, temperature=1.0, seed=7, constraint=c),
            SamplingParams(max_tokens=8, temperature=1.0, seed=3)]      # an unconstrained row beside them


async def _token_ids(engine, prompt, params):
    return [[t for d in [d async for d in h] for t in d.token_ids] for h in [engine.submit(prompt, p) for p in params]]


async def _classic_ids(make_real_engine, prompt, params):
    if "ids" not in _CLASSIC:
        _CLASSIC["ids"] = await _token_ids(make_real_engine(overlap=False), prompt, params)
    return _CLASSIC["ids"]


async def test_masks_are_computed_on_the_worker_while_the_step_runs(make_real_engine, chat_prompt, compiler,
                                                                  bundle, monkeypatch):
    """Overlapped: each constrained launch's mask (the step before's tokens consumed, the bitmasks
    filled) is computed on the mask worker thread, not on the engine thread, and the launch does not
    wait for it (the device thread samples once it is ready: aotx.engine.mask_worker). Output is the
    classic loop's, token for token, seeded draws included."""
    from aotx.engine import masks
    seen = []       # per mask: (thread that computed it, rows with a pending token)
    real_run = masks.LateMask.run

    def spy(self):
        real_run(self)
        seen.append((self.thread, sum(row >= 0 for _, row, _ in self._seqs)))

    monkeypatch.setattr(masks.LateMask, "run", spy)
    prompt, params = chat_prompt(QUESTION), _worker_params(compiler)
    classic = await _classic_ids(make_real_engine, prompt, params)
    seen.clear()
    engine = make_real_engine(overlap=True)
    assert await _token_ids(engine, prompt, params) == classic
    for ids in classic[:2]:
        jsonschema.validate(json.loads(bundle.tokenizer.decode(ids[:-1])), PERSON)     # (the last is EOS)
    assert len(seen) > 10 and {t for t, _ in seen} == {"aotx-mask-fill"}, seen
    await engine.stop()     # the worker is joined: a mask handed over after the last token has run too
    assert sum(pending > 0 for _, pending in seen) >= len(seen) - 2
    assert engine.runner.masks.started == len(seen)


def _mask_threads(monkeypatch) -> set:
    """The names of the threads that compute masks from now on (LateMask.run spied)."""
    from aotx.engine import masks
    threads: set = set()
    real_run = masks.LateMask.run

    def spy(self):
        real_run(self)
        threads.add(self.thread)

    monkeypatch.setattr(masks.LateMask, "run", spy)
    return threads


async def test_without_the_worker_the_masks_are_computed_on_the_engine_thread(make_real_engine, chat_prompt,
                                                                             compiler, monkeypatch):
    monkeypatch.setenv("AOTX_MASK_WORKER", "0")
    threads = _mask_threads(monkeypatch)
    engine = make_real_engine(overlap=True)
    text, last = await run(engine.submit(chat_prompt(QUESTION), SamplingParams(
        max_tokens=40, temperature=0, constraint=compiler.json_schema(PERSON))))
    jsonschema.validate(json.loads(text), PERSON)
    assert threads == {"aotx-engine"} and engine.runner.masks.started == 0


async def test_the_worker_lowers_the_gil_switch_interval_only_while_it_runs(make_real_engine, chat_prompt,
                                                                          compiler):
    import sys

    from aotx.engine import mask_worker
    before = sys.getswitchinterval()
    engine = make_real_engine(overlap=True)
    text, last = await run(engine.submit(chat_prompt(QUESTION), SamplingParams(
        max_tokens=12, temperature=0, constraint=compiler.json_schema(PERSON))))
    assert engine.runner.masks.started > 0
    assert sys.getswitchinterval() == pytest.approx(min(before, mask_worker.SWITCH_S), rel=1e-3)
    await engine.stop()
    assert sys.getswitchinterval() == before


class _CudaLike:
    """The numpy backend behind the CUDA launcher's interface (kernels/cuda/overlap.py over a stand-in
    driver): the device's sampled ids live in `memory[sample_out]`, the launcher's device-to-device
    copies fill a step's placeholder tokens from them, and sampling runs when the launcher enqueues it."""
    t_cap, r_cap, ints_cap, sample_out, TOKENS = 10**6, 10**6, 4096, 0xD0, 0x100000

    def __init__(self, backend, memory):
        self.np, self.memory = backend, memory
        self.num_pages, self.page_size = backend.num_pages, backend.page_size
        self.dev = type("Dev", (), {"stream": None, "make_current": lambda s: None, "synchronize": lambda s: None})()
        self._tokens = None
        self.sampled_on: list[tuple[str, bool]] = []     # per sampling: (its thread, a masked step)

    def forward(self, batch, patch=None):
        import dataclasses
        self._tokens = np.array(batch.token_ids, dtype=np.int32)
        self.memory[self.TOKENS] = self._tokens
        if patch is not None:
            patch({"tokens": self.TOKENS})
        return self.np.forward(dataclasses.replace(batch, token_ids=self._tokens))

    _masked = False

    def masked_logits(self, logits, mask):
        self._masked = True
        return self.np.masked_logits(logits, mask)

    def sample_enqueue(self, logits, sampling):
        import threading
        self.sampled_on.append((threading.current_thread().name, self._masked))
        self._masked = False
        self.memory[self.sample_out] = np.asarray(self.np.sample(logits, sampling), dtype=np.int32)
        return len(self.memory[self.sample_out])


@pytest.fixture
def cuda_overlap(monkeypatch):
    """kernels.cuda.overlap over a stand-in driver whose memory is a dict of arrays."""
    import sys

    from tests.kernels_cuda.test_overlap_mask_host import _Event, overlap_over_standin
    memory = {}

    def dtod(dst, src, nbytes, stream):
        base = _CudaLike.TOKENS
        memory[base][(dst - base) // 4:(dst - base) // 4 + nbytes // 4] = \
            memory[_CudaLike.sample_out][(src - _CudaLike.sample_out) // 4:][:nbytes // 4]

    yield overlap_over_standin(monkeypatch, _Event, memory, dtod=dtod), memory
    monkeypatch.delitem(sys.modules, "kernels.cuda.overlap", raising=False)


async def test_the_cuda_launcher_with_the_mask_worker_draws_the_classic_loops_tokens(
        make_real_engine, numpy_backend, chat_prompt, compiler, cuda_overlap, monkeypatch):
    """The CUDA launcher's host side in the real engine loop (a stand-in driver, numpy's forward and
    sampler): each constrained step's sampling waits for its mask from the worker and is enqueued by
    the worker as soon as it has filled it (not at the engine thread's next look); every token id,
    greedy and seeded, with an unconstrained row beside them, is the classic loop's."""
    module, memory = cuda_overlap
    threads = _mask_threads(monkeypatch)
    prompt, params = chat_prompt(QUESTION), _worker_params(compiler)
    classic = await _classic_ids(make_real_engine, prompt, params)
    threads.clear()
    launcher = module.CudaStepLauncher(_CudaLike(numpy_backend, memory))
    engine = make_real_engine(backend=launcher.backend, launcher=launcher)
    assert await _token_ids(engine, prompt, params) == classic
    assert threads == {"aotx-mask-fill"} and engine.runner.masks.started > 10
    masked = [t for t, m in launcher.backend.sampled_on if m]
    assert len(masked) > 10 and set(masked) == {"aotx-mask-fill"}, masked


class _Lazy:
    """Logits rows a simulated stream computes later (the stand-in of a device pointer)."""

    def __init__(self, rows: int, parent=None, index=None) -> None:
        self.rows, self.parent, self.index, self.value = rows, parent, index, None

    @property
    def shape(self):
        return (self.rows, 0)

    def __getitem__(self, index):
        return _Lazy(len(np.arange(self.rows)[index]), self, index)

    def get(self) -> np.ndarray:
        return self.value if self.parent is None else self.parent.get()[self.index]


class _StreamedNumpy:
    """The numpy backend behind the CUDA launcher's interface with every device operation run in order by
    a simulated stream (ops.bench.structured_host.SimStream): the forward, the token feed from the step
    before's ids, and the sampling, which reads a gated mask's bits only after the stream's wait for them
    (kernels/cuda/mask_gate.py) -- what the real stream does."""
    t_cap, r_cap, ints_cap, sample_out, TOKENS = 10**6, 10**6, 4096, 0xD0, 0x100000
    gated_masks = True

    def __init__(self, backend, memory, stream) -> None:
        self.np, self.memory, self.stream = backend, memory, stream
        self.num_pages, self.page_size = backend.num_pages, backend.page_size
        self.dev = type("Dev", (), {"stream": stream, "make_current": lambda s: None,
                                    "synchronize": lambda s: stream.synchronize()})()
        self.gated = 0

    def forward(self, batch, patch=None):
        import dataclasses
        tokens = np.array(batch.token_ids, dtype=np.int32)
        self.stream.put(lambda: self.memory.__setitem__(self.TOKENS, tokens))
        if patch is not None:
            patch({"tokens": self.TOKENS})
        out = _Lazy(len(batch.logits_rows))

        def run():
            out.value = self.np.forward(dataclasses.replace(batch, token_ids=self.memory[self.TOKENS]))
        self.stream.put(run)
        return out

    def masked_logits(self, logits, mask):
        return (logits, mask)

    def sample_enqueue(self, logits, sampling):
        mask = None
        if isinstance(logits, tuple):
            logits, mask = logits
        if getattr(mask, "gate", None) is not None:
            self.gated += 1
            mask.gate(self.stream)

        def run():
            arr = logits.get()
            if mask is not None:
                arr = self.np.masked_logits(arr, TokenMask(np.asarray(mask.rows), np.array(mask.bits)))
            self.memory[self.sample_out] = np.asarray(self.np.sample(arr, sampling), dtype=np.int32)
        self.stream.put(run)
        return logits.rows


@pytest.mark.parametrize("early", ["0", "1"])
async def test_the_gated_sampling_draws_the_classic_loops_tokens(make_real_engine, numpy_backend, chat_prompt,
                                                                 compiler, monkeypatch, early):
    """Each constrained step's sampling is enqueued at its launch behind a gate (kernels/cuda/mask_gate.py):
    the stream waits until the mask worker has written the bits into page-locked memory and opened it;
    every token id, greedy and seeded, with an unconstrained row beside them, is the classic loop's. So
    too where each mask is handed to the worker at its launch and the worker waits for the step before's
    ids itself (AOTX_MASK_EARLY=1)."""
    import ctypes
    import importlib
    import sys
    import types

    from ops.bench.structured_host import HostPinned, SimStream, SimWord, _Event
    monkeypatch.setenv("AOTX_MASK_GATE", "1")   # the default; set against an outer AOTX_MASK_GATE=0
    monkeypatch.setenv("AOTX_MASK_EARLY", early)
    prompt, params = chat_prompt(QUESTION), _worker_params(compiler)
    classic = await _classic_ids(make_real_engine, prompt, params)
    threads = _mask_threads(monkeypatch)
    memory: dict = {}
    stream = SimStream()

    def dtod(dst, src, nbytes, stream_):
        def op():
            base = _StreamedNumpy.TOKENS
            memory[base][(dst - base) // 4:(dst - base) // 4 + nbytes // 4] = \
                memory[_StreamedNumpy.sample_out][(src - _StreamedNumpy.sample_out) // 4:][:nbytes // 4]
        stream_.put(op)

    def dtoh_async(dst, src, nbytes, stream_):
        stream_.put(lambda: ctypes.memmove(dst, memory[src].ctypes.data, nbytes))

    use_standin_driver(monkeypatch, types.SimpleNamespace(
        Pinned=HostPinned, Event=_Event, htod_pinned=lambda *a: None, dtod=dtod, dtoh_async=dtoh_async,
        HostWord=SimWord), fresh=("kernels.cuda.overlap", "kernels.cuda.step_timing", "kernels.cuda.mask_gate"))
    engine = None
    try:
        module = importlib.import_module("kernels.cuda.overlap")
        launcher = module.CudaStepLauncher(_StreamedNumpy(numpy_backend, memory, stream))
        assert launcher.gate is not None
        engine = make_real_engine(backend=launcher.backend, launcher=launcher)
        assert engine.runner.masks.early is (early == "1")
        assert await _token_ids(engine, prompt, params) == classic
        assert threads == {"aotx-mask-fill"} and launcher.backend.gated > 10
        assert launcher.gate.issued == launcher.backend.gated
    finally:
        if engine is not None:
            await engine.stop()            # (its launcher synchronizes with the stream: before the stream goes)
        for name in ("kernels.cuda.overlap", "kernels.cuda.step_timing", "kernels.cuda.mask_gate"):
            sys.modules.pop(name, None)
        stream.close()
