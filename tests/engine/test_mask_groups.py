"""A constrained step's mask in two row groups (aotx.engine.mask_groups, AOTX_MASK_GROUPS=2) in the real engine
(numpy backend, the one-step-behind loop with its mask worker): token for token, finish reason for finish reason,
the classic loop's and groups = 1's, with rows ending in one group while the other goes on, rows joining mid-run,
an unconstrained row beside them, seeded and penalised constrained rows; steady steps take each part from the
launch before's part of the same range, and most read-backs are checked for the step at once."""
from __future__ import annotations

import pytest

from aotx.engine import SamplingParams
from aotx.engine import mask_groups
from aotx.engine.mask_groups import MaskGroups
from aotx.engine.masks import LateMask

from .test_engine_structured import PERSON, QUESTION, compiler  # noqa: F401  (compiler: a fixture)


def _params(compiler):
    c = compiler.json_schema(PERSON)
    o = compiler.json_object()
    return [SamplingParams(max_tokens=40, temperature=0, constraint=c),
            SamplingParams(max_tokens=40, temperature=1.0, seed=7, constraint=c),
            SamplingParams(max_tokens=9, temperature=1.0, seed=5, constraint=c),     # ends first (group 1)
            SamplingParams(max_tokens=8, temperature=1.0, seed=3),                   # unconstrained
            SamplingParams(max_tokens=30, temperature=0.8, seed=11, constraint=o,
                           presence_penalty=0.5, frequency_penalty=0.3),
            SamplingParams(max_tokens=12, temperature=0.7, seed=13, constraint=c),   # ends early (group 2)
            SamplingParams(max_tokens=40, temperature=0.9, seed=17, constraint=c, frequency_penalty=0.4)]


async def _ids(engine, prompt, params, late=()):
    """Each request's (token, finish reason) pairs; `late`: the indexes of requests submitted once the
    first request has streamed 4 deltas (rows joining mid-run)."""
    handles = {i: engine.submit(prompt, p) for i, p in enumerate(params) if i not in late}
    out: dict = {}
    first = handles[0]
    got = []
    async for d in first:
        got.append(d)
        if len(got) == 4:
            for i in late:
                handles[i] = engine.submit(prompt, params[i])
    out[0] = [(t, d.finish_reason) for d in got for t in (d.token_ids or (None,))]
    for i, h in handles.items():
        if i:
            out[i] = [(t, d.finish_reason) for d in [d async for d in h] for t in (d.token_ids or (None,))]
    return [out[i] for i in range(len(params))]


@pytest.mark.parametrize("late", [(), (2, 5, 6)])
async def test_two_groups_draw_the_classic_loops_and_one_groups_tokens(make_real_engine, chat_prompt, compiler,
                                                                        monkeypatch, late):
    prompt, params = chat_prompt(QUESTION), _params(compiler)
    classic = await _ids(make_real_engine(overlap=False), prompt, params)
    monkeypatch.setenv("AOTX_MASK_GROUPS", "1")
    engine = make_real_engine(overlap=True)
    one = await _ids(engine, prompt, params, late)
    await engine.stop()
    monkeypatch.setenv("AOTX_MASK_GROUPS", "2")
    made, followed, checked = [], [], []
    real_steps, real_following, real_verify = mask_groups.step_masks, MaskGroups.following, MaskGroups.verify

    def step_masks(sampled, previous=None, last=False):
        mask = real_steps(sampled, previous, last)
        made.append(type(mask).__name__)
        return mask

    def following(self, previous):
        mask = real_following(self, previous)
        fresh = [LateMask(self._sampled_list, previous, None, lo, hi) for lo, hi in self.bounds]
        followed.append([(p.rows == f.rows, p._matchers == f._matchers, p._id_col == f._id_col,
                          p._index_col == f._index_col) for p, f in zip(mask.parts, fresh)])
        return mask

    def verify(self, ids, results=None):
        ok = real_verify(self, ids, results)
        checked.append(ok)
        return ok

    monkeypatch.setattr(mask_groups, "step_masks", step_masks)
    monkeypatch.setattr(MaskGroups, "following", following)
    monkeypatch.setattr(MaskGroups, "verify", verify)
    engine = make_real_engine(overlap=True)
    assert engine.runner.masks.groups == 2
    two = await _ids(engine, prompt, params, late)
    await engine.stop()
    if not late:
        assert one == classic
    assert two == one
    assert made.count("MaskGroups") >= 8 and len(followed) >= 8 and all(all(map(all, f)) for f in followed), (made, followed)
    assert checked.count(True) >= 5, checked


def test_groups_env():
    assert mask_groups.groups({}) == 1 and mask_groups.groups({"AOTX_MASK_GROUPS": "2"}) == 2
    with pytest.raises(ValueError):
        mask_groups.groups({"AOTX_MASK_GROUPS": "3"})
