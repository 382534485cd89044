"""When a step's paged attention runs on decode_attention (kernels/cuda/decode_attention.cu: tensor cores, a
warp per key group, each KV row loaded once for its query heads), which variant, and how many splits.

* ``AOTX_DECODE_MMA``: ``0`` (the default until ``make gpu-check`` passes with it on a GPU): every step keeps
  paged_attention (attention.cu). ``1``: steps of at least ``MIN_TOKENS`` tokens that take the paged
  attention path (decode steps above the lean/fused bound, small prefill chunks without flash) run
  ``DEFAULT_VARIANT``; a variant name (``w4_k16_s4``, see ``VARIANTS``) picks that one (the bench and the
  checks run each).
* Splits along the context: one block per (KV head, token) fills the GPU at batch 256 (768 blocks against
  ~400 resident); smaller grids split each token's keys so that the blocks about fill the resident slots once,
  leaving every warp at least ``MIN_TILES_PER_WARP`` key tiles. The last split of each (token, KV head) to
  finish merges the partials (``MERGE_IN_KERNEL``; else attention_combine, a second launch).
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

DEFAULT = "0"
MIN_TOKENS = 16
MAX_SPLITS = 16            # kernels.cuda.backend.MAX_SPLITS: the partial buffers
MIN_TILES_PER_WARP = 2
MERGE_IN_KERNEL = True     # splits merged by each (token, KV head)'s last split (no attention_combine launch)
ROW_BYTES = (64 + 8) * 2   # a padded shared K/V row (head dim 64)


class Variant(NamedTuple):
    warps: int     # key groups (warps) a block
    keys: int      # keys a tile (BK)
    stages: int    # cp.async stages a warp
    l2_hint: bool = False   # the copies ask L2 for 256 bytes (the slot's next KV head too)

    @property
    def name(self) -> str:
        return f"w{self.warps}_k{self.keys}_s{self.stages}" + ("_l2" if self.l2_hint else "")

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
VARIANTS = {v.name: v for v in (Variant(4, 16, 4), Variant(4, 16, 3), Variant(4, 32, 3), Variant(4, 64, 2),
                                 Variant(2, 16, 4), Variant(8, 16, 3), Variant(1, 16, 6),
                                 Variant(4, 16, 4, True))}
DEFAULT_VARIANT = "w4_k16_s4"


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


def nsplit(variant: Variant, n_tokens: int, max_len: int, n_kv: int, resident_blocks: int) -> int:
    """Splits along the context for ``n_tokens`` query tokens of at most ``max_len`` keys, with
    ``resident_blocks`` blocks of ``variant`` resident on the whole GPU at once."""
    units = n_tokens * n_kv
    if units >= resident_blocks:
        return 1
    tiles = -(-max(max_len, 1) // variant.keys)
    cap = max(1, tiles // (variant.warps * MIN_TILES_PER_WARP))
    return max(1, min(MAX_SPLITS, cap, round(resident_blocks / units)))
