"""Paged attention (scattered, shuffled pages) equals dense causal attention."""
import numpy as np
import pytest

from kernels.ops_attention import (kv_write, paged_attention, paged_attention_decode,
                                   paged_attention_prefill)

H, KVH, D, PS, PAGES = 6, 2, 8, 4, 64
SCALE = 1.0 / D ** 0.5


def dense_causal(q, k, v, q_pos):
    """q [n, H, D] at absolute positions q_pos; k, v [L, KVH, D] for positions 0..L-1 (float64)."""
    g = H // KVH
    out = np.zeros(q.shape)
    for t in range(q.shape[0]):
        for h in range(H):
            kh, vh = k[: q_pos[t] + 1, h // g].astype(np.float64), v[: q_pos[t] + 1, h // g]
            s = kh @ q[t, h].astype(np.float64) * SCALE
            p = np.exp(s - s.max())
            out[t, h] = (p / p.sum()) @ vh
    return out


def make_case(seqs, seed=0):
    """seqs: list of (cached_len, new_len). Returns everything for one mixed step."""
    rng = np.random.default_rng(seed)
    free = list(rng.permutation(PAGES))
    kc = np.zeros((PAGES * PS, KVH, D), np.float32)
    vc = np.zeros_like(kc)
    tables, full_k, full_v, q_list, pos, starts, ctx = [], [], [], [], [], [0], []
    width = max(-(-(a + b) // PS) for a, b in seqs)
    for cached, new in seqs:
        total = cached + new
        pages = [int(free.pop()) for _ in range(-(-total // PS))]
        tables.append(pages + [-1] * (width - len(pages)))
        k = rng.standard_normal((total, KVH, D)).astype(np.float32)
        v = rng.standard_normal((total, KVH, D)).astype(np.float32)
        slots = np.array([pages[j // PS] * PS + j % PS for j in range(total)])
        kv_write(kc, vc, k, v, slots)
        full_k.append(k)
        full_v.append(v)
        q_list.append(rng.standard_normal((new, H, D)).astype(np.float32))
        pos.extend(range(cached, total))
        starts.append(starts[-1] + new)
        ctx.append(total)
    i32 = lambda a: np.asarray(a, np.int32)  # noqa: E731
    return dict(q=np.concatenate(q_list), kc=kc, vc=vc, pos=i32(pos), starts=i32(starts),
                ctx=i32(ctx), tables=i32(tables), full_k=full_k, full_v=full_v, q_list=q_list)


def reference(c, seqs):
    outs = []
    for s, (cached, new) in enumerate(seqs):
        outs.append(dense_causal(c["q_list"][s], c["full_k"][s], c["full_v"][s],
                                 np.arange(cached, cached + new)))
    return np.concatenate(outs)


MIXED = [(0, 9), (13, 1), (5, 7), (0, 1), (30, 1), (2, 3)]


@pytest.mark.parametrize("seqs", [[(0, 17)], [(0, 5), (0, 11)], [(20, 1), (7, 1), (0, 1)], MIXED])
def test_prefill_kernel_matches_dense(seqs):
    c = make_case(seqs)
    out = paged_attention_prefill(c["q"], c["kc"], c["vc"], c["pos"], c["starts"], c["ctx"],
                                  c["tables"], PS, SCALE)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, reference(c, seqs), rtol=1e-4, atol=1e-5)


def test_prefill_query_blocks_do_not_change_result():
    c = make_case(MIXED, seed=9)
    args = (c["q"], c["kc"], c["vc"], c["pos"], c["starts"], c["ctx"], c["tables"], PS, SCALE)
    whole = paged_attention_prefill(*args)
    for block in (1, 2, 5):
        np.testing.assert_allclose(paged_attention_prefill(*args, query_block=block), whole,
                                   rtol=1e-6, atol=1e-6)


def test_dispatching_kernel_matches_dense_on_mixed_batch():
    c = make_case(MIXED, seed=3)
    out = paged_attention(c["q"], c["kc"], c["vc"], c["pos"], c["starts"], c["ctx"],
                          c["tables"], PS, SCALE)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, reference(c, MIXED), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("budget", [1, 20, 64, 10_000])
def test_dispatch_decode_grouping_does_not_change_result(budget):
    seqs = [(20, 1), (3, 1), (0, 9), (0, 1), (41, 1), (15, 1), (8, 4)]
    c = make_case(seqs, seed=13)
    out = paged_attention(c["q"], c["kc"], c["vc"], c["pos"], c["starts"], c["ctx"],
                          c["tables"], PS, SCALE, decode_slot_budget=budget)
    np.testing.assert_allclose(out, reference(c, seqs), rtol=1e-4, atol=1e-5)


def test_decode_kernel_matches_dense_and_prefill_kernel():
    seqs = [(20, 1), (3, 1), (0, 1), (41, 1), (15, 1)]
    c = make_case(seqs, seed=7)
    out = paged_attention_decode(c["q"], c["kc"], c["vc"], c["pos"], c["ctx"], c["tables"], PS, SCALE)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, reference(c, seqs), rtol=1e-4, atol=1e-5)
    other = paged_attention_prefill(c["q"], c["kc"], c["vc"], c["pos"], c["starts"], c["ctx"],
                                    c["tables"], PS, SCALE)
    np.testing.assert_allclose(out, other, rtol=1e-5, atol=1e-6)


def test_pages_really_are_scattered():
    c = make_case(MIXED)
    for row in c["tables"]:
        pages = [p for p in row if p >= 0]
        if len(pages) > 1:
            assert pages != list(range(pages[0], pages[0] + len(pages)))
