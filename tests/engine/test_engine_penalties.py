"""Penalties and logit_bias through the engine: the counts cover every output token of the answer,
also the one the host has not read yet in the one-step-behind loop (aotx.engine.row_sampling)."""
import asyncio

import numpy as np
import pytest

from aotx.engine import Engine, EngineConfig, SamplingParams
from aotx.engine.launch import InlineLauncher, ThreadLauncher
from kernels import sampler
from tests.engine.engine_fakes import VOCAB, FakeBackend, FakeTokenizer, reference_next


class SamplerBackend(FakeBackend):
    """FakeBackend's model with the real sampler (which applies the adjustments)."""

    def sample(self, logits, rows):
        return sampler.sample(logits, rows)


def reference(prompt, n, presence, frequency, bias):
    """Greedy decoding with the OpenAI formula over the output so far, written out directly."""
    ctx, out = list(prompt), []
    for _ in range(n):
        logits = -0.5 * np.abs(np.arange(VOCAB) - reference_next(ctx)).astype(np.float64)
        for t in range(VOCAB):
            c = out.count(t)
            logits[t] += bias.get(t, 0.0) - (frequency * c + presence * (c > 0))
        out.append(int(np.argmax(logits)))
        ctx.append(out[-1])
    return out


async def run(overlap, prompts, params):
    backend = SamplerBackend(num_pages=200, page_size=4)
    launcher = ThreadLauncher(backend) if overlap else InlineLauncher(backend)
    config = EngineConfig(num_pages=200, page_size=4, max_model_len=256, overlap=overlap)
    engine = Engine(backend, FakeTokenizer(), config, launcher=launcher)
    engine.start()
    try:
        results = await asyncio.gather(*(_collect(engine.submit(p, sp)) for p, sp in zip(prompts, params)))
    finally:
        await engine.stop()
    return [[t for d in r for t in d.token_ids] for r in results]


async def _collect(handle):
    return [d async for d in handle]


@pytest.mark.parametrize("overlap", [False, True])
async def test_penalized_greedy_streams_follow_the_formula_in_both_loops(overlap):
    prompts = [list(f"penalty {i}".encode()) for i in range(4)]
    cases = [(0.0, 1.5, {}), (1.0, 0.0, {}), (0.5, 0.75, {ord("q"): 2.0}), (0.0, 0.0, {ord("a"): -100.0})]
    params = [SamplingParams(max_tokens=14, temperature=0, presence_penalty=p, frequency_penalty=f,
                             logit_bias=tuple(b.items())) for p, f, b in cases]
    got = await run(overlap, prompts, params)
    for prompt, (p, f, b), out in zip(prompts, cases, got):
        assert out == reference(prompt, 14, p, f, b)
    plain = reference(prompts[0], 14, 0.0, 0.0, {})
    assert got[0] != plain                                  # the penalty changed the answer


async def test_seeded_penalized_sampling_is_the_same_one_step_behind():
    prompts = [list(f"seeded {i}".encode()) for i in range(5)]
    params = [SamplingParams(max_tokens=12, temperature=0.9, seed=i, frequency_penalty=0.4 * i,
                             presence_penalty=0.3, min_p=0.05 * (i % 2)) for i in range(5)]
    assert await run(True, prompts, params) == await run(False, prompts, params)


def test_row_entries_merge_bias_keys_with_counted_tokens():
    from aotx.engine.row_sampling import sampling_rows
    from aotx.engine.sequence import Sequence

    def seq(params, out):
        s = Sequence(prompt_ids=[1, 2], params=params, seed=0, reserved_pages=1, detokenizer=None)
        s.output_ids = list(out)
        return s
    a = seq(SamplingParams(max_tokens=9, frequency_penalty=1.0, logit_bias=((5, 2.0), (9, -1.0))), [5, 7, 5, 3])
    b = seq(SamplingParams(max_tokens=9), [5])                          # no adjustment: not in it
    c = seq(SamplingParams(max_tokens=9, logit_bias=((4, 1.5),)), [4, 4])  # bias only: counts not needed
    rows = sampling_rows([a, b, c], {a.seq_id: 3})
    adj = rows.adjust
    assert adj.rows.tolist() == [0, 2] and adj.pending.tolist() == [3, -1]
    got = [{int(t): (int(n), float(x)) for t, n, x in zip(adj.token[lo:hi], adj.count[lo:hi], adj.bias[lo:hi])}
           for lo, hi in zip(adj.offsets[:-1], adj.offsets[1:])]
    assert got == [{5: (2, 2.0), 7: (1, 0.0), 3: (1, 0.0), 9: (0, -1.0)}, {4: (0, 1.5)}]
    assert len(adj.token) == 5                                          # each token once per row
    a.output_ids.append(9)                                            # counts follow the new ids only
    again = sampling_rows([a], {}).adjust
    assert dict(zip(again.token.tolist(), again.count.tolist()))[9] == 1


def test_row_entries_grow_past_their_first_capacity():
    from aotx.engine.row_sampling import sampling_rows
    from aotx.engine.sequence import Sequence

    out = [t % 45 for t in range(200)]                                   # 45 distinct tokens, 200 ids
    s = Sequence(prompt_ids=[1], params=SamplingParams(max_tokens=300, presence_penalty=0.5,
                                                       logit_bias=((3, 1.0), (1000, -2.0))),
                 seed=0, reserved_pages=1, detokenizer=None)
    for k in (1, 17, 60, 200):                                           # counted in several steps
        s.output_ids = out[:k]
        adj = sampling_rows([s], {}).adjust
    got = {int(t): (int(c), float(b)) for t, c, b in zip(adj.token, adj.count, adj.bias)}
    want = {t: (out.count(t), 1.0 if t == 3 else 0.0) for t in set(out)}
    want[1000] = (0, -2.0)
    assert got == want


@pytest.mark.parametrize("overlap", [False, True])
def test_ignore_eos_runs_to_max_tokens_and_the_eos_adds_no_text(overlap):
    """logit_bias +100 on EOS: every token drawn is EOS. Without ignore_eos the answer ends at the first
    (finish "stop" on that one token); with it the answer runs to max_tokens (finish "length") and EOS adds no text."""
    from tests.engine.engine_fakes import EOS

    async def go(ignore):
        backend = SamplerBackend(num_pages=200, page_size=4)
        launcher = ThreadLauncher(backend) if overlap else InlineLauncher(backend)
        engine = Engine(backend, FakeTokenizer(), EngineConfig(num_pages=200, page_size=4, max_model_len=256,
                                                               overlap=overlap), launcher=launcher)
        engine.start()
        try:
            return await _collect(engine.submit([5, 6, 7], SamplingParams(
                max_tokens=6, temperature=0.0, logit_bias=((EOS, 100.0),), ignore_eos=ignore)))
        finally:
            await engine.stop()

    ended = asyncio.run(go(False))
    assert [t for d in ended for t in d.token_ids] == [EOS] and ended[-1].finish_reason == "stop"
    ran = asyncio.run(go(True))
    assert [t for d in ran for t in d.token_ids] == [EOS] * 6 and ran[-1].finish_reason == "length"
    assert "".join(d.text for d in ran) == ""


def test_ignore_eos_with_a_structured_output_is_refused():
    from aotx.engine.request import RequestRejected, validate_request

    with pytest.raises(RequestRejected, match="ignore_eos"):
        validate_request([1, 2], SamplingParams(max_tokens=4, ignore_eos=True, constraint=object()), 256, None)
