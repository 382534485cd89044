"""Reference kernels: paged KV write and paged attention (GQA).

Layout: ``k_cache``/``v_cache`` float32 ``[num_slots, n_kv_heads, D]`` (see
``kernels.kv_cache``). Query head ``h`` reads KV head ``h // (n_heads // n_kv_heads)``.

Semantics shared by both attention kernels. Sequence ``s`` owns query tokens
``t in [query_start[s], query_start[s+1])`` and has ``L = context_lens[s]``
tokens in the cache (including the ones this step just wrote). Its key ``j``
(``0 <= j < L``) lives in slot ``block_tables[s, j // page_size] * page_size
+ j % page_size``. Query token ``t`` at absolute position ``positions[t]``
attends to keys ``j <= positions[t]`` (causal over prior context and its own
chunk)::

    score[j] = scale * dot(q[t, h], K[j, h // G])
    out[t, h] = sum_j softmax(score)[j] * V[j, h // G]

computed in float32 with the max subtracted before ``exp``.
"""
from __future__ import annotations

import numpy as np


def kv_write(k_cache: np.ndarray, v_cache: np.ndarray, k: np.ndarray, v: np.ndarray,
             slot_mapping: np.ndarray) -> None:
    """In place: ``k_cache[slot_mapping[t]] = k[t]``, same for v. Negative slots are skipped (padding)."""
    slots = np.asarray(slot_mapping)
    if slots.size and slots.min() < 0:
        keep = slots >= 0
        slots, k, v = slots[keep], k[keep], v[keep]
    k_cache[slots] = k
    v_cache[slots] = v


def _slots(block_tables: np.ndarray, lengths: np.ndarray, page_size: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """slots int64 [S, width] (0 where j >= length) and valid mask [S, width]."""
    j = np.arange(width)
    valid = j[None, :] < lengths[:, None]
    page_col = np.minimum(j // page_size, block_tables.shape[1] - 1)
    pages = block_tables[:, page_col].astype(np.int64)
    slots = pages * page_size + (j % page_size)[None, :]
    return np.where(valid, slots, 0), valid


def _softmax_rows(scores: np.ndarray) -> np.ndarray:
    scores = scores - scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    return p / p.sum(axis=-1, keepdims=True)


def paged_attention_decode(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray,
                           positions: np.ndarray, context_lens: np.ndarray, block_tables: np.ndarray,
                           page_size: int, scale: float) -> np.ndarray:
    """One query per sequence, vectorised over sequences.

    q float32 [S, H, D] (row s is sequence s's only query token), positions [S],
    context_lens [S], block_tables [S, P]. Returns float32 [S, H, D].
    """
    s_count, n_heads, d = q.shape
    n_kv = k_cache.shape[1]
    g = n_heads // n_kv
    width = int(context_lens.max())
    slots, valid = _slots(block_tables, context_lens, page_size, width)
    valid &= np.arange(width)[None, :] <= positions[:, None]
    k = k_cache[slots].transpose(0, 2, 3, 1)          # [S, KVH, D, W]
    v = v_cache[slots].transpose(0, 2, 1, 3)          # [S, KVH, W, D]
    qg = q.reshape(s_count, n_kv, g, d)               # [S, KVH, G, D]
    scores = (qg @ k) * scale                         # [S, KVH, G, W]
    scores = np.where(valid[:, None, None, :], scores, -np.inf)
    out = _softmax_rows(scores) @ v                   # [S, KVH, G, D]
    return out.reshape(s_count, n_heads, d)


def paged_attention_prefill(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray,
                            positions: np.ndarray, query_start: np.ndarray, context_lens: np.ndarray,
                            block_tables: np.ndarray, page_size: int, scale: float,
                            query_block: int = 256) -> np.ndarray:
    """Any number of queries per sequence (prefill chunks, decode, or mixed); one sequence at a time,
    its queries in blocks of ``query_block`` (bounds the score matrix to
    ``H * query_block * L`` floats; the result does not depend on it).

    q float32 [T, H, D], positions [T], query_start [S+1]. Returns float32 [T, H, D].
    """
    t_count, n_heads, d = q.shape
    n_kv = k_cache.shape[1]
    g = n_heads // n_kv
    out = np.empty_like(q)
    for s in range(len(context_lens)):
        length = int(context_lens[s])
        seq_start, seq_end = int(query_start[s]), int(query_start[s + 1])
        if seq_end == seq_start:
            continue
        slots, _ = _slots(block_tables[s:s + 1], context_lens[s:s + 1], page_size, length)
        k = k_cache[slots[0]].transpose(1, 2, 0)      # [KVH, D, L]
        v = v_cache[slots[0]].transpose(1, 0, 2)      # [KVH, L, D]
        for a in range(seq_start, seq_end, query_block):
            b = min(a + query_block, seq_end)
            n = b - a
            qh = q[a:b].reshape(n, n_kv, g, d).transpose(1, 0, 2, 3).reshape(n_kv, n * g, d)
            scores = ((qh @ k) * scale).reshape(n_kv, n, g, length)
            allowed = np.arange(length)[None, :] <= positions[a:b, None]   # [n, L]
            scores = np.where(allowed[None, :, None, :], scores, -np.inf)
            p = _softmax_rows(scores).reshape(n_kv, n * g, length)
            o = (p @ v).reshape(n_kv, n, g, d).transpose(1, 0, 2, 3)
            out[a:b] = o.reshape(n, n_heads, d)
    return out


def paged_attention(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray,
                    positions: np.ndarray, query_start: np.ndarray, context_lens: np.ndarray,
                    block_tables: np.ndarray, page_size: int, scale: float) -> np.ndarray:
    """Same result as ``paged_attention_prefill``; sequences with exactly one query token go
    through the vectorised ``paged_attention_decode``, the rest one by one."""
    n_per_seq = np.diff(query_start)
    single = n_per_seq == 1
    if not single.any():
        return paged_attention_prefill(q, k_cache, v_cache, positions, query_start, context_lens,
                                       block_tables, page_size, scale)
    out = np.empty_like(q)
    rows = query_start[:-1][single]
    out[rows] = paged_attention_decode(q[rows], k_cache, v_cache, positions[rows],
                                       context_lens[single], block_tables[single], page_size, scale)
    multi = ~single & (n_per_seq > 0)
    if multi.any():
        idx = np.nonzero(multi)[0]
        starts, ends = query_start[idx], query_start[idx + 1]
        tok = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends)])
        sub_start = np.concatenate([[0], np.cumsum(ends - starts)])
        out[tok] = paged_attention_prefill(q[tok], k_cache, v_cache, positions[tok], sub_start,
                                           context_lens[idx], block_tables[idx], page_size, scale)
    return out
