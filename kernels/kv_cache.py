"""The paged KV pool: per layer one K and one V array of flat slots.

``k[layer]`` and ``v[layer]`` have shape ``[num_pages * page_size, n_kv_heads, head_dim]``
(float32). Token ``j`` of a sequence whose block table is ``bt`` lives in slot
``bt[j // page_size] * page_size + j % page_size``. Which pages belong to whom
is the block manager's business (in ``aotx``); this class only owns the memory.
"""
from __future__ import annotations

import numpy as np

from kernels.config import LlamaConfig


class PagedKVCache:
    def __init__(self, n_layers: int, num_pages: int, page_size: int, n_kv_heads: int, head_dim: int):
        if num_pages <= 0 or page_size <= 0:
            raise ValueError(f"num_pages and page_size must be positive, got {num_pages}, {page_size}")
        self.n_layers = n_layers
        self.num_pages = num_pages
        self.page_size = page_size
        self.n_kv_heads = n_kv_heads
        self.head_dim = head_dim
        shape = (num_pages * page_size, n_kv_heads, head_dim)
        # np.zeros maps lazily: untouched pages cost no resident memory.
        self.k = [np.zeros(shape, dtype=np.float32) for _ in range(n_layers)]
        self.v = [np.zeros(shape, dtype=np.float32) for _ in range(n_layers)]

    @classmethod
    def for_config(cls, cfg: LlamaConfig, num_pages: int, page_size: int = 16) -> "PagedKVCache":
        return cls(cfg.n_layers, num_pages, page_size, cfg.n_kv_heads, cfg.head_dim)

    @property
    def num_slots(self) -> int:
        return self.num_pages * self.page_size

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.k) + sum(a.nbytes for a in self.v)

    def slots_of(self, block_table: np.ndarray, length: int) -> np.ndarray:
        """Flat slots of tokens ``0..length-1`` of a sequence with ``block_table``."""
        j = np.arange(length)
        return (block_table[j // self.page_size].astype(np.int64) * self.page_size
                + j % self.page_size)
