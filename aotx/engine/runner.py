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


class ModelRunner:
    def __init__(self, backend: Backend, blocks: BlockManager, tokenizer: TokenText) -> None:
        self.backend = backend
        self.blocks = blocks
        self.tokenizer = tokenizer

    def run(self, scheduled: list[ScheduledSeq]) -> dict[int, RowResult]:
        """Run one step; returns results keyed by seq_id (every scheduled seq)."""
        plan = self.build(scheduled)
        results = {s.seq.seq_id: RowResult() for s in scheduled}
        for s in scheduled:
            if s.seq.num_computed == 0 and s.seq.params.prompt_logprobs is not None:
                first = s.seq.prompt_ids[0]
                results[s.seq.seq_id].prompt_logprobs.append(self._token_lp(first, None, ()))
        if plan.batch.num_tokens == 0:
            return results
        logits = self.backend.forward(plan.batch)
        if plan.sample:
            self._sample(logits, plan.sample, results)
        if plan.prompt:
            rows = [r for r, _, _ in plan.prompt]
            targets = np.array([t for _, _, t in plan.prompt], dtype=np.int32)
            ks = [seq.params.prompt_logprobs for _, seq, _ in plan.prompt]
            for (_, seq, target), lp in zip(plan.prompt, self._logprobs(logits[rows], targets, ks)):
                results[seq.seq_id].prompt_logprobs.append(lp)
        return results

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
        for s in scheduled:
            seq, start, n = s.seq, s.seq.num_computed, s.num_tokens
            offset = len(tokens)
            tokens.extend(_token_slice(seq, start, start + n))
            positions.extend(range(start, start + n))
            slots.extend(self.blocks.slot_mapping(seq.seq_id, start, start + n))
            query_start.append(len(tokens))
            context_lens.append(start + n)
            tables.append(self.blocks.block_table(seq.seq_id))
            if seq.params.prompt_logprobs is not None:
                # logits at position p score prompt token p + 1
                for p in range(start, min(start + n, seq.prompt_len - 1)):
                    prompt.append((len(logits_rows), seq, seq.prompt_ids[p + 1]))
                    logits_rows.append(offset + p - start)
            if seq.wants_sample_after(n):
                sample.append((len(logits_rows), seq))
                logits_rows.append(offset + n - 1)
        width = max((len(t) for t in tables), default=0)
        block_tables = np.full((len(tables), width), -1, dtype=np.int32)
        for i, t in enumerate(tables):
            block_tables[i, : len(t)] = t
        batch = StepBatch(
            token_ids=np.array(tokens, dtype=np.int32),
            positions=np.array(positions, dtype=np.int32),
            query_start=np.array(query_start, dtype=np.int32),
            context_lens=np.array(context_lens, dtype=np.int32),
            block_tables=block_tables,
            slot_mapping=np.array(slots, dtype=np.int32),
            logits_rows=np.array(logits_rows, dtype=np.int32),
        )
        return _Plan(batch, sample, prompt)

    # -- sampling and logprobs ------------------------------------------------
    def _sample(self, logits: np.ndarray, sample: list[tuple[int, Sequence]],
                results: dict[int, RowResult]) -> None:
        rows = [r for r, _ in sample]
        seqs = [seq for _, seq in sample]
        sub = logits if rows == list(range(logits.shape[0])) else logits[rows]
        params = [seq.params for seq in seqs]
        sampling = SamplingRows(
            temperature=np.array([p.temperature for p in params], dtype=np.float32),
            top_p=np.array([p.top_p for p in params], dtype=np.float32),
            top_k=np.array([p.top_k for p in params], dtype=np.int32),
            seed=np.array([seq.seed for seq in seqs], dtype=np.uint64),
            step=np.array([len(seq.output_ids) for seq in seqs], dtype=np.int64),
        )
        ids = np.asarray(self.backend.sample(sub, sampling)).astype(np.int64)
        for seq, tid in zip(seqs, ids):
            results[seq.seq_id].token_id = int(tid)
        want = [i for i, p in enumerate(params) if p.logprobs is not None]
        if want:
            lps = self._logprobs(sub[want], ids[want].astype(np.int32),
                                 [params[i].logprobs for i in want])
            for i, lp in zip(want, lps):
                results[seqs[i].seq_id].logprob = lp

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
