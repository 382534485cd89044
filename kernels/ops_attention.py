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


def _gather_pages(cache: np.ndarray, block_tables: np.ndarray, n_pages: int, page_size: int) -> np.ndarray:
    """[S, n_pages * page_size, KVH * D]: each sequence's first n_pages pages, contiguous
    (whole pages are copied at once; padding ids -1 read page 0, to be masked)."""
    pages = np.maximum(block_tables[:, :n_pages], 0)
    by_page = cache.reshape(-1, page_size, cache.shape[1] * cache.shape[2])
    return by_page[pages].reshape(len(pages), n_pages * page_size, -1)


def paged_attention_decode(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray,
                           positions: np.ndarray, context_lens: np.ndarray, block_tables: np.ndarray,
                           page_size: int, scale: float) -> np.ndarray:
    """One query per sequence, vectorised over sequences.

    q float32 [S, H, D] (row s is sequence s's only query token), positions [S],
    context_lens [S], block_tables [S, P]. Returns float32 [S, H, D].

    Implementation (numpy speed only; the maths is the module's): all KV heads of a
    page are gathered as one contiguous row block and multiplied against a
    block-diagonal query matrix, so each product is one stacked BLAS call on
    contiguous operands (3x the multiply-adds of the grouped form, far less copying).
    """
    s_count, n_heads, d = q.shape
    n_kv = k_cache.shape[1]
    g = n_heads // n_kv
    n_pages = -(-int(context_lens.max()) // page_size)
    width = n_pages * page_size
    k = _gather_pages(k_cache, block_tables, n_pages, page_size)   # [S, W, KVH*D]
    v = _gather_pages(v_cache, block_tables, n_pages, page_size)   # [S, W, KVH*D]
    heads = np.arange(n_kv)
    q_bd = np.zeros((s_count, n_kv, d, n_kv, g), dtype=q.dtype)    # block-diagonal queries
    q_bd[:, heads, :, heads, :] = q.reshape(s_count, n_kv, g, d).transpose(1, 0, 3, 2)
    scores = (k @ q_bd.reshape(s_count, n_kv * d, n_heads)).transpose(0, 2, 1) * scale  # [S, H, W]
    j = np.arange(width)[None, :]
    valid = (j < context_lens[:, None]) & (j <= positions[:, None])
    scores = np.where(valid[:, None, :], scores, -np.inf)
    full = (_softmax_rows(scores) @ v).reshape(s_count, n_kv, g, n_kv, d)  # [S, KVH, G, KVH, D]
    out = full[:, heads, :, heads, :]                               # [KVH, S, G, D]
    return np.ascontiguousarray(out.transpose(1, 0, 2, 3)).reshape(s_count, n_heads, d)


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


def _decode_groups(context_lens: np.ndarray, slot_budget: int) -> list[np.ndarray]:
    """Split sequences (sorted by context length) into groups whose padded K/V gather,
    ``len(group) * max_len``, stays within ``slot_budget`` slots (at least one each)."""
    groups, current, widest = [], [], 0
    for s in np.argsort(context_lens, kind="stable"):
        width = int(context_lens[s])
        if current and (len(current) + 1) * max(widest, width) > slot_budget:
            groups.append(np.array(current))
            current, widest = [], 0
        current.append(s)
        widest = max(widest, width)
    if current:
        groups.append(np.array(current))
    return groups


def paged_attention(q: np.ndarray, k_cache: np.ndarray, v_cache: np.ndarray,
                    positions: np.ndarray, query_start: np.ndarray, context_lens: np.ndarray,
                    block_tables: np.ndarray, page_size: int, scale: float,
                    decode_slot_budget: int = 512) -> np.ndarray:
    """Same result as ``paged_attention_prefill``. Sequences with exactly one query token go
    through the vectorised ``paged_attention_decode`` in groups of about
    ``decode_slot_budget`` gathered slots (measured: one group over a whole large batch
    spills the CPU cache and runs 2x slower than a Python loop; ~512 slots beats both);
    the rest go one by one through ``paged_attention_prefill``."""
    n_per_seq = np.diff(query_start)
    out = np.empty_like(q)
    single = np.nonzero(n_per_seq == 1)[0]
    for group in _decode_groups(context_lens[single], decode_slot_budget):
        seqs = single[group]
        rows = query_start[seqs]
        out[rows] = paged_attention_decode(q[rows], k_cache, v_cache, positions[rows],
                                           context_lens[seqs], block_tables[seqs], page_size, scale)
    multi = np.nonzero(n_per_seq > 1)[0]
    if len(multi):
        starts, ends = query_start[multi], query_start[multi + 1]
        tok = np.concatenate([np.arange(a, b) for a, b in zip(starts, ends)])
        sub_start = np.concatenate([[0], np.cumsum(ends - starts)])
        out[tok] = paged_attention_prefill(q[tok], k_cache, v_cache, positions[tok], sub_start,
                                           context_lens[multi], block_tables[multi], page_size, scale)
    return out
