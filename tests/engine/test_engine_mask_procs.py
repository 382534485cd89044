"""Token masks from matcher processes (AOTX_MASK_PROCS, aotx.engine.mask_procs), over the real numpy
engine: the same tokens as the thread path, a process that dies fails only its own requests (with a
clear error, the engine going on), and stopping the engine leaves no process and no shared memory."""
from __future__ import annotations

import json
import os
import signal
import time

import jsonschema
import pytest

from aotx.engine import SamplingParams
from aotx.engine.mask_procs import ProcLateMask, ProcMaskWorker
from aotx.structured import ConstraintCompiler

from .test_engine_structured import PERSON, _token_ids

STORY = {"type": "object", "properties": {"story": {"type": "string", "minLength": 2000}},
         "required": ["story"], "additionalProperties": False}
QUESTION = "Describe a person called Ann who is 31 as JSON with keys name and age."


@pytest.fixture(scope="module")
def compiler(bundle):
    return ConstraintCompiler(bundle.tokenizer)


def _params(compiler):
    c = compiler.json_schema(PERSON)
    return [SamplingParams(max_tokens=20, temperature=0, constraint=c),
            SamplingParams(max_tokens=12, temperature=1.0, seed=7, constraint=c),
            SamplingParams(max_tokens=4, temperature=1.0, seed=3)]      # an unconstrained row beside them


def _gone(pool) -> None:
    """Every process of `pool` has exited and its shared memory is unlinked."""
    assert pool.processes() and all(p.popen.poll() is not None for p in pool.processes())
    assert pool.segment_names() == [] or not any(os.path.exists(f"/dev/shm/{n}") for n in pool.segment_names())


async def test_processes_draw_the_thread_paths_tokens_and_leave_nothing_behind(
        make_real_engine, chat_prompt, compiler, bundle, monkeypatch):
    """One step behind (the classic loop runs these with AOTX_MASK_PROCS set over the structured tests)."""
    prompt, params = chat_prompt(QUESTION), _params(compiler)
    threads = await _token_ids(make_real_engine(overlap=True), prompt, params)
    monkeypatch.setenv("AOTX_MASK_PROCS", "2")
    engine = make_real_engine(overlap=True)
    assert isinstance(engine.runner.masks, ProcMaskWorker)
    assert await _token_ids(engine, prompt, params) == threads
    jsonschema.validate(json.loads(bundle.tokenizer.decode(threads[0][:-1])), PERSON)     # (the last is EOS)
    pool = engine.runner.masks.pool
    assert pool.started == 2 and pool.steps > 10
    assert sorted(len(p.keys) for p in pool.processes()) in ([0, 0], [0, 1], [1, 1])   # rows spread, then dropped
    names = pool.segment_names()
    assert names and all(os.path.exists(f"/dev/shm/{n}") for n in names)
    await engine.stop()
    assert all(p.popen.poll() is not None for p in pool.processes())
    assert not any(os.path.exists(f"/dev/shm/{n}") for n in names)


async def test_a_process_that_dies_fails_only_its_requests(make_real_engine, chat_prompt, compiler, monkeypatch):
    monkeypatch.setenv("AOTX_MASK_PROCS", "2")
    engine = make_real_engine(overlap=True)
    story = compiler.json_schema(STORY)
    prompt = chat_prompt("Write a story about a dragon as JSON with the key story.")
    handles = [engine.submit(prompt, SamplingParams(max_tokens=12, temperature=0.7, seed=i, constraint=story))
               for i in range(2)]
    firsts = [await h.__anext__() for h in handles]          # every row has its process now
    pool = engine.runner.masks.pool
    victim = pool.processes()[0]
    assert len(victim.keys) == 1
    os.kill(victim.pid, signal.SIGKILL)
    ends = []
    for first, h in zip(firsts, handles):
        deltas = [first] + [d async for d in h]
        ends.append((deltas[-1].finish_reason, deltas[-1].error, "".join(d.text for d in deltas)))
    failed = [e for e in ends if e[0] == "error"]
    assert len(failed) == 1, ends
    for _, error, _ in failed:
        assert f"matcher process 0 (pid {victim.pid}) exited with code -9" in error, error
    for reason, _, text in (e for e in ends if e[0] != "error"):
        assert reason == "length" and text.startswith('{"story": "')
    # the engine goes on: a new constrained request gets a fresh process in the dead one's place
    text, last = "", None
    async for d in engine.submit(chat_prompt(QUESTION), SamplingParams(max_tokens=24, temperature=0,
                                                                       constraint=compiler.json_schema(PERSON))):
        text, last = text + d.text, d
    assert last.finish_reason == "stop"
    jsonschema.validate(json.loads(text), PERSON)
    assert pool.started == 3
    await engine.stop()
    _gone(pool)


async def test_a_process_that_stops_answering_is_killed_after_the_timeout(make_real_engine, chat_prompt, compiler,
                                                                        monkeypatch):
    monkeypatch.setenv("AOTX_MASK_PROCS", "1")
    monkeypatch.setenv("AOTX_MASK_PROC_TIMEOUT_S", "1")
    engine = make_real_engine()
    handle = engine.submit(chat_prompt(QUESTION), SamplingParams(max_tokens=40, temperature=0,
                                                                 constraint=compiler.json_schema(PERSON)))
    first = await handle.__anext__()
    pool = engine.runner.masks.pool
    victim = pool.processes()[0]
    os.kill(victim.pid, signal.SIGSTOP)          # alive, never answering
    try:
        deltas = [first] + [d async for d in handle]
    finally:
        if victim.popen.poll() is None:
            os.kill(victim.pid, signal.SIGCONT)
    assert deltas[-1].finish_reason == "error"
    assert "did not answer within 1 s: killed" in deltas[-1].error
    await engine.stop()
    _gone(pool)


def test_a_mask_whose_step_before_was_never_read_back_fails_instead_of_sending_late(bundle, compiler):
    """Frames go to the processes in launch order, from the engine thread; a held mask run on another
    thread (its previous launch failed) fails rather than send out of order."""
    import threading
    from types import SimpleNamespace
    worker = ProcMaskWorker(1)
    try:
        c = compiler.json_schema(PERSON)
        seq = SimpleNamespace(seq_id=1, matcher=c.start(), output_ids=[], pending=1, pending_row=0,
                              params=SimpleNamespace(constraint=c))
        mask = worker.step_mask([seq], SimpleNamespace(ids=lambda: [5]))
        assert isinstance(mask, ProcLateMask) and mask.reads_previous
        mask.deferred = True
        t = threading.Thread(target=mask.run)
        t.start()
        t.join()
        with pytest.raises(RuntimeError, match="never read back"):
            mask()
        pool = worker.pool
    finally:
        worker.close()
    _gone(pool)


def test_a_mask_that_never_runs_does_not_hold_the_steps_after_it(bundle, compiler, monkeypatch):
    """A mask sent at its launch whose launch failed before asking for it is never collected: two steps
    later its half of the shared memory is given up at once (no wait), and later masks are right."""
    from types import SimpleNamespace

    import numpy as np

    from kernels.token_mask import allowed_ids
    monkeypatch.setenv("AOTX_MASK_PROC_TIMEOUT_S", "30")
    worker = ProcMaskWorker(1, bundle.tokenizer)
    try:
        c = compiler.json_schema(PERSON)
        seq = SimpleNamespace(seq_id=1, matcher=c.start(), output_ids=[], pending=0, pending_row=-1,
                              params=SimpleNamespace(constraint=c))
        lost = worker.step_mask([seq], None)          # sent at once (no pending token), never run
        start = time.monotonic()
        first = worker.step_mask([seq], None)         # (the same state: nothing consumed meanwhile)
        first_bits = first().bits.copy()
        again = worker.step_mask([seq], None)         # the lost one's half: given up, not waited for
        assert np.array_equal(again().bits, first_bits)
        assert time.monotonic() - start < 20
        assert lost._ticket.abandoned and not lost._ticket.collected.is_set()
        here = np.empty_like(first_bits[0])
        c.start().fill(here)                          # the same row's mask, filled in this process
        assert np.array_equal(first_bits[0], here) and len(allowed_ids(here, c.vocab_size)) >= 1
        pool = worker.pool
    finally:
        worker.close()
    _gone(pool)
