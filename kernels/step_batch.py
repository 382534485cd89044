"""What one forward step computes: the contract between the engine and every backend.

Sequences are concatenated along the token axis (prefill chunks and decode
tokens mix freely, like vLLM's flattened batches). Every array is int32.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class StepBatch:
    token_ids: np.ndarray     # [T] query tokens of all sequences, concatenated
    positions: np.ndarray     # [T] absolute position of each query token in its sequence
    query_start: np.ndarray   # [S+1] cu_seqlens: sequence s owns tokens query_start[s]:query_start[s+1]
    context_lens: np.ndarray  # [S] tokens in the KV cache for s once this step wrote its K/V
    block_tables: np.ndarray  # [S, P] page ids of each sequence in order, padded with -1
    slot_mapping: np.ndarray  # [T] flat KV slot (page * page_size + offset) each token's K/V is written to
    logits_rows: np.ndarray   # [R] indexes into the T axis whose logits forward() returns, in this order

    @property
    def num_seqs(self) -> int:
        return int(self.context_lens.shape[0])

    @property
    def num_tokens(self) -> int:
        return int(self.token_ids.shape[0])
