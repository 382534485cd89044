"""Continuous batching policy: who runs this step, and how many tokens each.

Admission is conservative: a waiting sequence joins only when the pages for
its whole lifetime fit beside the reservations of everything running, so a
running sequence never runs out of KV and nothing is ever preempted. The
queue is strict FIFO (the head blocks the line). No numpy, no backend.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from aotx.engine.block_manager import BlockManager
from aotx.engine.sequence import Sequence, SequenceStatus


@dataclass
class ScheduledSeq:
    seq: Sequence
    num_tokens: int        # tokens to run this step (1 for decode, a chunk for prefill)
    is_decode: bool


@dataclass
class SchedulerOutput:
    scheduled: list[ScheduledSeq] = field(default_factory=list)
    cancelled: list[Sequence] = field(default_factory=list)   # freed this step

    @property
    def num_decode(self) -> int:
        return sum(1 for s in self.scheduled if s.is_decode)

    @property
    def num_prefill_tokens(self) -> int:
        return sum(s.num_tokens for s in self.scheduled if not s.is_decode)


# A prefill chunk that wants prompt logprobs returns a logits row per token
# ([chunk, vocab] float32: 256 x 49152 is 50 MB), so such chunks stay small.
PROMPT_LOGPROBS_CHUNK = 256


class Scheduler:
    def __init__(self, block_manager: BlockManager, max_batch: int,
                 prefill_token_budget: int) -> None:
        if max_batch <= 0 or prefill_token_budget <= 0:
            raise ValueError("max_batch and prefill_token_budget must be positive")
        self.blocks = block_manager
        self.max_batch = max_batch
        self.prefill_token_budget = prefill_token_budget
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self._cancel: set[int] = set()

    # -- bookkeeping -------------------------------------------------------
    @property
    def reserved_pages(self) -> int:
        return sum(s.reserved_pages for s in self.running)

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def add(self, seq: Sequence) -> None:
        if seq.reserved_pages > self.blocks.num_pages:
            raise ValueError(f"sequence needs {seq.reserved_pages} pages; the pool has "
                             f"{self.blocks.num_pages}")
        seq.status = SequenceStatus.WAITING
        self.waiting.append(seq)

    def cancel(self, seq_id: int) -> None:
        """Mark for removal; the next schedule() frees it and reports it."""
        self._cancel.add(seq_id)

    def finish(self, seq: Sequence, reason: str) -> None:
        """End a sequence (stop/length/error): free its pages now."""
        seq.status = SequenceStatus.FINISHED
        seq.finish_reason = reason
        if seq in self.running:
            self.running.remove(seq)
        elif seq in self.waiting:
            self.waiting.remove(seq)
        self.blocks.free(seq.seq_id)

    # -- the policy ---------------------------------------------------------
    def schedule(self) -> SchedulerOutput:
        out = SchedulerOutput()
        self._drop_cancelled(out)
        budget = self.prefill_token_budget
        # 1. every running sequence: decodes always, prefills in arrival order
        for seq in self.running:
            need = seq.tokens_to_compute
            if need <= 0:
                continue
            if not seq.in_prefill:
                out.scheduled.append(self._place(seq, need, is_decode=True))
            elif budget > 0:
                n = _chunk(seq, budget)
                budget -= n
                out.scheduled.append(self._place(seq, n, is_decode=False))
        # 2. admit from the head of the queue while slots, tokens and pages last
        free_pages = self.blocks.num_pages - self.reserved_pages
        while self.waiting and budget > 0 and len(self.running) < self.max_batch:
            seq = self.waiting[0]
            if seq.reserved_pages > free_pages:
                break
            self.waiting.popleft()
            free_pages -= seq.reserved_pages
            seq.status = SequenceStatus.RUNNING
            self.running.append(seq)
            n = _chunk(seq, budget)
            budget -= n
            out.scheduled.append(self._place(seq, n, is_decode=False))
        return out

    def _place(self, seq: Sequence, num_tokens: int, is_decode: bool) -> ScheduledSeq:
        self.blocks.ensure_capacity(seq.seq_id, seq.num_computed + num_tokens)
        return ScheduledSeq(seq, num_tokens, is_decode)

    def _drop_cancelled(self, out: SchedulerOutput) -> None:
        if not self._cancel:
            return
        for queue in (self.running, self.waiting):
            for seq in [s for s in queue if s.seq_id in self._cancel]:
                self.finish(seq, "cancelled")
                out.cancelled.append(seq)
        self._cancel.clear()


def _chunk(seq: Sequence, budget: int) -> int:
    """Prompt tokens of `seq` to run this step, given what is left of the budget."""
    n = min(seq.tokens_to_compute, budget)
    if seq.params.prompt_logprobs is not None:
        n = min(n, PROMPT_LOGPROBS_CHUNK)
    return n
