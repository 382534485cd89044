"""One request's state inside the engine (owned by the step thread).

A slotted dataclass: the step thread reads and writes a few of its fields for every row of every step
(docs/PERFORMANCE.md, issue 12, session 12: slot access instead of the instance dict's)."""
from __future__ import annotations

import enum
import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from aotx.engine.detokenizer import Detokenizer
from aotx.engine.types import SamplingParams, TokenLogprob

_ids = itertools.count(1)


class SequenceStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False, slots=True)
class Sequence:
    prompt_ids: list[int]
    params: SamplingParams             # max_tokens already clipped to the context window
    seed: int                          # the request's sampling seed (drawn if not given)
    reserved_pages: int                # pages for its whole lifetime (admission budget)
    detokenizer: Detokenizer
    seq_id: int = field(default_factory=lambda: next(_ids))
    output_ids: list[int] = field(default_factory=list)
    status: SequenceStatus = SequenceStatus.WAITING
    num_computed: int = 0              # tokens whose K/V is in the cache
    finish_reason: str | None = None
    arrival_time: float = field(default_factory=time.monotonic)
    # its place in the admission line (the scheduler's FIFO): its arrival, or for a request that
    # takes over a page claim, when the claimant joined the line
    line: float = -1.0
    borrows: Any = None                # the page claim (aotx.engine.scheduler.Claim) it may use, kept
    passed_over: int = 0               # later sequences admitted while it waited at the head of the line
    admitted_time: float | None = None   # when the scheduler first admitted it (the end of its queue time)
    first_token_time: float | None = None
    last_token_time: float | None = None
    # prompt logprobs gathered across prefill chunks, released with the first delta
    prompt_logprobs: list[TokenLogprob] = field(default_factory=list)
    prompt_logprobs_sent: bool = False
    # tokens sampled by a launched step whose ids the host has not read yet (0, or 1 while a step is
    # in flight; 2 for a moment when the next step is launched before this one is read), and the row
    # of the latest launch's sampled ids that holds the newest of them
    pending: int = 0
    pending_row: int = -1
    # the constraint's matcher (aotx.structured.RowMatcher) when params.constraint is set: it has
    # consumed every output token; the runner asks it for the next token's bitmask
    matcher: Any = None
    # penalties / logit_bias entries (aotx.engine.row_sampling.RowEntries): made on first use
    entries: Any = None
    # its row of the runner's persistent block tables (aotx.engine.slots), -1 before its first step
    slot: int = -1
    # its decode row (aotx.engine.scheduler.ScheduledSeq(self, 1, True)), made once and scheduled every step
    decode_row: Any = None
    # once a token of it went out as a plain delta (no constraint, no stop string, no logprobs, nothing left
    # to release first): (its handle, its detokenizer, the ids its detokenizer must see, max_tokens) for the
    # engine's quiet path (aotx.engine.step_output); None before, and for a sequence that never qualifies
    quiet: Any = None
    # the same for a constrained sequence (the same tuple): its later tokens take the quiet path once its
    # matcher allowed each (RowMatcher.sync, on the engine thread, first); a refused one ends it as before
    quiet_checked: Any = None

    def __post_init__(self) -> None:
        if self.line < 0:
            self.line = self.arrival_time

    @property
    def queued_s(self) -> float | None:
        """Seconds from submission to admission (None until admitted)."""
        return None if self.admitted_time is None else self.admitted_time - self.arrival_time

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_ids)

    @property
    def num_tokens(self) -> int:
        """Prompt, output and pending tokens (the ids of the pending ones are on the device)."""
        return len(self.prompt_ids) + len(self.output_ids) + self.pending

    @property
    def sampled(self) -> int:
        """Output tokens sampled so far, read back or not: the index of the next one."""
        return len(self.output_ids) + self.pending

    @property
    def in_prefill(self) -> bool:
        return self.num_computed < self.prompt_len

    @property
    def tokens_to_compute(self) -> int:
        """Tokens not yet in the KV cache that a step must compute (1 for a decoding sequence; 0 once
        its last token is sampled: that one's K/V is never needed)."""
        if not self.in_prefill and self.sampled >= self.params.max_tokens:
            return 0
        return self.num_tokens - self.num_computed

    @property
    def is_finished(self) -> bool:
        return self.status is SequenceStatus.FINISHED

    def token_at(self, position: int) -> int:
        if position < self.prompt_len:
            return self.prompt_ids[position]
        return self.output_ids[position - self.prompt_len]

    def wants_sample_after(self, num_new: int) -> bool:
        """Whether computing `num_new` more tokens leaves a position to sample from."""
        return (self.num_computed + num_new == self.num_tokens
                and self.sampled < self.params.max_tokens)

    def record_token(self, token_id: int, now: float) -> None:
        self.output_ids.append(token_id)
        if self.first_token_time is None:
            self.first_token_time = now
        self.last_token_time = now
