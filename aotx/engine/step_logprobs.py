"""The logprobs a step's rows asked for: sampled tokens' (`logprobs`) and prompt tokens' (`prompt_logprobs`),
read from the step's logits through the backend (only the rows that ask pay the copy), with their text."""
from __future__ import annotations

import numpy as np

from aotx.engine.types import TokenLogprob, TopLogprob


def logprobs_of(backend, tokenizer, logits, ids: np.ndarray, plan) -> tuple[list, list]:
    """([(sequence, its sampled token's TokenLogprob)], [(sequence, a prompt token's TokenLogprob)]) for the
    rows of `plan` (aotx.engine.runner._Plan: `sample` rows and `prompt` rows) that ask for them."""
    sampled, prompt = [], []
    want = [(i, row, seq) for i, (row, seq) in enumerate(plan.sample) if seq.params.logprobs is not None]
    if want:
        lps = token_logprobs(backend, tokenizer, logits[[row for _, row, _ in want]],
                             ids[[i for i, _, _ in want]].astype(np.int32),
                             [seq.params.logprobs for _, _, seq in want])
        sampled = [(seq, lp) for (_, _, seq), lp in zip(want, lps)]
    if plan.prompt:
        rows = [r for r, _, _ in plan.prompt]
        targets = np.array([t for _, _, t in plan.prompt], dtype=np.int32)
        ks = [seq.params.prompt_logprobs for _, seq, _ in plan.prompt]
        lps = token_logprobs(backend, tokenizer, logits[rows], targets, ks)
        prompt = [(seq, lp) for (_, seq, _), lp in zip(plan.prompt, lps)]
    return sampled, prompt


def token_logprobs(backend, tokenizer, logits: np.ndarray, chosen: np.ndarray, ks: list[int]) -> list[TokenLogprob]:
    k_max = max(1, max(ks))
    chosen_lp, top_ids, top_lp = backend.logprobs(logits, chosen, k_max)
    out = []
    for i, k in enumerate(ks):
        top = tuple(_top(tokenizer, int(top_ids[i, j]), float(top_lp[i, j])) for j in range(k))
        tid = int(chosen[i])
        out.append(TokenLogprob(tid, tokenizer.token_text(tid), tokenizer.token_bytes(tid), float(chosen_lp[i]), top))
    return out


def unscored(tokenizer, token_id: int) -> TokenLogprob:
    """A prompt's first token: no logit scores it (its logprob is None)."""
    return TokenLogprob(token_id, tokenizer.token_text(token_id), tokenizer.token_bytes(token_id), None, ())


def _top(tokenizer, token_id: int, logprob: float) -> TopLogprob:
    return TopLogprob(token_id, tokenizer.token_text(token_id), tokenizer.token_bytes(token_id), logprob)
