"""Mechanism for one step: scheduled sequences -> StepBatch -> forward -> tokens.

Builds the flattened batch (prefill chunks and decode tokens mixed), asks the
backend for logits of exactly the rows that need them, samples, and computes
logprobs where a request asked for them. Owns no policy and no request state.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from kernels.sampling_rows import SamplingRows
from kernels.step_batch import StepBatch

from aotx.engine.block_manager import BlockManager
from aotx.engine.launch import InlineLauncher, Launched, Launcher
from aotx.engine.mask_procs import mask_worker
from aotx.engine.row_sampling import RowsCache, sampling_rows
from aotx.engine.scheduler import ScheduledSeq
from aotx.engine.sequence import Sequence
from aotx.engine.types import TokenLogprob, TopLogprob


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
    pending_token: dict[int, int] = field(default_factory=dict)  # seq_id -> its placeholder's token index
    logprobs: bool = False                              # a sampled row wants its token's logprobs


@dataclass
class InFlight:
    """A launched step: what it computes, and the backend's handle on its sampled ids."""
    scheduled: list[ScheduledSeq]
    plan: _Plan
    launched: Launched | None
    results: dict[int, RowResult]

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
        # seq_id -> (int32 pages, how many are valid, the view of those, the last page): block tables only
        # grow, so a step copies an array instead of converting a page list (no host work proportional
        # to the context), and an unchanged table costs a lookup
        self._tables: dict[int, tuple[np.ndarray, int, np.ndarray, int]] = {}
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
        plan = self.build(scheduled)
        # the rows with more than a token to report (logprobs): a plain row has no RowResult
        results: dict[int, RowResult] = {}
        for s in scheduled:
            if s.seq.num_computed == 0 and s.seq.params.prompt_logprobs is not None:
                first = s.seq.prompt_ids[0]
                results[s.seq.seq_id] = RowResult(prompt_logprobs=[self._token_lp(first, None, ())])
        launched = None
        if plan.batch.num_tokens:
            seqs = [seq for _, seq in plan.sample]
            sampling = sampling_rows(seqs, plan.pending_token, self._rows_cache)
            rows = np.array([r for r, _ in plan.sample], dtype=np.int32)
            mask = self.masks.step_mask(seqs, previous.launched if previous is not None else None)
            extra = {} if mask is None else {"mask": mask}    # unconstrained steps: the plain call
            # one step behind, the mask worker computes it while the forward runs (aotx.engine.masks)
            worker = self.launcher.overlaps and self.masks.take(mask)
            try:
                launched = self.launcher.launch(plan.batch, plan.prev_rows, rows, sampling, **extra)
            finally:
                if worker:
                    self.masks.handed(mask)
        for s in scheduled:
            s.seq.num_computed += s.num_tokens
        for i, (_, seq) in enumerate(plan.sample):
            seq.pending += 1
            seq.pending_row = i
        return InFlight(scheduled, plan, launched, results)

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
        if step.launched is None:
            return [], results
        try:
            ids = step.launched.ids()
        finally:
            for _, seq in plan.sample:
                seq.pending -= 1
            self.masks.read_back(step.launched)   # the next step's mask consumes these ids, then is filled
        tids = ids.tolist()
        if step.needs_logits:
            self._logprobs_of(step.launched.logits, ids, plan, results)
        return tids, results

    def _logprobs_of(self, logits, ids: np.ndarray, plan: _Plan, results: dict[int, RowResult]) -> None:
        want = [(i, row, seq) for i, (row, seq) in enumerate(plan.sample) if seq.params.logprobs is not None]
        if want:
            lps = self._logprobs(logits[[row for _, row, _ in want]],
                                 ids[[i for i, _, _ in want]].astype(np.int32),
                                 [seq.params.logprobs for _, _, seq in want])
            for (_, _, seq), lp in zip(want, lps):
                results.setdefault(seq.seq_id, RowResult()).logprob = lp
        if plan.prompt:
            rows = [r for r, _, _ in plan.prompt]
            targets = np.array([t for _, _, t in plan.prompt], dtype=np.int32)
            ks = [seq.params.prompt_logprobs for _, seq, _ in plan.prompt]
            for (_, seq, target), lp in zip(plan.prompt, self._logprobs(logits[rows], targets, ks)):
                results.setdefault(seq.seq_id, RowResult()).prompt_logprobs.append(lp)

    # -- batch construction ---------------------------------------------------
    def build(self, scheduled: list[ScheduledSeq]) -> _Plan:
        tokens: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        query_start = [0]
        context_lens: list[int] = []
        tables: list[list[int]] = []
        logits_rows: list[int] = []
        sample: list[tuple[int, Sequence]] = []
        prompt: list[tuple[int, Sequence, int]] = []
        ph_token: list[int] = []      # placeholders: their token index, and the previous step's row
        ph_row: list[int] = []
        pending_token: dict[int, int] = {}
        logprobs = False
        page = self.blocks.page_size
        block_table, table_of = self.blocks.block_table, self._table
        for s in scheduled:
            seq, n = s.seq, s.num_tokens
            start, plen, outs, pend, params = (seq.num_computed, len(seq.prompt_ids), seq.output_ids, seq.pending,
                                               seq.params)
            offset = len(tokens)
            known = plen + len(outs)
            pages = block_table(seq.seq_id)
            if n == 1:    # a decode row (or a one-token chunk): no per-token lists, no method calls
                if start >= known:   # its last token was sampled by the step in flight: the device has it
                    pending_token[seq.seq_id] = offset
                    ph_token.append(offset)
                    ph_row.append(seq.pending_row)
                    tokens.append(-1)
                else:
                    tokens.append(seq.prompt_ids[start] if start < plen else outs[start - plen])
                positions.append(start)
                if start < 0:
                    raise IndexError(f"sequence {seq.seq_id} has no page for position {start}")
                slots.append(pages[start // page] * page + start % page)
            else:
                if start + n > known:   # the last token was sampled by the step in flight: the device has it
                    tokens.extend(_token_slice(seq, start, known))
                    pending_token[seq.seq_id] = len(tokens)
                    ph_token.append(len(tokens))
                    ph_row.append(seq.pending_row)
                    tokens.append(-1)
                else:
                    tokens.extend(_token_slice(seq, start, start + n))
                positions.extend(range(start, start + n))
                slots.extend(self.blocks.slot_mapping(seq.seq_id, start, start + n))
            query_start.append(len(tokens))
            context_lens.append(start + n)
            tables.append(table_of(seq.seq_id, pages))
            if params.prompt_logprobs is not None:
                # logits at position p score prompt token p + 1
                for p in range(start, min(start + n, plen - 1)):
                    prompt.append((len(logits_rows), seq, seq.prompt_ids[p + 1]))
                    logits_rows.append(offset + p - start)
            # seq.wants_sample_after(n), inlined
            if start + n == known + pend and len(outs) + pend < params.max_tokens:
                sample.append((len(logits_rows), seq))
                logits_rows.append(offset + n - 1)
                if params.logprobs is not None:
                    logprobs = True
        lens = np.fromiter(map(len, tables), dtype=np.int64, count=len(tables))
        width = int(lens.max()) if len(tables) else 0
        block_tables = np.full((len(tables), width), -1, dtype=np.int32)
        if len(tables):   # one masked write of every row's pages (row-major: each row's in order)
            block_tables[np.arange(width) < lens[:, None]] = np.concatenate(tables)
        if len(self._tables) > 2 * len(scheduled) + 64:   # forget sequences that ended
            live = {s.seq.seq_id for s in scheduled}
            self._tables = {k: v for k, v in self._tables.items() if k in live}
        batch = StepBatch(
            token_ids=np.array(tokens, dtype=np.int32),
            positions=np.array(positions, dtype=np.int32),
            query_start=np.array(query_start, dtype=np.int32),
            context_lens=np.array(context_lens, dtype=np.int32),
            block_tables=block_tables,
            slot_mapping=np.array(slots, dtype=np.int32),
            logits_rows=np.array(logits_rows, dtype=np.int32),
        )
        prev_rows = None
        if ph_token:
            prev_rows = np.full(len(tokens), -1, dtype=np.int32)
            prev_rows[np.array(ph_token, dtype=np.int64)] = ph_row
        return _Plan(batch, sample, prompt, prev_rows, pending_token, logprobs)

    def _table(self, seq_id: int, pages: list[int]) -> np.ndarray:
        """`pages`: the block manager's table of `seq_id`."""
        cached = self._tables.get(seq_id)
        if cached is not None:   # unchanged since the last step (the common case): its view again
            arr, n, view, last = cached
            if n == len(pages) and n and last == pages[n - 1]:
                return view
        arr, n = (None, 0) if cached is None else cached[:2]
        if arr is None or n > len(pages) or (n and arr[n - 1] != pages[n - 1]):
            arr, n = np.empty(max(16, 2 * len(pages)), dtype=np.int32), 0   # new (or not the one cached)
        if len(pages) > n:
            if len(pages) > len(arr):
                arr = np.concatenate([arr[:n], np.empty(len(pages), dtype=np.int32)])
            arr[n:len(pages)] = pages[n:]
            n = len(pages)
        view = arr[:n]
        self._tables[seq_id] = (arr, n, view, int(arr[n - 1]) if n else -1)
        return view

    # -- sampling and logprobs ------------------------------------------------
    def _logprobs(self, logits: np.ndarray, chosen: np.ndarray, ks: list[int]) -> list[TokenLogprob]:
        k_max = max(1, max(ks))
        chosen_lp, top_ids, top_lp = self.backend.logprobs(logits, chosen, k_max)
        out = []
        for i, k in enumerate(ks):
            top = tuple(self._top(int(top_ids[i, j]), float(top_lp[i, j])) for j in range(k))
            out.append(self._token_lp(int(chosen[i]), float(chosen_lp[i]), top))
        return out

    def _top(self, token_id: int, logprob: float) -> TopLogprob:
        return TopLogprob(token_id, self.tokenizer.token_text(token_id),
                          self.tokenizer.token_bytes(token_id), logprob)

    def _token_lp(self, token_id: int, logprob: float | None, top: tuple) -> TokenLogprob:
        return TokenLogprob(token_id, self.tokenizer.token_text(token_id),
                            self.tokenizer.token_bytes(token_id), logprob, top)


def _token_slice(seq: Sequence, start: int, end: int) -> list[int]:
    plen = seq.prompt_len
    if end <= plen:
        return seq.prompt_ids[start:end]
    if start >= plen:
        return seq.output_ids[start - plen:end - plen]
    return seq.prompt_ids[start:] + seq.output_ids[: end - plen]
