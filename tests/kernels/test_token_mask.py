"""kernels/token_mask.py: the numpy mask step, and the sampler only ever drawing allowed tokens."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kernels import sampler
from kernels.sampling_rows import SamplingRows
from kernels.token_mask import TokenMask, allowed, apply_token_mask, mask_words

V = 300


def bits_for(ids, vocab=V) -> np.ndarray:
    bits = np.zeros(mask_words(vocab), dtype=np.uint32)
    for t in ids:
        bits[t // 32] |= np.uint32(1 << (t % 32))
    return bits


def test_bit_order_is_token_order():
    bits = bits_for([0, 31, 32, 299])
    assert np.nonzero(allowed(bits, V))[0].tolist() == [0, 31, 32, 299]


def test_only_named_rows_are_masked():
    rng = np.random.default_rng()
    logits = rng.standard_normal((3, V)).astype(np.float32)
    before = logits.copy()
    apply_token_mask(logits, TokenMask(np.array([1], np.int32), bits_for([5, 7])[None]))
    assert np.array_equal(logits[[0, 2]], before[[0, 2]])
    assert np.isneginf(logits[1]).sum() == V - 2 and logits[1, 5] == before[1, 5]
    assert logits.dtype == np.float32


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, V - 1), min_size=1, max_size=20, unique=True),
       st.sampled_from([0.0, 0.7, 1.0, 1.5]), st.sampled_from([1.0, 0.9, 0.3]),
       st.sampled_from([0, 1, 5, 50]), st.integers(0, 2**63 - 1), st.integers(0, 500))
def test_sampler_draws_only_allowed_tokens(ids, temp, top_p, top_k, seed, step):
    rng = np.random.default_rng(seed % 2**32)
    logits = (rng.standard_normal((2, V)) * 4).astype(np.float32)
    apply_token_mask(logits, TokenMask(np.array([0, 1], np.int32), np.stack([bits_for(ids)] * 2)))
    rows = SamplingRows(np.full(2, temp, np.float32), np.full(2, top_p, np.float32),
                        np.full(2, top_k, np.int32), np.full(2, seed, np.uint64), np.array([step, step + 1]))
    assert set(sampler.sample(logits, rows).tolist()) <= set(ids)


def test_kernel_twin_matches_the_in_place_step():
    """kernels/cuda/token_mask.cu's twin (a scratch copy of the sampled rows) == apply_token_mask."""
    from kernels.token_mask import kernel_args, masked_rows
    rng = np.random.default_rng()
    logits = rng.standard_normal((5, V)).astype(np.float32)
    sampled = np.array([4, 0, 2], np.int32)
    mask = TokenMask(np.array([0, 2], np.int32), np.stack([bits_for([1, 2, 3]), bits_for([299])]))
    expect = logits[sampled].copy()
    apply_token_mask(expect, mask)
    got = masked_rows(logits, sampled, mask.bits, kernel_args(3, mask))
    assert np.array_equal(got, expect) and kernel_args(3, mask).tolist() == [0, -1, 1]
