"""Test helper: a tiny page allocator that turns (sequence, new tokens) lists into StepBatches.

Pages are handed out from a shuffled free list, so sequences' pages are scattered
and non-contiguous — exactly what paged attention must cope with.
"""
from __future__ import annotations

import numpy as np

from kernels import StepBatch


class Pager:
    def __init__(self, num_pages: int, page_size: int, seed: int = 0):
        self.page_size = page_size
        self.free = list(np.random.default_rng(seed).permutation(num_pages))
        self.pages: dict[int, list[int]] = {}
        self.lengths: dict[int, int] = {}

    def new_seq(self) -> int:
        sid = len(self.pages)
        self.pages[sid] = []
        self.lengths[sid] = 0
        return sid

    def build(self, items: list[tuple[int, list[int]]], all_logits: bool = False) -> StepBatch:
        """One step: each (sid, tokens) appends tokens to sid. Logits rows: the last token of
        each sequence, or every token when ``all_logits``."""
        ids, pos, slots, starts, ctx, rows = [], [], [], [0], [], []
        for sid, toks in items:
            start = self.lengths[sid]
            for j in range(start, start + len(toks)):
                if j // self.page_size >= len(self.pages[sid]):
                    self.pages[sid].append(int(self.free.pop()))
                slots.append(self.pages[sid][j // self.page_size] * self.page_size + j % self.page_size)
                pos.append(j)
            ids.extend(toks)
            self.lengths[sid] = start + len(toks)
            ctx.append(self.lengths[sid])
            first = starts[-1]
            starts.append(first + len(toks))
            rows.extend(range(first, starts[-1]) if all_logits else [starts[-1] - 1])
        width = max(len(self.pages[sid]) for sid, _ in items)
        table = np.full((len(items), width), -1, dtype=np.int32)
        for s, (sid, _) in enumerate(items):
            table[s, : len(self.pages[sid])] = self.pages[sid]
        i32 = lambda a: np.asarray(a, dtype=np.int32)  # noqa: E731
        return StepBatch(token_ids=i32(ids), positions=i32(pos), query_start=i32(starts),
                         context_lens=i32(ctx), block_tables=table, slot_mapping=i32(slots),
                         logits_rows=i32(rows))


def greedy_generate(backend, prompt: list[int], max_new: int, eos_id: int, pager: Pager | None = None) -> list[int]:
    """Prefill ``prompt`` in one step, then decode greedily until eos or ``max_new`` tokens."""
    pager = pager or Pager(backend.num_pages, backend.page_size)
    sid = pager.new_seq()
    logits = backend.forward(pager.build([(sid, list(prompt))]))
    out: list[int] = []
    while len(out) < max_new:
        tok = int(np.argmax(logits[0]))
        out.append(tok)
        if tok == eos_id:
            break
        logits = backend.forward(pager.build([(sid, [tok])]))
    return out
