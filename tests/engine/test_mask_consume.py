"""The mask worker consumes the tokens read back (aotx.engine.mask_worker, MaskWorker.consumes): the engine
thread never calls llguidance for them, checks each against the bit of the mask that let it through
(RowMatcher.sync), falls back to waiting for the worker's consume where those bits are gone, and a token
the mask refused still ends its request with an error."""
from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

from aotx.engine import SamplingParams
from aotx.engine.masks import LateMask, step_mask
from aotx.engine.mask_worker import MaskWorker
from kernels.token_mask import TokenMask, allowed_ids, mask_words

from .test_engine_structured import PERSON, QUESTION, compiler, run  # noqa: F401  (compiler: a fixture)


class _Launch:
    """A launched step whose ids come once `release` is set (the worker's consume waits for them)."""

    def __init__(self, ids) -> None:
        self.release = threading.Event()
        self._ids = np.array(ids, dtype=np.int32)

    def ids(self):
        self.release.wait()
        return self._ids


def _first_step(compiler, worker, memory=None):
    c = compiler.json_schema(PERSON)
    seq = SimpleNamespace(seq_id=1, matcher=c.start(), output_ids=[], pending=0, pending_row=-1,
                          params=SimpleNamespace(constraint=c))
    first = step_mask([seq], None)
    assert worker.take(first) and first.worker_consumes
    if memory is not None:
        first.into(memory)                # (as CUDA's launcher gives its page-locked buffers)
    worker.handed(first)                  # no pending token: filled at once
    bits = first().bits[0].copy()
    return c, seq, first, bits


def _second_step(seq, worker, launch):
    """The first step's token is pending on the device; the second step's mask is handed to the worker,
    which waits for that step's ids (`launch`) to consume the token."""
    token = int(launch._ids[0])
    seq.pending, seq.pending_row = 1, 0
    second = step_mask([seq], launch)
    assert worker.take(second) and second.worker_consumes and second.reads_previous
    worker.handed(second)
    seq.pending = 0
    seq.output_ids.append(token)
    worker.read_back(launch)              # handed over: the engine thread consumes nothing
    return second


def test_the_engine_thread_checks_a_token_against_the_bits_that_let_it_through(compiler, bundle):
    worker, launch = MaskWorker(), _Launch([])
    try:
        c, seq, first, bits = _first_step(compiler, worker)
        ok_ids = allowed_ids(bits, c.vocab_size)
        good = int(bundle.tokenizer.encode('{"')[0])
        assert good in ok_ids
        bad = next(t for t in range(c.vocab_size) if t not in set(ok_ids.tolist()))
        launch._ids = np.array([good], np.int32)
        second = _second_step(seq, worker, launch)
        m = seq.matcher
        # the worker waits for the launch's ids: nothing is consumed yet, and the checks call no llguidance
        assert m.consumed == 0
        assert m.sync(0, good) is True and m.sync(0, bad) is False and m.consumed == 0
        launch.release.set()
        got = second()                    # the worker consumed the token, then filled
        assert second.thread == "aotx-mask-fill" and m.consumed == 1 and m.tokens == [good]
        assert m.sync(0, good) is True and m.sync(0, bad) is False   # now a comparison
        assert len(allowed_ids(got.bits[0], c.vocab_size)) >= 1
    finally:
        launch.release.set()
        worker.close()


def test_where_the_bits_are_gone_the_check_waits_for_the_workers_consume(compiler, bundle):
    """A mask's bits in memory that a later mask was given (CUDA's two page-locked buffers alternate):
    that mask no longer answers, and the engine thread's check waits for the worker's consume instead."""
    worker, launch = MaskWorker(), _Launch([])
    try:
        memory = np.zeros((1, mask_words(compiler.json_schema(PERSON).vocab_size)), np.uint32)
        c, seq, first, bits = _first_step(compiler, worker, memory)
        good = int(bundle.tokenizer.encode('{"')[0])
        launch._ids = np.array([good], np.int32)
        second = _second_step(seq, worker, launch)
        assert first.allows(0, good) is True and first().bits is memory
        later = LateMask([seq], None)
        later.into(memory)                       # the same memory handed to a later mask
        assert first.allows(0, good) is None
        m = seq.matcher
        checked = []
        t = threading.Thread(target=lambda: checked.append(m.sync(0, good)))
        t.start()
        launch.release.set()
        t.join()
        assert checked == [True] and m.consumed == 1
    finally:
        launch.release.set()
        worker.close()


def test_a_refused_token_read_back_fails_the_row_at_once(compiler, bundle):
    """A token outside the mask that let it through: the engine thread's check says so before the worker
    has consumed it, and the worker's consume then refuses it too (the row's next mask allows all, unused)."""
    worker, launch = MaskWorker(), _Launch([])
    try:
        c, seq, first, bits = _first_step(compiler, worker)
        ok_ids = set(allowed_ids(bits, c.vocab_size).tolist())
        bad = next(t for t in range(c.vocab_size) if t not in ok_ids)
        launch._ids = np.array([bad], np.int32)
        second = _second_step(seq, worker, launch)
        m = seq.matcher
        assert m.sync(0, bad) is False and m.consumed == 0
        launch.release.set()
        got = second()
        assert m.failed and m.sync(0, bad) is False and "satisfy the grammar" in m.error
        assert (got.bits[0] == np.uint32(0xFFFFFFFF)).all()
    finally:
        launch.release.set()
        worker.close()


@pytest.mark.parametrize("consume", ["worker", "engine"])
async def test_a_token_the_mask_refused_ends_the_request_with_an_error(make_real_engine, chat_prompt, compiler,
                                                                      numpy_backend, monkeypatch, consume):
    """A sampler that draws outside the mask (here: the mask inverted): one step behind, with the mask
    worker consuming (or, AOTX_MASK_CONSUME=engine, the engine thread), the request ends with an error.
    With the worker consuming, the engine thread checks the mask's own bits, so the first refused token's
    text is never delivered; llguidance's consume (the engine thread's check otherwise) may accept a
    token its mask left out (here the first, "{" where the mask has only the forced bytes' own
    tokenisation), and the error comes a token later."""
    monkeypatch.setenv("AOTX_MASK_CONSUME", consume)
    real = type(numpy_backend).masked_logits

    def inverted(self, logits, mask):
        return real(self, logits, TokenMask(mask.rows, ~np.asarray(mask.bits)))

    monkeypatch.setattr(type(numpy_backend), "masked_logits", inverted)
    engine = make_real_engine(overlap=True)
    assert engine.runner.masks.consumes is (consume == "worker")
    text, last = await run(engine.submit(chat_prompt(QUESTION), SamplingParams(
        max_tokens=8, temperature=0, constraint=compiler.json_schema(PERSON))))
    assert last.finish_reason == "error" and "constraint" in (last.error or "")
    assert text == "" or consume == "engine"
    assert engine.runner.masks.started >= 1

