"""When a step's paged attention runs on decode_attention (kernels/cuda/decode_attention.cu: tensor cores, a
warp per key group, each KV row loaded once for its query heads), which variant, and how many splits.

* ``AOTX_DECODE_MMA``: ``1`` (the default since its checks passed on an H100, session 11: 175/175 kernel
  lines, the random-weights end to end): steps of at least ``MIN_TOKENS`` tokens that take the paged
  attention path (decode steps above the lean/fused bound, small prefill chunks without flash) run
  ``DEFAULT_VARIANT``; a variant name (``w4_k16_s4``, see ``VARIANTS``) picks that one (the bench and the
  checks run each). ``0``: every step keeps paged_attention (attention.cu).
* Splits along the context (each costs attention_combine's launch and the partials' round trip): none, but
  for a small grid over long contexts: fewer than ``SPLIT_MAX_UNITS`` (token, KV head) units a multiprocessor
  and at least ``SPLIT_MIN_KEYS`` keys; then about 2 blocks a multiprocessor, every warp keeping at least
  ``MIN_TILES_PER_WARP`` key tiles. Measured on an H100 (docs/PERFORMANCE.md, session 11): the unsplit grid
  won at batch 16..256 for contexts 288..1,024 (2 or 4 splits + the combine launch took 1.03-1.21x as long);
  at batch 16 with 2,048 keys 8 splits + combine took 15.5 us against 22.5 unsplit.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

DEFAULT = "1"
MIN_TOKENS = 16
MAX_SPLITS = 16            # kernels.cuda.backend.MAX_SPLITS: the partial buffers
MIN_TILES_PER_WARP = 2
SPLIT_MAX_UNITS = 0.5      # (token, KV head) units a multiprocessor below which a long context splits
SPLIT_MIN_KEYS = 1024
ROW_BYTES = (64 + 8) * 2   # a padded shared K/V row (head dim 64)


class Variant(NamedTuple):
    warps: int     # key groups (warps) a block
    keys: int      # keys a tile (BK)
    stages: int    # cp.async stages a warp
    l2_hint: bool = False   # the copies ask L2 for 256 bytes (the slot's next KV head too)
    split: bool = True      # q and P as bf16 hi + lo in the M tile's padding rows (False: one bf16, "_bf16")

    @property
    def name(self) -> str:
        return (f"w{self.warps}_k{self.keys}_s{self.stages}" + ("_l2" if self.l2_hint else "")
                + ("" if self.split else "_bf16"))

    @property
    def kernel(self) -> str:
        return "decode_attention_" + self.name

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def smem_bytes(self) -> int:
        return self.warps * self.stages * 2 * self.keys * ROW_BYTES


# every variant decode_attention.cu compiles (DA_KERNEL lines)
# (H100, session 11 round 1, B=256 ctx=288: w2_k16_s4 25.1-26.0 us, w4_k16_s3 25.7-26.6, w4_k16_s4_l2 25.9-26.5,
# w4_k16_s4 26.1-26.8, w8_k16_s3 28.7-29.1; dropped: w4_k32_s3 28.6-28.9, w4_k64_s2 39.5, w1_k16_s6 25.7-26.7
# but its 8 blocks a multiprocessor of one warp each only win split)
# Session 12: every variant splits q and P into bf16 hi + lo (decode_attention.cu, SPLIT): session 11's single
# bf16 rounding made greedy outputs depend on the batch (make gpu-check --real: 18/21 engines identical against
# 20/21 with the scalar path); w2_k16_s4_bf16 keeps that rounding as the peer of the bench and the checks.
VARIANTS = {v.name: v for v in (Variant(4, 16, 4), Variant(4, 16, 3), Variant(2, 16, 4), Variant(8, 16, 3),
                                 Variant(4, 16, 4, True), Variant(2, 16, 4, split=False))}
DEFAULT_VARIANT = "w2_k16_s4"
SINGLE_BF16_PEER = "w2_k16_s4_bf16"


def variant_from_env(env: Mapping[str, str]) -> Variant | None:
    """The variant AOTX_DECODE_MMA asks for; None: off."""
    value = env.get("AOTX_DECODE_MMA", DEFAULT) or DEFAULT
    if value == "0":
        return None
    if value == "1":
        return VARIANTS[DEFAULT_VARIANT]
    if value in VARIANTS:
        return VARIANTS[value]
    raise ValueError(f"AOTX_DECODE_MMA must be 0, 1 or one of {sorted(VARIANTS)}, got {value!r}")


def applies(variant: Variant | None, n_tokens: int) -> bool:
    return variant is not None and n_tokens >= MIN_TOKENS


def nsplit(variant: Variant, n_tokens: int, max_len: int, n_kv: int, sm_count: int) -> int:
    """Splits along the context for ``n_tokens`` query tokens of at most ``max_len`` keys on ``sm_count``
    multiprocessors (see the module doc)."""
    units = n_tokens * n_kv
    if units >= SPLIT_MAX_UNITS * sm_count or max_len < SPLIT_MIN_KEYS:
        return 1
    tiles = -(-max_len // variant.keys)
    cap = max(1, tiles // (variant.warps * MIN_TILES_PER_WARP))
    return max(1, min(MAX_SPLITS, cap, -(-2 * sm_count // units)))
