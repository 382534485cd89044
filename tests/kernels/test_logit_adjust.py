"""Penalties, logit_bias and min_p in the sampler (kernels/logit_adjust.py, kernels/sampler.py),
against a numpy reference of the OpenAI formula:
logit[t] += bias[t] - (frequency_penalty * count[t] + presence_penalty * (count[t] > 0))."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels import SamplingRows, sample
from kernels.logit_adjust import LogitAdjust, adjusted_logits
from kernels.sampler import sample_row, sample_row_full_sort

V = 64


def reference(logits, counts, bias, presence, frequency):
    """float64 straight from the formula; every token of the vocabulary, not only the entries."""
    out = np.asarray(logits, dtype=np.float64).copy()
    for t in range(len(out)):
        c = counts.get(t, 0)
        out[t] += bias.get(t, 0.0) - (frequency * c + presence * (c > 0))
    return out


def rows_for(n, temperature=0.0, adjust=None, min_p=None, seed=0, top_p=1.0, top_k=0):
    full = lambda v, dt: np.broadcast_to(np.asarray(v, dtype=dt), (n,)).copy()
    return SamplingRows(full(temperature, np.float32), full(top_p, np.float32), full(top_k, np.int32),
                        full(seed, np.uint64), full(0, np.int64),
                        min_p=None if min_p is None else full(min_p, np.float32), adjust=adjust)


def one_row(counts, bias, presence, frequency, pending=-1):
    entries = {t: (counts.get(t, 0), bias.get(t, 0.0)) for t in set(counts) | set(bias)}
    return LogitAdjust.build([(0, presence, frequency, entries, pending)])


penalty = st.floats(-2.0, 2.0, allow_nan=False, width=32)
token = st.integers(0, V - 1)


@settings(max_examples=60, deadline=None)
@given(logits=st.lists(st.floats(-30, 30, allow_nan=False, width=32), min_size=V, max_size=V),
       counts=st.dictionaries(token, st.integers(1, 50), max_size=20),
       bias=st.dictionaries(token, st.floats(-100, 100, allow_nan=False, width=32), max_size=10),
       presence=penalty, frequency=penalty)
def test_adjusted_logits_follow_the_openai_formula(logits, counts, bias, presence, frequency):
    lg = np.array(logits, dtype=np.float32)
    adj = one_row(counts, bias, presence, frequency)
    got = adjusted_logits(lg, presence, frequency, adj.token, adj.count, adj.bias)
    np.testing.assert_allclose(got, reference(lg, counts, bias, presence, frequency), rtol=0, atol=1e-3)
    # greedy picks the reference argmax (where the top two are not a float32 rounding apart)
    ref = reference(lg, counts, bias, presence, frequency)
    top2 = np.sort(ref)[-2:]
    if top2[1] - top2[0] > 1e-2:
        assert sample(lg[None], rows_for(1, adjust=adj))[0] == int(np.argmax(ref))


@settings(max_examples=40, deadline=None)
@given(counts=st.dictionaries(token, st.integers(1, 9), max_size=12),
       bias=st.dictionaries(token, st.floats(-5, 5, allow_nan=False, width=32), max_size=6),
       presence=penalty, frequency=penalty, pend=token, seed=st.integers(0, 2 ** 63),
       temperature=st.floats(0.0625, 2.0, width=32), min_p=st.sampled_from([0.0, 0.05, 0.3]))
def test_a_pending_token_counts_once_more_and_seeded_draws_follow_the_adjusted_row(
        counts, bias, presence, frequency, pend, seed, temperature, min_p):
    lg = np.random.default_rng(seed % 1000).standard_normal(V).astype(np.float32) * 3
    tokens = np.array([7, pend, 9], dtype=np.int32)           # the step's token ids: index 1 is pending
    pending = one_row(counts, bias, presence, frequency, pending=1).resolved(tokens)
    folded = dict(counts)
    folded[pend] = folded.get(pend, 0) + 1
    direct = one_row(folded, bias, presence, frequency)
    a = adjusted_logits(lg, presence, frequency, pending.token, pending.count, pending.bias)
    b = adjusted_logits(lg, presence, frequency, direct.token, direct.count, direct.bias)
    np.testing.assert_array_equal(a, b)
    got = sample(lg[None], rows_for(1, temperature, pending, min_p=min_p, seed=seed))[0]
    assert got == sample_row(a, float(np.float32(temperature)), 1.0, 0, seed, 0, min_p)
    assert got == sample_row_full_sort(a, float(np.float32(temperature)), 1.0, 0, seed, 0, min_p)


def test_bias_minus_100_moves_greedy_off_its_token_and_plus_100_forces_one():
    lg = np.random.default_rng(3).standard_normal((1, V)).astype(np.float32) * 4
    best = int(np.argmax(lg[0]))
    assert sample(lg, rows_for(1, adjust=one_row({}, {best: -100.0}, 0.0, 0.0)))[0] != best
    low = int(np.argmin(lg[0]))
    forced = rows_for(1, temperature=1.5, adjust=one_row({}, {low: 100.0}, 0.0, 0.0), seed=11)
    assert sample(lg, forced)[0] == low


def test_penalties_move_the_distribution_as_the_formula_says():
    """Empirical draws (seeded, many) against softmax of the reference-adjusted logits."""
    lg = np.array([2.0, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -1.5], dtype=np.float32)
    counts, bias = {0: 3, 1: 1}, {5: 1.25}
    n = 6000
    adj = LogitAdjust.build([(i, 0.4, 0.3, {t: (counts.get(t, 0), bias.get(t, 0.0)) for t in (0, 1, 5)}, -1)
                             for i in range(n)])
    rows = rows_for(n, temperature=1.0, adjust=adj, seed=np.arange(n, dtype=np.uint64) * 7919 + 1)
    draws = sample(np.repeat(lg[None], n, axis=0), rows)
    ref = reference(lg, counts, bias, 0.4, 0.3)
    p = np.exp(ref - ref.max())
    p /= p.sum()
    freq = np.bincount(draws, minlength=len(lg)) / n
    assert np.abs(freq - p).max() < 0.025, (freq, p)
    assert freq[0] < 0.2 and freq[5] > 0.08            # the penalized top token lost mass, the biased one won


def test_min_p_drops_tokens_below_min_p_times_the_top_probability():
    lg = np.log(np.array([0.5, 0.3, 0.1, 0.06, 0.04], dtype=np.float32))
    n = 400
    draws = sample(np.repeat(lg[None], n, axis=0),
                   rows_for(n, temperature=1.0, min_p=0.25, seed=np.arange(n, dtype=np.uint64)))
    assert set(draws.tolist()) == {0, 1}             # 0.1 < 0.25 * 0.5: dropped; 0.3 kept
    kept = sample(np.repeat(lg[None], n, axis=0),
                  rows_for(n, temperature=1.0, min_p=0.0, seed=np.arange(n, dtype=np.uint64)))
    assert len(set(kept.tolist())) == 5


def test_rows_without_adjustment_are_untouched_beside_an_adjusted_row():
    lg = np.random.default_rng(5).standard_normal((3, V)).astype(np.float32)
    best = int(np.argmax(lg[1]))
    adj = LogitAdjust.build([(1, 0.0, 0.0, {best: (0, -100.0)}, -1)])
    plain = sample(lg, rows_for(3))
    got = sample(lg, rows_for(3, adjust=adj))
    assert got[0] == plain[0] and got[2] == plain[2] and got[1] != plain[1]


def test_resolving_pending_tokens_across_rows_some_empty_some_hits():
    adj = LogitAdjust.build([(0, 0.5, 1.0, {}, 0), (2, 0.5, 1.0, {4: (2, 0.0)}, 1), (3, 0.0, 0.0, {9: (0, 7.0)}, -1),
                             (5, 0.1, 0.2, {}, 2), (6, 0.1, 0.2, {1: (1, 0.5), 2: (3, 0.0)}, 3)])
    got = adj.resolved(np.array([8, 4, 8, 2], dtype=np.int32))
    rows = {}
    for a, r in enumerate(got.rows.tolist()):
        lo, hi = got.offsets[a], got.offsets[a + 1]
        rows[r] = {int(t): (int(c), float(b)) for t, c, b in zip(got.token[lo:hi], got.count[lo:hi], got.bias[lo:hi])}
    assert rows == {0: {8: (1, 0.0)}, 2: {4: (3, 0.0)}, 3: {9: (0, 7.0)}, 5: {8: (1, 0.0)},
                    6: {1: (1, 0.5), 2: (4, 0.0)}}
    assert (got.pending == -1).all()
