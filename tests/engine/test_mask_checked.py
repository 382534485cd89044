"""The engine thread's check of a step's constrained tokens at once (aotx.engine.masks.LateMask.checked:
one numpy gather of the mask's bits, RowMatcher.checked_rows reading each matcher's marks) answers what
RowMatcher.sync answers for every row it answers for, whichever of the check and the next mask's consume
comes first; a row it cannot tell (no later mask consumes its token: the row ends) is left to sync. Over
rows that draw a refused token, end mid-walk and join mid-walk; and the plan's bookkeeping (token records
by map) leaves the matchers as a call a row does."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

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


def _walk(compiler, tokenizer, consume_first: bool, par: str, monkeypatch) -> list:
    """Rows 0-5 decode '{"name": "Ann", "age": 31}' one step behind, as the engine runs them with the mask
    worker (launch k+1's mask deferred before step k is read back; that mask consumes step k's tokens):
    row 2 draws a token its mask refuses at step 3 (then ends, as the engine ends it); row 4 ends after
    step 2 (no later mask consumes its last token); row 6 joins at step 2 (no token pending). Per read-back:
    each row's (seq_id, answer, whether checked gave it), and every row's matcher state after."""
    monkeypatch.setenv("AOTX_MASK_CONSUME_PAR", par)
    c = compiler.json_schema(PERSON)
    path = tokenizer.encode('{"name": "Ann", "age": 31}')
    seqs = [_seq(j, c) for j in range(6)]
    joiner = _seq(6, c)
    live = list(seqs)
    prev_launch, prev_mask = None, None
    out, finished = [], set()
    for step in range(7):
        if step == 2:
            live.append(joiner)
        rows = list(live)       # (the launch's rows; a row refused at its read-back below still samples)
        mask = LateMask(rows, prev_launch)
        mask.defer(True)
        if consume_first or prev_mask is None:
            mask.run()
        if prev_mask is not None:       # step-1 is read back: checked, then sync for the rows it left out
            sampled, tids = prev_rows, prev_launch.ids().tolist()
            checked = prev_mask.checked(tids)
            assert checked is not None
            got = []
            for s, tid in zip(sampled, tids):
                if s.seq_id in finished:
                    continue            # (the engine skips a finished row)
                m = s.matcher
                index = len(s.output_ids)
                told = m in checked
                answer = m.sync(index, tid)
                if told:
                    assert checked[m] == answer, (step, s.seq_id)
                got.append((s.seq_id, answer, told))
                s.pending = 0
                s.output_ids.append(tid)
            out.append(got)
            for sid, ok, _ in got:
                if not ok:
                    finished.add(sid)   # (the engine ends a refused row)
                    live.remove(next(s for s in live if s.seq_id == sid))
        if not (consume_first or prev_mask is None):
            mask.run()
        bits = mask().bits
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
    return out


@pytest.mark.parametrize("consume_first", [False, True], ids=["check-first", "consume-first"])
def test_checked_answers_what_sync_answers(compiler, bundle, monkeypatch, consume_first):
    from aotx.structured.constraint import RowMatcher
    slow, real = [], RowMatcher.checked_rows
    monkeypatch.setattr(RowMatcher, "checked_rows", staticmethod(lambda *a: slow.append(1) or real(*a)))
    got = _walk(compiler, bundle.tokenizer, consume_first, "8", monkeypatch)
    # the step-wide reads served most read-backs; a row a row only where a row ends (or, once the worker
    # consumed it, where a row failed: the two steps whose masks hold it)
    assert 1 <= len(slow) <= 3 < len(got) - 1
    reads = got[:-1]
    # the refused token: refused at its read-back (step 3 is read back at step 4), told by checked
    row2 = [a for a in reads[3] if a[0] == 2]
    assert row2 == [(2, False, True)]
    # row 4's last token (step 2, read back at step 3): no later mask consumes it, so sync tells
    assert [a for a in reads[2] if a[0] == 4] == [(4, True, False)]
    # the joiner's tokens, from its first: told by checked
    assert all(told for r in reads[2:] for sid, _, told in r if sid == 6)
    # every other answer is an accept that checked gave
    assert all(ok and told for r in reads for sid, ok, told in r if (sid, r is reads[2]) != (4, True) and
               (sid, r is reads[3]) != (2, True))
    states = {sid: (failed, toks) for sid, failed, toks in got[-1]}
    assert states[2][0] and not any(states[s][0] for s in (0, 1, 3, 4, 5, 6))
    assert len(states[4][1]) == 3 and len(states[6][1]) == 4     # (the joiner: steps 2-5 read back)


@pytest.mark.parametrize("consume_first", [False, True], ids=["check-first", "consume-first"])
def test_one_call_and_a_call_a_row_leave_the_same_matchers(compiler, bundle, monkeypatch, consume_first):
    """The plan's bookkeeping (consumed counts, oks and token records by map) against a call a row
    (AOTX_MASK_CONSUME_PAR=0, RowMatcher.consume): the same answers and matcher states, step by step."""
    assert _walk(compiler, bundle.tokenizer, consume_first, "0", monkeypatch) == \
        _walk(compiler, bundle.tokenizer, consume_first, "8", monkeypatch)


def test_checked_is_none_where_it_cannot_tell(compiler, bundle):
    c = compiler.json_schema(PERSON)
    seqs = [_seq(j, c) for j in range(3)]
    mask = LateMask(seqs, None)
    mask.defer(False)           # (the engine thread consumes: no marks to read)
    mask.run()
    assert mask.checked([0, 0, 0]) is None
    fresh = LateMask(seqs, None)
    fresh.defer(True)
    assert fresh.checked([0, 0, 0]) is None     # (its bits not written yet)
    fresh.run()
    bits = np.zeros((3, fresh.words), np.uint32)
    later = LateMask(seqs, None)
    later.into(bits)            # (fresh's bits stay in its own array: only `into`'s memory is taken)
    assert fresh.checked([0, 0, 0]) is not None
