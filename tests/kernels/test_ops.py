"""Each reference op against an independent formula on small random shapes."""
import numpy as np
import pytest

from kernels.ops_attention import kv_write
from kernels.ops_embed import embedding, lm_head
from kernels.ops_mlp import swiglu
from kernels.ops_norm import add_rmsnorm, rmsnorm
from kernels.ops_rope import rope, rope_cos_sin

rng = np.random.default_rng(1234)


def f32(*shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def test_embedding_and_lm_head():
    table = f32(50, 8)
    ids = np.array([3, 0, 49, 3], dtype=np.int32)
    out = embedding(ids, table)
    assert out.dtype == np.float32
    for t, i in enumerate(ids):
        np.testing.assert_array_equal(out[t], table[i])
    x = f32(4, 8)
    logits = lm_head(x, np.ascontiguousarray(table.T))
    assert logits.dtype == np.float32 and logits.shape == (4, 50)
    ref = np.array([[sum(float(x[r, h]) * float(table[v, h]) for h in range(8)) for v in range(50)]
                    for r in range(4)])
    np.testing.assert_allclose(logits, ref, rtol=1e-5, atol=1e-5)


def test_rmsnorm():
    x, w = f32(5, 16, scale=3.0), f32(16)
    y = rmsnorm(x, w, 1e-5)
    assert y.dtype == np.float32
    x64 = x.astype(np.float64)
    ref = x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5) * w
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_add_rmsnorm():
    x, res, w = f32(3, 16), f32(3, 16), f32(16)
    r, y = add_rmsnorm(x, res, w, 1e-5)
    assert r.dtype == y.dtype == np.float32
    np.testing.assert_array_equal(r, x + res)
    np.testing.assert_allclose(y, rmsnorm(x + res, w, 1e-5), rtol=1e-6)


def test_rope_matches_complex_rotation():
    t, heads, d, base = 6, 3, 8, 10000.0
    x = f32(t, heads, d)
    pos = np.array([0, 1, 2, 7, 100, 4095], dtype=np.int32)
    y = rope(x, pos, base)
    assert y.dtype == np.float32
    pairs = x[..., 0::2].astype(np.float64) + 1j * x[..., 1::2].astype(np.float64)
    theta = pos[:, None] * base ** (-np.arange(0, d, 2) / d)
    rot = pairs * np.exp(1j * theta)[:, None, :]
    ref = np.empty((t, heads, d))
    ref[..., 0::2], ref[..., 1::2] = rot.real, rot.imag
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(y[0], x[0])  # position 0 is the identity
    # rotation preserves each pair's norm
    np.testing.assert_allclose(np.linalg.norm(y, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)
    cos, sin = rope_cos_sin(pos, d, base)
    assert cos.dtype == sin.dtype == np.float32 and cos.shape == (t, d // 2)


def test_swiglu():
    gu = f32(4, 12, scale=4.0)
    gu[0, 0] = -200.0  # exp overflow path: silu -> -0
    y = swiglu(gu)
    assert y.dtype == np.float32 and y.shape == (4, 6)
    g, u = gu[:, :6].astype(np.float64), gu[:, 6:].astype(np.float64)
    ref = g * (1 / (1 + np.exp(-g))) * u
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_kv_write_scatter_and_skip_padding():
    kc = np.zeros((32, 2, 4), np.float32)
    vc = np.zeros((32, 2, 4), np.float32)
    k, v = f32(4, 2, 4), f32(4, 2, 4)
    kv_write(kc, vc, k, v, np.array([17, 3, -1, 30], dtype=np.int32))
    np.testing.assert_array_equal(kc[[17, 3, 30]], k[[0, 1, 3]])
    np.testing.assert_array_equal(vc[[17, 3, 30]], v[[0, 1, 3]])
    assert np.count_nonzero(np.abs(kc).sum((1, 2))) == 3


@pytest.mark.parametrize("fn", [rmsnorm])
def test_no_float64_promotion(fn):
    assert fn(f32(2, 8), f32(8), 1e-5).dtype == np.float32
