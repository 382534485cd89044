"""Numpy twin of decode_attention.cu: its walk (splits, key tiles dealt to the warps, per-warp online softmax in
base 2, the warps' merge, the split partials and attention_combine) and its roundings for the tensor cores:
q pre-scaled, and P, as bf16 hi + bf16 lo (``split``, the kernel's SPLIT: S = q_hi K + q_lo K, O = P_hi V +
P_lo V, each product summed in float32 and the halves added after) or as one bf16 each (the _bf16 variants);
P's row sums of the values the mma sees; bf16 output. Only the order of the float32 sums inside an mma
differs from the GPU, and ex2.approx's last bits.

The semantics are kernels.ops_attention.paged_attention's (tests/kernels_cuda/test_decode_attention.py checks
the twin against it on the CPU; ops/gpu/decode_attention_check.py checks the kernel against both).
"""
from __future__ import annotations

import numpy as np

from kernels.cuda.twins import round_bf16

LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453


def _split_range(length: int, keys: int, nsplit: int, split: int) -> tuple[int, int]:
    """The key tiles [tb, te) split ``split`` of ``nsplit`` walks for ``length`` keys (kernel: tb, te)."""
    ntiles = -(-length // keys) if length > 0 else 0
    per = -(-ntiles // nsplit)
    tb = min(ntiles, split * per)
    return tb, min(ntiles, tb + per)


def split_bf16(x: np.ndarray) -> list[np.ndarray]:
    """The kernel's SPLIT parts of float32 x: [bf16(x), bf16(x - bf16(x))] (bf16_rest)."""
    hi = round_bf16(x)
    return [hi, round_bf16((x - hi).astype(np.float32))]


def one_bf16(x: np.ndarray) -> list[np.ndarray]:
    """The _bf16 variants' single part."""
    return [round_bf16(x)]


def _walk(q_parts, k, v, length, tiles, keys, parts=split_bf16):
    """One warp's online softmax over ``tiles`` (key tile indices) of one (token, KV head): q_parts the
    pre-scaled queries' parts [G, D] (their products with K summed, in order), k / v [L, D]; ``parts`` splits
    P the same way. (o [G, D] unnormalised, m [G] base 2, l [G])."""
    g, d = q_parts[0].shape
    m, l_ = np.full(g, -np.inf, np.float32), np.zeros(g, np.float32)
    os_ = [np.zeros((g, d), np.float32) for _ in q_parts]   # one accumulator a P part (M tile rows g, g + 8)
    for kt in tiles:
        j0 = kt * keys
        j1 = min(j0 + keys, length)
        kt_ = k[j0:j1].T
        s = q_parts[0] @ kt_                                    # [G, n] (keys past L never enter)
        for qp in q_parts[1:]:
            s = s + qp @ kt_
        mx = np.maximum(m, s.max(axis=1))
        base = np.where(mx == -np.inf, 0.0, mx).astype(np.float32)
        corr = np.exp2(m - base)
        m = mx
        ps = parts(np.exp2(s - base[:, None]))
        l_ = l_ * corr + (ps[0] + ps[1] if len(ps) > 1 else ps[0]).sum(axis=1)
        os_ = [o * corr[:, None] + p @ v[j0:j1] for o, p in zip(os_, ps)]
    o = os_[0]
    for extra in os_[1:]:
        o = o + extra
    return o, m, l_


def _merge(a, b):
    """Warp b's (o, m, l) into warp a's, as the kernel's merge does (base 2)."""
    (oa, ma, la), (ob, mb, lb) = a, b
    nm = np.maximum(ma, mb)
    base = np.where(nm == -np.inf, 0.0, nm)
    sa, sb = np.exp2(ma - base), np.exp2(mb - base)
    return oa * sa[:, None] + ob * sb[:, None], nm, la * sa + lb * sb


def decode_attention(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray, tok_seq: np.ndarray,
                     positions: np.ndarray, context_lens: np.ndarray, block_tables: np.ndarray, page_size: int,
                     scale: float, warps: int, keys: int, nsplit: int, split: bool = True,
                     rounding=None, round_out: bool = True) -> np.ndarray:
    """float32 [T, H, D] (bf16 values): q float32 [T, H, D]; caches float32 [slots, n_kv, D] (bf16 values);
    tok_seq [T], positions [T], context_lens [S], block_tables [S, P]; the variant's ``warps``, ``keys`` and
    ``split``. ``rounding`` (q's, P's: functions like split_bf16) replaces ``split``'s: the precision study
    (ops/gpu/decode_attention_precision.py) measures roundings no kernel has with it; ``round_out=False`` returns
    the float32 output before its bf16 rounding (the study's error of the walk itself)."""
    q_round, p_round = rounding or ((split_bf16, split_bf16) if split else (one_bf16, one_bf16))
    t_count, n_heads, d = q.shape
    n_kv = k_cache.shape[1]
    g = n_heads // n_kv
    out = np.zeros((t_count, n_heads, d), np.float32)
    for t in range(t_count):
        s = int(tok_seq[t])
        length = min(int(positions[t]) + 1, int(context_lens[s]))
        j = np.arange(max(length, 0))
        slots = block_tables[s, j // page_size].astype(np.int64) * page_size + j % page_size
        for kvh in range(n_kv):
            qs = q_round((q[t, kvh * g:(kvh + 1) * g] * np.float32(scale * LOG2E)).astype(np.float32))
            k, v = k_cache[slots, kvh], v_cache[slots, kvh]
            parts = []
            for sp in range(nsplit):
                tb, te = _split_range(length, keys, nsplit, sp)
                acc = _walk(qs, k, v, length, range(tb, te, warps), keys, p_round)
                for w in range(1, warps):
                    acc = _merge(acc, _walk(qs, k, v, length, range(tb + w, te, warps), keys, p_round))
                parts.append(acc)
            if nsplit == 1:
                o, _, l_ = parts[0]
                out[t, kvh * g:(kvh + 1) * g] = np.where(l_[:, None] > 0, o / np.where(l_ > 0, l_, 1)[:, None], 0)
            else:
                out[t, kvh * g:(kvh + 1) * g] = _combine([(o, m * np.float32(LN2), l_) for o, m, l_ in parts])
    return round_bf16(out) if round_out else out


def _combine(parts) -> np.ndarray:
    """attention_combine (attention.cu) of the split partials (o, m natural-log units, l): [G, D]."""
    m = np.max([p[1] for p in parts], axis=0)
    o, l_ = np.zeros_like(parts[0][0]), np.zeros_like(parts[0][2])
    for po, pm, pl in parts:
        w = np.where(pm == -np.inf, 0.0, np.exp(pm - np.where(m == -np.inf, 0.0, m)))
        o, l_ = o + po * w[:, None], l_ + pl * w
    return np.where(l_[:, None] > 0, o / np.where(l_ > 0, l_, 1)[:, None], 0)


def kv_bytes(context_lens, n_kv: int, head_dim: int) -> int:
    """K + V bytes a step's decode attention must read once (bf16): the bench's GB/s numerator."""
    return int(np.sum(np.asarray(context_lens, dtype=np.int64))) * n_kv * head_dim * 2 * 2

