import numpy as np
import pytest

from kernels.sampler import sample_row_full_sort
from kernels import SamplingRows, log_softmax, logprobs, sample, sample_row, splitmix64, uniform24

V = 1000
rng = np.random.default_rng(42)


def rows(n, temperature=1.0, top_p=1.0, top_k=0, seed=0, step=0):
    full = lambda v, dt: np.broadcast_to(np.asarray(v, dtype=dt), (n,)).copy()  # noqa: E731
    return SamplingRows(temperature=full(temperature, np.float32), top_p=full(top_p, np.float32),
                        top_k=full(top_k, np.int32), seed=full(seed, np.uint64),
                        step=full(step, np.int64))


def logits(n=4, scale=3.0):
    return (rng.standard_normal((n, V)) * scale).astype(np.float32)


def test_splitmix64_known_values():
    # Reference outputs of the standard splitmix64 generator seeded with 0 (first two draws).
    assert splitmix64(0) == 0xE220A8397B1DCDAF
    assert splitmix64(0x9E3779B97F4A7C15) == 0x6E789E6AA1B965F4
    assert 0 <= uniform24(123, 4) < 1 << 24
    assert uniform24(5, 0) == splitmix64(5) >> 40


def test_greedy_lowest_id_on_ties():
    lg = np.zeros((2, V), np.float32)
    lg[0, [7, 3, 500]] = 5.0
    lg[1, 999] = 1.0
    out = sample(lg, rows(2, temperature=0.0))
    assert out.dtype == np.int32
    assert out.tolist() == [3, 999]


def test_seeded_determinism_and_variation():
    lg = np.repeat(logits(1, scale=1.0), 8, axis=0)
    r = rows(8, temperature=1.0, seed=np.arange(8, dtype=np.uint64) + 100, step=3)
    a, b = sample(lg, r), sample(lg, r)
    np.testing.assert_array_equal(a, b)
    assert len(set(a.tolist())) > 1  # different seeds draw different tokens
    steps = [sample_row(lg[0], 1.0, 1.0, 0, 100, s) for s in range(8)]
    assert len(set(steps)) > 1  # the step is part of the counter


def test_top_k_one_and_tiny_top_p_equal_greedy():
    lg = logits(16)
    lg[0, [10, 20]] = lg[0].max() + 1.0  # a tie at the top: lowest id wins everywhere
    greedy = sample(lg, rows(16, temperature=0.0))
    assert greedy[0] == 10
    seeds = np.arange(16, dtype=np.uint64)
    np.testing.assert_array_equal(sample(lg, rows(16, temperature=1.3, top_k=1, seed=seeds)), greedy)
    np.testing.assert_array_equal(sample(lg, rows(16, temperature=0.7, top_p=1e-6, seed=seeds)), greedy)
    np.testing.assert_array_equal(sample(lg, rows(16, temperature=0.7, top_p=0.0, seed=seeds)), greedy)


def test_top_k_and_top_p_restrict_support():
    lg = logits(1)[0]
    order = np.argsort(-lg, kind="stable")
    drawn_k = {sample_row(lg, 2.0, 1.0, 5, s, 0) for s in range(300)}
    assert drawn_k <= set(order[:5].tolist()) and len(drawn_k) > 1
    p = np.exp(lg - lg.max()); p /= p.sum()
    nucleus = order[: int(np.searchsorted(np.cumsum(p[order]), 0.6)) + 1]
    drawn_p = {sample_row(lg, 1.0, 0.6, 0, s, 0) for s in range(300)}
    assert drawn_p <= set(nucleus.tolist())


def test_distribution_matches_softmax():
    lg = np.log(np.array([0.5, 0.3, 0.15, 0.05], np.float32))
    lg = np.concatenate([lg, np.full(V - 4, -40.0, np.float32)])
    n = 4000
    draws = np.array([sample_row(lg, 1.0, 1.0, 0, seed, 0) for seed in range(n)])
    freq = np.bincount(draws, minlength=4)[:4] / n
    np.testing.assert_allclose(freq, [0.5, 0.3, 0.15, 0.05], atol=0.03)
    # temperature 2 flattens: p ~ sqrt(p) renormalised
    draws = np.array([sample_row(lg, 2.0, 1.0, 0, seed, 1) for seed in range(n)])
    expect = np.sqrt([0.5, 0.3, 0.15, 0.05]); expect /= expect.sum()
    np.testing.assert_allclose(np.bincount(draws, minlength=4)[:4] / n, expect, atol=0.03)


def test_logprobs():
    lg = logits(3)
    lg[1, [4, 2]] = lg[1].max() + 2.0  # tie: id 2 before id 4
    chosen = np.array([0, 4, 7], np.int32)
    clp, ids, tlp = logprobs(lg, chosen, 5)
    assert clp.dtype == tlp.dtype == np.float32 and ids.dtype == np.int32
    assert ids.shape == tlp.shape == (3, 5)
    ref = lg.astype(np.float64) - np.log(np.exp(lg.astype(np.float64)).sum(-1, keepdims=True))
    np.testing.assert_allclose(clp, ref[np.arange(3), chosen], atol=1e-4)
    for r in range(3):
        expect = sorted(range(V), key=lambda i: (-ref[r, i], i))[:5]
        assert ids[r].tolist() == expect
        np.testing.assert_allclose(tlp[r], ref[r, expect], atol=1e-4)
    assert ids[1, :2].tolist() == [2, 4]
    assert log_softmax(lg).dtype == np.float32
    _, ids0, tlp0 = logprobs(lg, chosen, 0)
    assert ids0.shape == (3, 0) and tlp0.shape == (3, 0)


@pytest.mark.parametrize("t", [0.0, 0.5])
def test_sample_returns_int32_in_range(t):
    out = sample(logits(5), rows(5, temperature=t, seed=9))
    assert out.dtype == np.int32 and ((0 <= out) & (out < V)).all()


@pytest.mark.parametrize("t,top_p,top_k", [(1.0, 1.0, 0), (0.7, 0.9, 0), (1.5, 0.95, 40), (2.0, 1.0, 300),
                                           (1.0, 0.5, 3), (5.0, 0.999, 0)])
def test_prefix_sort_equals_full_sort(t, top_p, top_k):
    lg = logits(1, scale=2.0)[0]
    lg[[5, 6, 7]] = lg.max()  # ties at the top
    lg[100:140] = lg[99]      # a long run of ties
    for seed in range(40):
        assert sample_row(lg, t, top_p, top_k, seed, 2) == sample_row_full_sort(lg, t, top_p, top_k, seed, 2)


def _nonfinite_rows() -> list[tuple[str, np.ndarray, float]]:
    """Rows where no token would weigh anything (the review of session 13): (what, logits, t)."""
    lg = logits(1)[0]
    pos_inf = lg.copy()
    pos_inf[[7, 300]] = np.inf
    all_neg = np.full(V, -np.inf, np.float32)
    nan_neg = all_neg.copy()
    nan_neg[[2, 9]] = np.nan
    return [("t=1e-40: 1/t overflows", lg, 1e-40), ("t=1e-38: l/t overflows", lg, 1e-38),
            ("+inf logits", pos_inf, 0.7), ("every logit -inf", all_neg, 0.7), ("NaN and -inf only", nan_neg, 1.0),
            ("every logit NaN", np.full(V, np.nan, np.float32), 1.0)]


@pytest.mark.parametrize("top_p,top_k,min_p", [(1.0, 0, 0.0), (0.9, 0, 0.0), (0.9, 50, 0.1)])
def test_rows_without_a_candidate_are_greedy(top_p, top_k, min_p):
    """No weight left (an overflowing 1/t, +inf, all -inf or NaN): the greedy id, the same in both
    specifications; before, sample_row raised IndexError or returned a platform-defined id."""
    want = {"t=1e-40: 1/t overflows": None, "t=1e-38: l/t overflows": None, "+inf logits": 7,
            "every logit -inf": 0, "NaN and -inf only": 0, "every logit NaN": 0}
    for what, lg, t in _nonfinite_rows():
        greedy = int(np.argmax(lg)) if want[what] is None else want[what]
        for seed in range(5):
            got = sample_row(lg, t, top_p, top_k, seed, 3, min_p)
            assert got == sample_row_full_sort(lg, t, top_p, top_k, seed, 3, min_p) == greedy, what


def test_nan_logits_never_win_and_weigh_nothing():
    lg = logits(1)[0]
    lg[[0, 11]] = np.nan
    ref = lg.copy()
    ref[[0, 11]] = -np.inf           # a NaN logit is a token that can never be drawn, greedy or sampled
    assert sample(lg[None], rows(1, temperature=0.0))[0] == int(np.argmax(ref))
    for t, top_p, top_k in [(0.7, 1.0, 0), (1.0, 0.9, 0), (1.3, 0.95, 40)]:
        for seed in range(20):
            got = sample_row(lg, t, top_p, top_k, seed, 1)
            assert got == sample_row(ref, t, top_p, top_k, seed, 1) == sample_row_full_sort(lg, t, top_p, top_k, seed, 1)
    nan_then_inf = np.array([np.nan, -np.inf, -np.inf], np.float32)
    assert sample(nan_then_inf[None], rows(1, temperature=0.0))[0] == 1   # the lowest non-NaN id
