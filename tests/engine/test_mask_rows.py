"""The runner's chained masks in the real engine (numpy backend, the one-step-behind loop with its mask worker):
a steady step's mask takes the launch before's rows as they are (LateMask.following), and each read-back is
checked for the step at once where it can be (LateMask.verify). Rows that end at different steps, one refused
nothing; the output is the classic loop's, token for token, and every mask taken from the one before equals one
built from the sequences themselves at that moment."""
from __future__ import annotations

import pytest

from aotx.engine import SamplingParams
from aotx.engine import mask_check, masks
from aotx.engine.masks import LateMask

from .test_engine_structured import PERSON, QUESTION, compiler  # noqa: F401  (compiler: a fixture)


def _params(compiler):
    c = compiler.json_schema(PERSON)
    return [SamplingParams(max_tokens=40, temperature=0, constraint=c),
            SamplingParams(max_tokens=40, temperature=1.0, seed=7, constraint=c),
            SamplingParams(max_tokens=9, temperature=1.0, seed=5, constraint=c),     # ends first (length)
            SamplingParams(max_tokens=14, temperature=0.7, seed=11, constraint=c),
            SamplingParams(max_tokens=8, temperature=1.0, seed=3)]      # an unconstrained row beside them


async def _ids(engine, prompt, params):
    handles = [engine.submit(prompt, p) for p in params]
    return [[(t, d.finish_reason) for d in [d async for d in h] for t in (d.token_ids or (None,))] for h in handles]


async def test_chained_masks_equal_masks_read_from_the_rows(make_real_engine, chat_prompt, compiler, monkeypatch):
    prompt, params = chat_prompt(QUESTION), _params(compiler)
    classic = await _ids(make_real_engine(overlap=False), prompt, params)
    taken, checked = [], []
    real_following, real_verify = LateMask.following.__func__, LateMask.verify

    def following(cls, last, previous):
        mask = real_following(cls, last, previous)
        fresh = LateMask(last._sampled_list, previous)      # the same rows, read from each sequence now
        taken.append((mask.rows == fresh.rows, mask._matchers == fresh._matchers, mask._id_col == fresh._id_col,
                      mask._index_col == fresh._index_col, mask._pending_n == fresh._pending_n,
                      mask.words == fresh.words))
        return mask

    def verify(self, ids, results=None):
        ok = real_verify(self, ids, results)
        checked.append(ok)
        return ok

    monkeypatch.setattr(LateMask, "following", classmethod(following))
    monkeypatch.setattr(LateMask, "verify", verify)
    engine = make_real_engine(overlap=True)
    assert await _ids(engine, prompt, params) == classic
    await engine.stop()
    assert len(taken) >= 8 and all(all(t) for t in taken), taken
    # every read-back of a constrained step but those where a row's last token is nobody's to consume (a row
    # ending: its budget, or EOS) is checked for the step at once
    assert checked.count(True) >= 8 and checked.count(False) <= 6, checked


def test_a_mask_chained_to_none_or_unchained_keeps_the_protocol(compiler):
    """A chained mask with no mask before it tells nobody; one that is not chained (tests, benches) tells each row's
    matcher at defer, as before, and never checks a step at once."""
    from types import SimpleNamespace
    c = compiler.json_schema(PERSON)
    seqs = [SimpleNamespace(seq_id=j, matcher=c.start(), output_ids=[], pending=0, pending_row=-1,
                            params=SimpleNamespace(constraint=c)) for j in range(3)]
    lone = masks.step_mask(seqs, None, None)
    lone.defer(True)
    assert lone.worker_consumes and lone.consumer is None and all(s.matcher._sampled == (None, None) for s in seqs)
    told = masks.step_mask(seqs, None)
    told.defer(True)
    assert told.worker_consumes and all(s.matcher._sampled[1][0] is told for s in seqs)
    told.run()
    assert told.verify(told().bits[:, 0].astype("int64") * 0) is False    # (not chained: each row's own sync)
    assert masks.step_mask([SimpleNamespace(matcher=None)], None, None) is None


@pytest.mark.parametrize("bad", [-1, 10 ** 6])
def test_a_token_out_of_the_vocab_is_not_allowed_by_the_steps_check(compiler, bad):
    from types import SimpleNamespace

    import numpy as np
    c = compiler.json_schema(PERSON)
    seqs = [SimpleNamespace(seq_id=j, matcher=c.start(), output_ids=[], pending=0, pending_row=-1,
                            params=SimpleNamespace(constraint=c)) for j in range(2)]
    first = masks.step_mask(seqs, None, None)
    first.defer(True)
    first.run()
    allowed = [int(np.flatnonzero(np.unpackbits(first().bits[j].view(np.uint8), bitorder="little"))[0]) for j in range(2)]
    ids = np.array(allowed, dtype=np.int32)
    for s, j in zip(seqs, range(2)):
        s.pending, s.pending_row = 1, j
    second = masks.step_mask(seqs, SimpleNamespace(ids=lambda: ids), first)
    second.defer(True)
    assert first.consumer is second and second._id_col == [0, 1]
    assert mask_check.allowed(first, ids) and not mask_check.allowed(first, np.array([allowed[0], bad], dtype=np.int64))
