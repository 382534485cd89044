"""Continuous batching policy: who runs this step, and how many tokens each.

Admission is conservative: a waiting sequence joins only when the pages for
its whole lifetime fit beside the reservations of everything running, so a
running sequence never runs out of KV and nothing is ever preempted. The
line is FIFO with backfill: a sequence that does not fit leaves free pages to
later ones that do, until it was passed over HEAD_SKIPS times (then the line
drains for it). No numpy, no backend.

The line is shared with page claims: work that will become a request later
(a shared input, leased before its memory work builds the prompt) claims its
pages at its place in the line (`since`, when it joined). A claim counts only
what arrived before it (running reservations, earlier waiting sequences,
other claims); when it does not fit, it leaves a hold: sequences that
arrived after the claimant are admitted only into the pages the hold leaves
free, so the pool drains to where the claim fits and no stream of later
requests can keep it out. The claimant's request takes over the claim and its
place in the line (`add(seq, claim=...)`); a request made on the claimant's
behalf before that (a shared input's interpretation) borrows it: it stands at
the claimant's place and may use the claim's pages, which stay promised.
"""
from __future__ import annotations

import itertools
import time
from collections import deque
from dataclasses import dataclass, field

from aotx.engine.block_manager import BlockManager
from aotx.engine.decode_prefix import DecodePrefix
from aotx.engine.sequence import Sequence, SequenceStatus


@dataclass(slots=True)
class ScheduledSeq:
    seq: Sequence
    num_tokens: int        # tokens to run this step (1 for decode, a chunk for prefill)
    is_decode: bool


@dataclass
class SchedulerOutput:
    scheduled: list[ScheduledSeq] = field(default_factory=list)
    cancelled: list[Sequence] = field(default_factory=list)   # freed this step
    decodes: int | None = None      # the leading decode rows of `scheduled`, where schedule() counted them

    @property
    def num_decode(self) -> int:
        if self.decodes is not None:
            return self.decodes
        return sum(1 for s in self.scheduled if s.is_decode)

    @property
    def num_prefill_tokens(self) -> int:
        rest = self.scheduled[self.decodes:] if self.decodes is not None else self.scheduled
        return sum(s.num_tokens for s in rest if not s.is_decode)


@dataclass(frozen=True)
class Claim:
    """Pages promised to work that joined the line at `since` and has no request yet."""
    id: int
    pages: int
    since: float


@dataclass(frozen=True)
class Hold:
    """The earliest claimant that did not fit: later arrivals leave its pages free."""
    since: float
    pages: int


# A waiting sequence that does not fit lets later ones that do pass it this many times; then
# nothing passes it until it is admitted (no starvation of large requests by a stream of small ones).
HEAD_SKIPS = 32
# Waiting sequences looked at per step (the line can be max_queue long).
ADMISSION_SCAN = 256

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
        self.claims: dict[int, Claim] = {}
        self.hold: Hold | None = None
        self._cancel: set[int] = set()
        self.prefix = DecodePrefix()     # the leading decode rows, carried between steps
        self._claim_ids = itertools.count(1)

    # -- bookkeeping -------------------------------------------------------
    @property
    def reserved_pages(self) -> int:
        return sum(s.reserved_pages for s in self.running)

    @property
    def claimed_pages(self) -> int:
        return sum(c.pages for c in self.claims.values())

    def has_work(self) -> bool:
        return bool(self.waiting or self.running)

    def add(self, seq: Sequence, claim: Claim | None = None, borrow: bool = False) -> None:
        """Queue `seq` at its place in the line; with `claim`, it takes over the claim's place and
        pages (`borrow`: it stands at the claim's place and may use its pages, which stay claimed)."""
        if seq.reserved_pages > self.blocks.num_pages:
            raise ValueError(f"sequence needs {seq.reserved_pages} pages; the pool has "
                             f"{self.blocks.num_pages}")
        if claim is not None:
            if borrow:
                seq.borrows = claim
            else:
                self.release(claim)
            seq.line = claim.since
        seq.status = SequenceStatus.WAITING
        i = len(self.waiting)
        while i and self.waiting[i - 1].line > seq.line:
            i -= 1
        self.waiting.insert(i, seq)

    # -- page claims ---------------------------------------------------------
    def pages_ahead(self, since: float, pending: int = 0) -> int:
        """Pages promised to what is ahead of a claimant that joined the line at `since`: running
        reservations, claims, waiting sequences that arrived before it, and `pending` (requests
        that arrived before it and are not queued here yet)."""
        waiting = sum(s.reserved_pages for s in self.waiting if s.line < since)
        return self.reserved_pages + self.claimed_pages + waiting + pending

    def claim(self, pages: int, since: float, pending: int = 0) -> Claim | None:
        """Promise `pages` to a claimant at `since` if they fit beside what is ahead of it; else
        leave (or move) the hold to it and return None."""
        if pages > self.blocks.num_pages - self.pages_ahead(since, pending):
            self.hold = Hold(since, pages)
            return None
        if self.hold is not None and self.hold.since == since:
            self.hold = None
        claim = Claim(next(self._claim_ids), pages, since)
        self.claims[claim.id] = claim
        return claim

    def release(self, claim: Claim) -> None:
        """The claimant ended without a request, or its request took the claim over."""
        self.claims.pop(claim.id, None)

    def clear_hold(self) -> None:
        self.hold = None

    def launched(self) -> None:
        """The step of the last schedule() was launched: its decode rows each computed and sampled one
        more token, so the next schedule may carry them on as arrays (aotx.engine.decode_prefix)."""
        self.prefix.armed = True

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
        # 1. every running sequence: decodes always (first: the runner's short path takes the leading
        #    one-token rows), then prefills in arrival order
        scheduled, blocks, page = out.scheduled, self.blocks, self.blocks.page_size
        chunks: list[ScheduledSeq] = []
        # the leading decode rows as the last schedule left them (aotx.engine.decode_prefix), then the rest
        m = self.prefix.take(self.running, blocks, scheduled)
        new_seqs, new_rows, new_computed, new_left = [], [], [], []
        extending = True     # the rows looked at still continue the prefix
        for seq in self.running[m:] if m else self.running:
            computed, plen = seq.num_computed, len(seq.prompt_ids)
            if computed >= plen:     # decoding: seq.tokens_to_compute and _place, inlined
                sampled = len(seq.output_ids) + seq.pending
                need = plen + sampled - computed
                if need <= 0 or sampled >= seq.params.max_tokens:
                    if extending and need == 1:    # (waits for its last token's read-back: stays as it is)
                        row = seq.decode_row
                        if row is None:
                            row = seq.decode_row = ScheduledSeq(seq, 1, True)
                        new_seqs.append(seq)
                        new_rows.append(row)
                        new_computed.append(computed)
                        new_left.append(0)
                    else:
                        extending = False
                    continue
                if need == 1:
                    # a new page only where the position starts one (the ones before it hold K/V already)
                    if computed % page == 0 and len(blocks.block_table(seq.seq_id)) * page <= computed:
                        blocks.ensure_capacity(seq.seq_id, computed + 1)
                    row = seq.decode_row
                    if row is None:
                        row = seq.decode_row = ScheduledSeq(seq, 1, True)
                    scheduled.append(row)
                    if extending:
                        new_seqs.append(seq)
                        new_rows.append(row)
                        new_computed.append(computed + 1)
                        new_left.append(seq.params.max_tokens - sampled - 1)
                    continue
                extending = False
                if len(blocks.block_table(seq.seq_id)) * page < computed + need:
                    blocks.ensure_capacity(seq.seq_id, computed + need)
                scheduled.append(ScheduledSeq(seq, need, True))
                continue
            extending = False
            need = seq.tokens_to_compute
            if need <= 0:
                continue
            if budget > 0:
                n = _chunk(seq, budget)
                budget -= n
                chunks.append(self._place(seq, n, is_decode=False))
        if not m:
            self.prefix.clear()
        self.prefix.extend(new_seqs, new_rows, new_computed, new_left)
        out.decodes = len(scheduled)
        scheduled.extend(chunks)
        if not self.waiting:
            return out
        # 2. admit in line order while slots, tokens and pages last (beside the claims, and for what
        #    arrived after a claimant on hold, beside its pages too); a sequence that does not fit
        #    leaves the free pages to those behind it that do, until it was passed over HEAD_SKIPS
        #    times: then the line drains for it
        free_pages = self.blocks.num_pages - self.reserved_pages - self.claimed_pages
        hold = self.hold
        i = 0
        while (i < len(self.waiting) and i < ADMISSION_SCAN and budget > 0
               and len(self.running) < self.max_batch):
            seq = self.waiting[i]
            held = hold.pages if hold is not None and seq.line >= hold.since else 0
            lent = seq.borrows.pages if seq.borrows is not None and seq.borrows.id in self.claims else 0
            if seq.reserved_pages > free_pages - held + lent:
                if i == 0 and seq.passed_over >= HEAD_SKIPS:
                    break
                i += 1
                continue
            del self.waiting[i]
            if i > 0:
                self.waiting[0].passed_over += 1
            free_pages -= seq.reserved_pages
            seq.status = SequenceStatus.RUNNING
            if seq.admitted_time is None:   # its queue time ends here (aotx.request_latency)
                seq.admitted_time = time.monotonic()
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
