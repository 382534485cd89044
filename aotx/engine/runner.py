"""Mechanism for one step: scheduled sequences -> StepBatch -> forward -> tokens.

Builds the flattened batch (prefill chunks and decode tokens mixed), asks the
backend for logits of exactly the rows that need them, samples, and computes
logprobs where a request asked for them. Owns no policy and no request state.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from kernels.sampling_rows import SamplingRows
from kernels.step_batch import StepBatch

from aotx.engine.block_manager import BlockManager
from aotx.engine.launch import InlineLauncher, Launched, Launcher
from aotx.engine.mask_procs import mask_worker
from aotx.engine.row_sampling import RowsCache, sampling_rows
from aotx.engine.scheduler import ScheduledSeq
from aotx.engine.sequence import Sequence, SequenceStatus
from aotx.engine.slots import SlotTables
from aotx.engine.step_logprobs import logprobs_of, unscored
from aotx.engine.step_rows import Head, PendingTokens, Tail, cat, shared
from aotx.engine.types import TokenLogprob


FINISHED = SequenceStatus.FINISHED


class Backend(Protocol):
    def forward(self, batch: StepBatch) -> np.ndarray: ...
    def sample(self, logits: np.ndarray, rows: SamplingRows) -> np.ndarray: ...
    def logprobs(self, logits: np.ndarray, chosen_ids: np.ndarray, k: int): ...


class TokenText(Protocol):
    def token_bytes(self, token_id: int) -> bytes: ...
    def token_text(self, token_id: int) -> str: ...


@dataclass
class RowResult:
    token_id: int | None = None                  # sampled token, if this step sampled
    logprob: TokenLogprob | None = None          # its logprob (when requested)
    prompt_logprobs: list[TokenLogprob] = field(default_factory=list)


@dataclass
class _Plan:
    batch: StepBatch
    sample: list[tuple[int, Sequence]]                  # (logits row, seq)
    prompt: list[tuple[int, Sequence, int]]             # (logits row, seq, target token id)
    prev_rows: np.ndarray | None = None                 # [T]: row of the previous step's ids, or -1
    pending_token: PendingTokens = field(default_factory=PendingTokens)  # seq_id -> its placeholder's token index
    logprobs: bool = False                              # a sampled row wants its token's logprobs
    head: int = 0                                       # the leading one-token rows (no prompt logprobs)
    head_sampled: bool = False                          # each of them samples (sample[:head] are they)
    left: np.ndarray | None = None                      # each sampled row's tokens left after it (head only)
    carried: int = 0        # the leading rows that are the step before's first sampled rows, row i its row i
    handed: int = 0         # sample[:handed]'s pending token was handed on to the next launch (it carried them)


@dataclass
class InFlight:
    """A launched step: what it computes, and the backend's handle on its sampled ids."""
    scheduled: list[ScheduledSeq]
    plan: _Plan
    launched: Launched | None
    results: dict[int, RowResult]
    mask: Any = None        # its token mask (aotx.engine.masks.LateMask), None for a step with no constrained row
    ids: Any = None         # its sampled ids as read back (an array: the mask's check of the step, step_output)

    @property
    def needs_logits(self) -> bool:
        """Logprobs are read from this step's logits: complete it before the next launch."""
        return bool(self.plan.prompt) or self.plan.logprobs


class ModelRunner:
    def __init__(self, backend: Backend, blocks: BlockManager, tokenizer: TokenText,
                 launcher: Launcher | None = None) -> None:
        self.backend = backend
        self.blocks = blocks
        self.tokenizer = tokenizer
        self.launcher = launcher or InlineLauncher(backend)
        self.masks = mask_worker(tokenizer) # constrained steps' masks, computed while the step runs
        # each sequence's block table as a row of one array, kept up to date in place (block tables only
        # grow): a step gathers rows, no host work proportional to the context (aotx.engine.slots)
        self._slots = SlotTables()
        self._last: tuple | None = None     # the last build's leading rows (_steady_prefix)
        self._unread: _Plan | None = None   # the last launch's plan while it is not read back
        self._unconstrained: list[Sequence] | None = None   # the last sampled rows that needed no mask
        self._rows_cache = RowsCache()      # a steady batch's sampling constants (aotx.engine.row_sampling)

    def run(self, scheduled: list[ScheduledSeq]) -> dict[int, RowResult]:
        """Run one step to the end; returns results keyed by seq_id (every scheduled seq)."""
        step = self.launch(scheduled)
        ids, extra = self.complete(step)
        out = {s.seq.seq_id: extra.get(s.seq.seq_id) or RowResult() for s in scheduled}
        for (_, seq), tid in zip(step.plan.sample, ids):
            out[seq.seq_id].token_id = tid
        return out

    def launch(self, scheduled: list[ScheduledSeq], previous: InFlight | None = None) -> InFlight:
        """Start one step. Its sequences' K/V counts as computed and each sampled row as a pending
        token (``seq.pending``) from here on, so the next step can be planned before this one ends.
        `previous`: the step launched before and not read yet (a constrained row's mask needs its
        token: aotx.engine.masks)."""
        self.sample_ready()
        prior = self._unread
        try:
            plan = self.build(scheduled)     # (reads _unread: the step before may feed this one's head)
        finally:
            self._unread = None              # until this launch succeeds
        # the rows with more than a token to report (logprobs): a plain row has no RowResult
        results: dict[int, RowResult] = {}
        for s in scheduled[plan.head:]:     # (the leading one-token rows have no prompt logprobs)
            if s.seq.num_computed == 0 and s.seq.params.prompt_logprobs is not None:
                first = s.seq.prompt_ids[0]
                results[s.seq.seq_id] = RowResult(prompt_logprobs=[unscored(self.tokenizer, first)])
        launched = None
        if plan.batch.num_tokens:
            seqs = [seq for _, seq in plan.sample]
            sampling = sampling_rows(seqs, plan.pending_token, self._rows_cache, plan.left)
            # (with no prompt-logprob rows, the sampled rows are the logits rows in order)
            rows = (np.array([r for r, _ in plan.sample], dtype=np.int32) if plan.prompt
                    else shared("count", len(seqs)))
            mask = None
            if seqs != self._unconstrained:   # (the same rows as a step with no constrained row: none again)
                # (chained to the step before's mask: a steady step takes its rows as they are)
                mask = self.masks.step_mask(seqs, previous.launched if previous is not None else None,
                                            previous.mask if previous is not None else None)
                self._unconstrained = seqs if mask is None else None
            extra = {} if mask is None else {"mask": mask}    # unconstrained steps: the plain call
            # one step behind, the mask worker computes it while the forward runs (aotx.engine.masks)
            worker = self.launcher.overlaps and self.masks.take(mask)
            try:
                launched = self.launcher.launch(plan.batch, plan.prev_rows, rows, sampling, **extra)
            finally:
                if worker:
                    self.masks.handed(mask)
        sample = plan.sample
        head = plan.head if plan.head_sampled else 0    # sample[:head] are the head's rows: one pass for them
        carried = plan.carried if prior is not None else 0
        if carried:
            # the step before's rows, each sampled again at its row: its pending token (read back after
            # this launch) is handed on to this one, so `pending` and `pending_row` stay as they are, and
            # reading the step before back does not take it away (InFlight of the step before: `handed`)
            prior.handed = carried
            for _, seq in sample[:carried]:
                seq.num_computed += 1
        for i in range(carried, head):
            seq = sample[i][1]
            seq.num_computed += 1
            seq.pending += 1
            seq.pending_row = i
        for s in scheduled[head:]:
            s.seq.num_computed += s.num_tokens
        for i in range(head, len(sample)):
            seq = sample[i][1]
            seq.pending += 1
            seq.pending_row = i
        if launched is not None:
            self._unread = plan
        return InFlight(scheduled, plan, launched, results, mask if launched is not None else None)

    def sample_ready(self) -> None:
        """A step whose sampling waits for its mask (aotx.engine.masks): enqueue it now if the mask is
        ready, so the device samples while the host goes on (the launcher otherwise does it at the
        next launch)."""
        flush = getattr(self.launcher, "flush", None)
        if flush is not None:
            flush(wait=False)

    def complete(self, step: InFlight) -> tuple[list[int], dict[int, RowResult]]:
        """Wait for a launched step: its sampled ids (one array read: a list in the order of
        ``plan.sample``), and by seq_id the rows with logprobs (their RowResult's token_id unset)."""
        results, plan = step.results, step.plan
        if plan is self._unread:
            self._unread = None
        if step.launched is None:
            return [], results
        try:
            ids = step.launched.ids()
        finally:
            handed = plan.handed
            for _, seq in plan.sample[handed:] if handed else plan.sample:
                seq.pending -= 1
            self.masks.read_back(step.launched)   # the next step's mask consumes these ids, then is filled
        tids = ids.tolist()
        step.ids = ids
        if step.needs_logits:
            sampled, prompt = logprobs_of(self.backend, self.tokenizer, step.launched.logits, ids, plan)
            for seq, lp in sampled:
                results.setdefault(seq.seq_id, RowResult()).logprob = lp
            for seq, lp in prompt:
                results.setdefault(seq.seq_id, RowResult()).prompt_logprobs.append(lp)
        return tids, results

    # -- batch construction ---------------------------------------------------
    def build(self, scheduled: list[ScheduledSeq]) -> _Plan:
        """The step's flattened batch: the leading one-token rows (the decode rows: the scheduler puts
        them first) as arrays, then the other rows (prefill chunks, prompt logprobs) one by one."""
        head = Head()
        k0 = self._steady_prefix(scheduled, head)
        k = self._head_rows(scheduled, k0, head)
        st, page = self._slots, self.blocks.page_size
        pos, rows = head.pos, head.rows
        head_slots = pos
        npg = None
        if k:
            npg = st.npages[rows]
            idx, off = np.divmod(pos, page)
            late = idx >= npg
            if k > k0 and pos[k0:].min() < 0:     # (the steady prefix's positions only grow)
                late |= pos < 0
            if late.any():
                # a row whose position is past its slot's pages (a page every page_size steps) catches up
                for i in np.flatnonzero(late).tolist():
                    if pos[i] < 0:
                        raise IndexError(f"sequence {scheduled[i].seq.seq_id} has no page for position {int(pos[i])}")
                    st.sync(int(rows[i]), self.blocks.block_table(scheduled[i].seq.seq_id))
                npg = st.npages[rows]
                bad = idx >= npg
                if bad.any():
                    i = int(np.flatnonzero(bad)[0])
                    raise IndexError(f"sequence {scheduled[i].seq.seq_id} has no page for position {int(pos[i])}")
            head_slots = st.tables[rows, idx]     # (int32: a fresh array)
            head_slots *= page
            head_slots += off.astype(np.int32)
        # the step after this one may take these rows as they are (_steady_prefix)
        self._last = (scheduled[:k], pos, rows, head.left, head.seq_ids, head.sample,
                      head.logprobs) if k and head.all_sampled() else None
        tail = Tail(k, len(head.sample))
        for s in scheduled[k:]:
            self._tail_row(s, tail, head)
        if tail.slots:
            slot_of = np.concatenate([rows, np.array(tail.slots, dtype=np.int64)])
            width = int(st.npages[slot_of].max())
        else:
            slot_of = rows
            width = int(npg.max()) if k else 0
        positions = cat(pos, tail.positions, np.int32)
        batch = StepBatch(   # (no array the carried state writes later: a launched step keeps them; the shared
                             # constants of step_rows.shared are never written)
            token_ids=cat(head.tok, tail.tokens, np.int32),
            positions=positions,
            query_start=(np.concatenate([np.arange(k + 1, dtype=np.int32), np.array(tail.query_start, dtype=np.int32)])
                         if tail.query_start else shared("count", k + 1)),
            context_lens=cat(pos + 1, tail.context_lens, np.int32) if tail.context_lens else positions + 1,
            block_tables=st.tables[slot_of, :width],
            slot_mapping=cat(head_slots, tail.slot_map, np.int32),
            logits_rows=cat(head.logits_rows, tail.logits_rows, np.int32),
        )
        n = batch.num_tokens
        prev_rows = None
        if not tail.tokens and head.placeholders:
            prev_rows = head.prev
        elif head.placeholders or tail.ph_token:
            prev_rows = np.full(n, -1, dtype=np.int32)
            if k:
                prev_rows[:k] = head.prev
            if tail.ph_token:
                prev_rows[np.array(tail.ph_token, dtype=np.int64)] = tail.ph_row
        return _Plan(batch, head.sample + tail.sample, tail.prompt, prev_rows, head.pending_token,
                     head.logprobs or tail.logprobs, k, head.all_sampled(), None if tail.sample else head.left,
                     head.carried if head.all_sampled() else 0)

    def _steady_prefix(self, scheduled: list[ScheduledSeq], head: Head) -> int:
        """The persistent batch's steady state: the step before (launched, not read yet) sampled each of
        its leading rows, and this step schedules the same rows first, in the same order. Then each one's
        input token is the one the step before sampled for it (row i of its ids), at the next position,
        in the same slot: no row is looked at."""
        last = self._last
        if last is None or self._unread is None:
            return 0
        rows_before, pos, slots, left, seq_ids, sample, logprobs = last
        k = len(rows_before)
        if left.min() > 0 and scheduled[:k] == rows_before:
            # the common case: every row scheduled again, first and in order (so none finished: the
            # scheduler schedules running sequences only), each with a token left: no row looked at
            head.fast(k, pos + 1, slots, left - 1, seq_ids, sample, logprobs, None)
            return k
        # the rows expected first now: those still running with a token left to sample, in the same order
        alive = [r.seq.status is not FINISHED for r in rows_before]
        keep = None
        if not all(alive):
            keep = np.array(alive) & (left > 0)
        elif left.min() <= 0:
            keep = left > 0
        prev = None
        if keep is not None:
            prev = np.flatnonzero(keep)
            rows_before = [rows_before[i] for i in prev]
            pos, slots, left = pos[prev], slots[prev], left[prev]
            seq_ids = [seq_ids[i] for i in prev]
            sample = [(j, r.seq) for j, r in enumerate(rows_before)]
        k = len(rows_before)
        if not k or scheduled[:k] != rows_before:
            return 0
        head.fast(k, pos + 1, slots, left - 1, seq_ids, sample, logprobs, prev)
        return k

    def _head_rows(self, scheduled: list[ScheduledSeq], k0: int, head: Head) -> int:
        """The one-token rows after the steady prefix, one short loop each; returns the head's length."""
        st = self._slots
        owner, n_owner = st.owner, len(st.owner)
        tokens, positions, slot_of, prev, left, seq_ids = [], [], [], [], [], []
        sample, pending_token = head.sample, head.pending_token
        logits_rows: list[int] = []
        logprobs, k = False, k0
        for s in scheduled[k0:]:
            if s.num_tokens != 1:
                break
            seq = s.seq
            params = seq.params
            if params.prompt_logprobs is not None:
                break
            start, outs, plen = seq.num_computed, seq.output_ids, len(seq.prompt_ids)
            known = plen + len(outs)
            if start >= known:   # its last token was sampled by the step in flight: the device has it
                pending_token[seq.seq_id] = k
                prev.append(seq.pending_row)
                tokens.append(-1)
            else:
                prev.append(-1)
                tokens.append(seq.prompt_ids[start] if start < plen else outs[start - plen])
            positions.append(start)
            slot = seq.slot
            if not (0 <= slot < n_owner and owner[slot] is seq):
                slot = st.slot(seq)
                owner, n_owner = st.owner, len(st.owner)
            slot_of.append(slot)
            pend = seq.pending
            if start + 1 == known + pend and len(outs) + pend < params.max_tokens:   # wants_sample_after(1)
                sample.append((k0 + len(logits_rows), seq))
                logits_rows.append(k)
                left.append(params.max_tokens - len(outs) - pend - 1)
                seq_ids.append(seq.seq_id)
                if params.logprobs is not None:
                    logprobs = True
            k += 1
        if k > k0:
            head.more(tokens, positions, slot_of, prev, logits_rows, logprobs, left, seq_ids)
        return k

    def _tail_row(self, s: ScheduledSeq, tail: Tail, head: Head) -> None:
        """A row of several tokens (a prefill chunk) or one with prompt logprobs."""
        seq, n = s.seq, s.num_tokens
        start, plen, outs, pend, params = (seq.num_computed, len(seq.prompt_ids), seq.output_ids, seq.pending,
                                           seq.params)
        tokens = tail.tokens
        offset = tail.base + len(tokens)
        known = plen + len(outs)
        if start < 0:
            raise IndexError(f"sequence {seq.seq_id} has no page for position {start}")
        if start + n > known:   # the last token was sampled by the step in flight: the device has it
            tokens.extend(_token_slice(seq, start, known))
            head.pending_token[seq.seq_id] = tail.base + len(tokens)
            tail.ph_token.append(tail.base + len(tokens))
            tail.ph_row.append(seq.pending_row)
            tokens.append(-1)
        else:
            tokens.extend(_token_slice(seq, start, start + n))
        st, page = self._slots, self.blocks.page_size
        slot = st.slot(seq)
        st.sync(slot, self.blocks.block_table(seq.seq_id))
        if (start + n - 1) // page >= st.npages[slot]:
            raise IndexError(f"sequence {seq.seq_id} has no page for position {start + n - 1}")
        p = np.arange(start, start + n, dtype=np.int64)
        tail.slot_map.append(st.tables[slot, p // page] * page + p % page)
        tail.positions.append(p)
        tail.slots.append(slot)
        tail.query_start.append(tail.base + len(tokens))
        tail.context_lens.append(start + n)
        if params.prompt_logprobs is not None:
            # logits at position p score prompt token p + 1
            for q in range(start, min(start + n, plen - 1)):
                tail.prompt.append((tail.rows_base + len(tail.logits_rows), seq, seq.prompt_ids[q + 1]))
                tail.logits_rows.append(offset + q - start)
        if start + n == known + pend and len(outs) + pend < params.max_tokens:   # wants_sample_after(n)
            tail.sample.append((tail.rows_base + len(tail.logits_rows), seq))
            tail.logits_rows.append(offset + n - 1)
            if params.logprobs is not None:
                tail.logprobs = True

def _token_slice(seq: Sequence, start: int, end: int) -> list[int]:
    plen = seq.prompt_len
    if end <= plen:
        return seq.prompt_ids[start:end]
    if start >= plen:
        return seq.output_ids[start - plen:end - plen]
    return seq.prompt_ids[start:] + seq.output_ids[: end - plen]
