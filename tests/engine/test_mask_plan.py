"""A step's mask over many rows (aotx.engine.masks.LateMask's plan): the rows' tokens consumed in one
llguidance call with the GIL released (aotx.structured.batch.consume_rows, from AOTX_MASK_CONSUME_PAR rows
on) and filled in one: the same masks, the same refusals and the same matcher states as a call a row
(AOTX_MASK_CONSUME_PAR=0); the plan is built by the mask worker before the read-back."""
from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest

from aotx.engine.masks import LateMask
from aotx.engine.mask_worker import MaskWorker
from aotx.structured import batch
from kernels.token_mask import allowed_ids

from .test_engine_structured import PERSON, compiler  # noqa: F401  (compiler: a fixture)

ROWS = 12


class _Ids:
    def __init__(self, ids) -> None:
        self._ids = np.array(ids, dtype=np.int32)

    def ids(self):
        return self._ids


def _walk(compiler, tokenizer, bad_row: int, bad_step: int) -> list[tuple[np.ndarray, list[bool], list]]:
    """ROWS sequences decode '{"name": "Ann", "age": 31}' one step behind (each step's mask consumes the
    step before's tokens, then fills); row `bad_row` draws a token its mask refuses at step `bad_step`.
    Per step: the mask's bits, which rows' matchers failed, and every row's consumed tokens."""
    c = compiler.json_schema(PERSON)
    c.prepare()       # (as many prototypes as AOTX_MASK_LEXERS says: the rows alternate between them)
    path = tokenizer.encode('{"name": "Ann", "age": 31}')
    seqs = [SimpleNamespace(seq_id=j, matcher=c.start(), output_ids=[], pending=0, pending_row=-1,
                            params=SimpleNamespace(constraint=c)) for j in range(ROWS)]
    assert len({s.matcher.group for s in seqs}) == c.prototypes
    mask = LateMask(seqs, None)
    mask.run()
    bits = mask().bits.copy()
    out = []
    for step, tok in enumerate(path[:6]):
        ids = [tok] * ROWS
        if step == bad_step:
            ids[bad_row] = next(t for t in range(c.vocab_size) if t not in set(allowed_ids(bits[bad_row],
                                                                                      c.vocab_size).tolist()))
        for j, s in enumerate(seqs):
            s.pending, s.pending_row = 1, j
        mask = LateMask(seqs, _Ids(ids))
        mask.defer(True)          # (the worker's protocol: the matchers are told who consumes)
        mask.run()
        bits = mask().bits.copy()
        for j, s in enumerate(seqs):
            s.pending = 0
            s.output_ids.append(ids[j])
        out.append((bits, [s.matcher.failed for s in seqs], [s.matcher.tokens for s in seqs]))
    return out


@pytest.mark.parametrize("lexers", ["1", "2"])
def test_one_call_for_the_rows_gives_what_a_call_a_row_gives(compiler, bundle, monkeypatch, lexers):
    monkeypatch.setenv("AOTX_MASK_LEXERS", lexers)
    calls = []
    real = batch.consume_rows
    monkeypatch.setattr(batch, "consume_rows", lambda *a: calls.append(len(a[1])) or real(*a))
    monkeypatch.setenv("AOTX_MASK_CONSUME_PAR", "0")
    alone = _walk(compiler, bundle.tokenizer, bad_row=5, bad_step=3)
    monkeypatch.setenv("AOTX_MASK_CONSUME_PAR", "8")
    par = _walk(compiler, bundle.tokenizer, bad_row=5, bad_step=3)
    assert calls and set(calls) == {ROWS}
    for (bits_a, failed_a, toks_a), (bits_p, failed_p, toks_p) in zip(alone, par):
        assert np.array_equal(bits_a, bits_p) and failed_a == failed_p and toks_a == toks_p
    bits, failed, _ = par[3]      # the refused token: its row failed and its row of the mask allows all
    assert failed == [j == 5 for j in range(ROWS)]
    assert (bits[5] == np.uint32(0xFFFFFFFF)).all() and not (bits[4] == np.uint32(0xFFFFFFFF)).all()
    assert all(f == [j == 5 for j in range(ROWS)] for _, f, _ in par[3:])


def test_the_worker_builds_the_plan_before_the_read_back(compiler, bundle):
    c = compiler.json_schema(PERSON)
    seqs = [SimpleNamespace(seq_id=j, matcher=c.start(), output_ids=[], pending=1, pending_row=j,
                            params=SimpleNamespace(constraint=c)) for j in range(ROWS)]
    first = LateMask(seqs, None)
    for s in seqs:
        s.pending = 0
    first.run()
    tok = bundle.tokenizer.encode('{"')[0]
    launch = _Ids([tok] * ROWS)
    for j, s in enumerate(seqs):
        s.pending, s.pending_row = 1, j
    worker = MaskWorker()
    worker.early = False      # the held path (AOTX_MASK_EARLY=0): an early worker consumes at once, racing the asserts
    try:
        mask = LateMask(seqs, launch)
        assert worker.take(mask)
        prepared = threading.Event()
        real = mask.prepare
        mask.prepare = lambda: (real(), prepared.set())
        worker.handed(mask)       # held until the read-back; its plan is built meanwhile
        assert prepared.wait(30) and mask._plan and not mask.ready()
        assert all(s.matcher.consumed == 0 for s in seqs)
        worker.read_back(launch)
        got = mask()
        assert [s.matcher.tokens for s in seqs] == [[tok]] * ROWS and got.bits.shape[0] == ROWS
    finally:
        worker.close()


def test_a_plan_shares_the_last_ones_lists_only_where_its_rows_are_the_same(compiler):
    """Rows that change between steps (one ends, one joins without a pending token, the order changes):
    each plan built after the last equals one built from nothing."""
    from aotx.engine.mask_plan import MaskPlan as _Plan
    c = compiler.json_schema(PERSON)
    seqs = [SimpleNamespace(seq_id=j, matcher=c.start(), output_ids=[1] * j, pending=1, pending_row=j,
                            params=SimpleNamespace(constraint=c)) for j in range(5)]
    steps = [seqs[:4], seqs[:4], [seqs[0], seqs[2], seqs[3]], [seqs[0], seqs[2], seqs[3], seqs[4]],
             [seqs[2], seqs[0], seqs[3], seqs[4]], [seqs[2], seqs[0], seqs[3], seqs[4]]]
    seqs[4].pending, seqs[4].pending_row = 0, -1       # (joins after its prefill: no token pending)
    last = None
    for i, rows in enumerate(steps):
        for j, s in enumerate(rows):
            if s.pending:
                s.pending_row = j
        mask = LateMask(rows, _Ids([0] * len(rows)))
        plan, fresh = _Plan.of(mask._seqs, mask.rows, last), _Plan.of(mask._seqs, mask.rows)
        for name in _Plan.__slots__:
            if name == "__weakref__":
                continue
            a, b = getattr(plan, name), getattr(fresh, name)
            assert (np.array_equal(a, b) if isinstance(a, np.ndarray) else list(a) == list(b)), (i, name)
        if i in (1, 5):       # the same rows as the step before: its lists, shared
            assert plan.pairs is last.pairs and plan.pending_lls is last.pending_lls
        last = plan
