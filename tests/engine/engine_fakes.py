"""A tiny deterministic stand-in for the model, for engine tests without weights.

FakeBackend keeps a paged "KV cache" of token ids: forward() writes each
query token to its slot and reads every row's context back through the
block table, so a wrong slot_mapping/block_table changes the output.
The next token is a pure function of the context (`reference_next`).
"""
from __future__ import annotations

import numpy as np

from kernels.sampling_rows import SamplingRows
from kernels.step_batch import StepBatch

VOCAB = 300
EOS = 299


def reference_next(context: list[int]) -> int:
    return ord("a") + (sum(context) * 31 + len(context)) % 26


def reference_greedy(prompt: list[int], n: int) -> list[int]:
    ctx, out = list(prompt), []
    for _ in range(n):
        out.append(reference_next(ctx))
        ctx.append(out[-1])
    return out


class FakeTokenizer:
    eos_id = EOS
    vocab_size = VOCAB
    # a few multi-byte tokens: pieces of "é" (c3 a9) and of an emoji (f0 9f 98 80)
    extra = {256: b"\xc3", 257: b"\xa9", 258: b"\xf0\x9f", 259: b"\x98", 260: b"\x80",
             261: "中".encode(), 262: "文".encode(), 263: b"</s", 264: b"top>", 265: b"END",
             EOS: b"<eos>"}

    def token_bytes(self, token_id: int) -> bytes:
        if token_id < 256:
            return bytes([token_id])
        return self.extra.get(token_id, b"?")

    def token_text(self, token_id: int) -> str:
        return self.token_bytes(token_id).decode("utf-8", errors="replace")

    def encode(self, text: str) -> list[int]:
        return list(text.encode())


class FakeBackend:
    def __init__(self, num_pages: int = 64, page_size: int = 4) -> None:
        self.num_pages, self.page_size = num_pages, page_size
        self.kv = np.full(num_pages * page_size, -1, dtype=np.int64)
        self.forward_calls = 0
        self.batches: list[StepBatch] = []

    def forward(self, batch: StepBatch) -> np.ndarray:
        self.forward_calls += 1
        self.batches.append(batch)
        for name in ("token_ids", "positions", "query_start", "context_lens",
                     "block_tables", "slot_mapping", "logits_rows"):
            assert getattr(batch, name).dtype == np.int32, name
        self.kv[batch.slot_mapping] = batch.token_ids
        seq_of_token = np.searchsorted(batch.query_start, np.arange(batch.num_tokens), side="right") - 1
        logits = np.empty((len(batch.logits_rows), VOCAB), dtype=np.float32)
        for r, t in enumerate(batch.logits_rows):
            s, pos = seq_of_token[t], int(batch.positions[t])
            assert pos < batch.context_lens[s]
            table = batch.block_tables[s]
            ctx = [int(self.kv[table[p // self.page_size] * self.page_size + p % self.page_size])
                   for p in range(pos + 1)]
            assert -1 not in ctx and min(table[: (pos // self.page_size) + 1]) >= 0
            logits[r] = -0.5 * np.abs(np.arange(VOCAB) - reference_next(ctx))
        return logits

    def sample(self, logits: np.ndarray, rows: SamplingRows) -> np.ndarray:
        out = np.empty(logits.shape[0], dtype=np.int32)
        for i in range(logits.shape[0]):
            if rows.temperature[i] == 0:
                out[i] = int(np.argmax(logits[i]))
            else:
                p = np.exp((logits[i] - logits[i].max()) / rows.temperature[i])
                rng = np.random.default_rng([int(rows.seed[i]), int(rows.step[i])])
                out[i] = rng.choice(VOCAB, p=p / p.sum())
        return out

    def logprobs(self, logits: np.ndarray, chosen_ids: np.ndarray, k: int):
        lp = logits - logits.max(axis=1, keepdims=True)
        lp = lp - np.log(np.exp(lp).sum(axis=1, keepdims=True))
        top = np.argsort(-lp, axis=1, kind="stable")[:, :k].astype(np.int32)
        return (lp[np.arange(len(lp)), chosen_ids], top, np.take_along_axis(lp, top, axis=1))


class FailingBackend:
    """Wraps a backend; forward() raises from call number `fail_at` on, `times` times."""

    def __init__(self, inner, fail_at: int, times: int = 1) -> None:
        self.inner, self.fail_at, self.times, self.calls = inner, fail_at, times, 0

    def forward(self, batch):
        self.calls += 1
        if self.fail_at <= self.calls < self.fail_at + self.times:
            raise RuntimeError("injected backend failure")
        return self.inner.forward(batch)

    def __getattr__(self, name):
        return getattr(self.inner, name)
