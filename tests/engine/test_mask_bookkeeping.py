"""A step's bookkeeping on the mask worker and the engine thread (aotx.engine.masks' plan: the matchers' token
records, consumed counts and oks read by map; RowMatcher.sync's check of a token read back against the bit of
the mask that let it through), over rows that draw a refused token, end mid-walk and join mid-walk, whichever
of the engine thread's check and the next mask's consume comes first: the answers, failures and matcher
states a call a row gives (AOTX_MASK_CONSUME_PAR=0), and the ones the protocol says."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from aotx.engine import masks
from aotx.engine.masks import LateMask
from kernels.token_mask import allowed_ids

from .test_engine_structured import PERSON, compiler  # noqa: F401  (compiler: a fixture)


class _Ids:
    def __init__(self, ids) -> None:
        self._ids = np.array(ids, dtype=np.int32)

    def ids(self):
        return self._ids


def _seq(j: int, c):
    return SimpleNamespace(seq_id=j, matcher=c.start(), output_ids=[], pending=0, pending_row=-1,
                           params=SimpleNamespace(constraint=c))


def _walk(compiler, tokenizer, consume_first: bool, par: str, monkeypatch, chained: bool = False) -> list:
    """Rows 0-5 decode '{"name": "Ann", "age": 31}' one step behind, as the engine runs them with the mask
    worker (launch k+1's mask deferred before step k is read back; that mask consumes step k's tokens):
    row 2 draws a token its mask refuses at step 3 (then ends, as the engine ends it); row 4 ends after
    step 2 (no later mask consumes its last token); row 6 joins at step 2 (no token pending). Per read-back:
    each row's (seq_id, sync's answer), the mask's bits, and every row's matcher state after. `chained`: the
    runner's way (each mask chained to the launch before's, a steady step's taken from it, the read-back
    checked for the step by LateMask.verify, each row's sync only where that cannot pass)."""
    monkeypatch.setenv("AOTX_MASK_CONSUME_PAR", par)
    c = compiler.json_schema(PERSON)
    path = tokenizer.encode('{"name": "Ann", "age": 31}')
    seqs = [_seq(j, c) for j in range(6)]
    joiner = _seq(6, c)
    live = list(seqs)
    prev_launch, prev_mask = None, None
    out, finished, checks = [], set(), []
    for step in range(7):
        if step == 2:
            live.append(joiner)
        rows = list(live)       # (the launch's rows; a row refused at its read-back below still samples)
        mask = masks.step_mask(rows, prev_launch, prev_mask) if chained else LateMask(rows, prev_launch)
        mask.defer(True)
        if consume_first or prev_mask is None:
            mask.run()
        if prev_mask is not None:       # step-1 is read back: each row's token checked (RowMatcher.sync)
            sampled, tids = prev_rows, prev_launch.ids().tolist()
            verified = chained and prev_mask.verify(prev_launch.ids())
            checks.append(verified)
            got = []
            for s, tid in zip(sampled, tids):
                if s.seq_id in finished:
                    continue            # (the engine skips a finished row)
                got.append((s.seq_id, True if verified else s.matcher.sync(len(s.output_ids), tid)))
                s.pending = 0
                s.output_ids.append(tid)
            out.append(got)
            for sid, ok in got:
                if not ok:
                    finished.add(sid)   # (the engine ends a refused row)
                    live.remove(next(s for s in live if s.seq_id == sid))
        if not (consume_first or prev_mask is None):
            mask.run()
        bits = mask().bits
        out.append(bits.copy())
        # the device samples step `step` through `mask`: the path's token; row 2's refused one at step 3
        ids = []
        for j, s in enumerate(rows):
            tok = path[min(len(s.output_ids) + s.pending, len(path) - 1)]
            if s.seq_id == 2 and step == 3:
                allowed = set(allowed_ids(bits[j], c.vocab_size).tolist())
                tok = next(t for t in range(c.vocab_size) if t not in allowed)
            ids.append(tok)
            s.pending, s.pending_row = 1, j
        prev_launch, prev_mask, prev_rows = _Ids(ids), mask, rows
        if step == 2:
            live.remove(seqs[4])        # (its step-2 token is its last: no later mask consumes it)
    out.append([(s.seq_id, s.matcher.failed, tuple(s.matcher.tokens)) for s in seqs + [joiner]])
    if chained:
        out.append(checks)
    return out


@pytest.mark.parametrize("consume_first", [False, True], ids=["check-first", "consume-first"])
def test_one_call_and_a_call_a_row_give_the_same_answers_and_matchers(compiler, bundle, monkeypatch, consume_first):
    par = _walk(compiler, bundle.tokenizer, consume_first, "8", monkeypatch)
    alone = _walk(compiler, bundle.tokenizer, consume_first, "0", monkeypatch)
    assert len(par) == len(alone)
    for a, b in zip(par, alone):
        assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
    reads = [r for r in par[:-1] if not isinstance(r, np.ndarray)]
    assert [a for a in reads[3] if a[0] == 2] == [(2, False)]      # the refused token, at its read-back
    assert [a for a in reads[2] if a[0] == 4] == [(4, True)]       # row 4's last token: sync consumes it
    assert all(ok for r in reads for sid, ok in r if (sid, r is reads[3]) != (2, True))
    states = {sid: (failed, toks) for sid, failed, toks in par[-1]}
    assert states[2][0] and not any(states[s][0] for s in (0, 1, 3, 4, 5, 6))
    assert len(states[4][1]) == 3 and len(states[6][1]) == 4     # (the joiner: steps 2-5 read back)
    path = bundle.tokenizer.encode('{"name": "Ann", "age": 31}')
    assert states[0][1] == tuple(path[:6]) and states[6][1] == tuple(path[:4])


def test_the_answers_do_not_depend_on_which_thread_came_first(compiler, bundle, monkeypatch):
    a = _walk(compiler, bundle.tokenizer, False, "8", monkeypatch)
    b = _walk(compiler, bundle.tokenizer, True, "8", monkeypatch)
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y


@pytest.mark.parametrize("consume_first", [False, True], ids=["check-first", "consume-first"])
def test_chained_masks_give_each_rows_answers_and_matchers_as_a_mask_a_row_told(compiler, bundle, monkeypatch,
                                                                               consume_first):
    """The runner's chained masks (a steady step's mask taken from the launch before's, LateMask.following; the
    read-back checked for the step, LateMask.verify, each row's matcher told its marks only where that check
    cannot pass) against masks built and told a row at a time: the same answers, bits and matcher states, the
    step-wide check passing where every row's token is allowed and the next mask consumes each, and not at the
    refused token (step 3), a row whose last token nobody consumes (row 4, step 2) or the step after a refusal."""
    made = []
    real = LateMask.following.__func__

    def spy(cls, last, previous):
        made.append(len(last.rows))
        return real(cls, last, previous)

    monkeypatch.setattr(LateMask, "following", classmethod(spy))
    told = _walk(compiler, bundle.tokenizer, consume_first, "8", monkeypatch)
    chained = _walk(compiler, bundle.tokenizer, consume_first, "8", monkeypatch, chained=True)
    checks = chained.pop()
    assert len(told) == len(chained)
    for a, b in zip(told, chained):
        assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
    # read-backs of steps 0-5: step 2 (row 4's last token), step 3 (row 2's refused token) and step 4 (row 2's
    # matcher has failed) are told a row at a time, the others checked for the step
    assert checks == [True, True, False, False, False, True], checks
    assert made == [6, 6, 5], made          # steps 1, 4 and 6: the launch before's rows, taken as they are


def test_a_masks_latch_wakes_every_waiter_once_set():
    import threading

    from aotx.engine.masks import _Latch
    latch, woke = _Latch(), []
    assert not latch.is_set()
    waiters = [threading.Thread(target=lambda: (latch.wait(), woke.append(1))) for _ in range(3)]
    for t in waiters:
        t.start()
    assert not woke             # (nobody passes before the set)
    latch.set()
    latch.set()                 # (a second set: nothing)
    for t in waiters:
        t.join(30)
    assert latch.is_set() and len(woke) == 3 and not any(t.is_alive() for t in waiters)
    latch.wait()                # (once set: at once)
