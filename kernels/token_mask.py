"""Token masks: the rows of a step whose next token is constrained, and the numpy mask step.

A ``TokenMask`` names some rows of the logits handed to the sampler (``rows``, int32 [M], in
sampling order) and, for each, a bitmask of the tokens it may draw (``bits``, uint32 [M, W] with
``W = ceil(V / 32)``; bit ``t % 32`` of word ``t // 32`` allows token ``t``). Masking sets every
other logit of those rows to -inf, so the sampler (kernels/sampler.py: weight 0 = never drawn)
and greedy argmax can only pick an allowed token. Rows not named are untouched.

``apply_token_mask`` is the specification and the numpy backend's step; the CUDA kernel
(kernels/cuda/token_mask.cu) computes the same values into a scratch copy.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def mask_words(vocab_size: int) -> int:
    return (int(vocab_size) + 31) // 32


@dataclass(frozen=True)
class TokenMask:
    rows: np.ndarray    # int32 [M]: rows of the sampled logits that are constrained
    bits: np.ndarray    # uint32 [M, W]


def allowed(bits: np.ndarray, vocab_size: int) -> np.ndarray:
    """bool [..., V]: the bitmask expanded (little-endian bit order within each uint32 word)."""
    raw = np.ascontiguousarray(bits, dtype=np.uint32).view(np.uint8)
    ok = np.unpackbits(raw, axis=-1, bitorder="little")[..., :vocab_size].astype(bool)
    if ok.shape[-1] < vocab_size:       # a mask narrower than the logits: the rest is not allowed
        pad = [(0, 0)] * (ok.ndim - 1) + [(0, vocab_size - ok.shape[-1])]
        ok = np.pad(ok, pad, constant_values=False)
    return ok


def allowed_ids(bits: np.ndarray, vocab_size: int) -> np.ndarray:
    return np.nonzero(allowed(bits, vocab_size))[0]


def apply_token_mask(logits: np.ndarray, mask: TokenMask) -> None:
    """In place: every token a named row may not draw gets logit -inf."""
    if not len(mask.rows):
        return
    vocab = logits.shape[-1]
    ok = allowed(mask.bits, vocab)
    rows = np.asarray(mask.rows, dtype=np.intp)
    logits[rows] = np.where(ok, logits[rows], np.float32(-np.inf))


def masked_rows(logits: np.ndarray, rows: np.ndarray, bits: np.ndarray, bit_row: np.ndarray) -> np.ndarray:
    """The twin of kernels/cuda/token_mask.cu: float32 [len(rows), V] where out[r] is logits[rows[r]]
    with, when ``bit_row[r] >= 0``, every token not in ``bits[bit_row[r]]`` set to -inf."""
    vocab = logits.shape[-1]
    out = np.asarray(logits, dtype=np.float32)[np.asarray(rows, dtype=np.intp)].copy()
    for r, b in enumerate(np.asarray(bit_row).tolist()):
        if b >= 0:
            out[r][~allowed(bits[b], vocab)] = np.float32(-np.inf)
    return out


def kernel_args(n_rows: int, mask: TokenMask) -> np.ndarray:
    """bit_row int32 [n_rows] of a mask: the mask row of each sampled row, -1 for unconstrained."""
    bit_row = np.full(n_rows, -1, dtype=np.int32)
    bit_row[np.asarray(mask.rows, dtype=np.intp)] = np.arange(len(mask.rows), dtype=np.int32)
    return bit_row
