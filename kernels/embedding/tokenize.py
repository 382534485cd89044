"""The model's WordPiece tokenizer (HF `tokenizers`, from tokenizer.json), without its padding.

tokenizer.json ships with fixed padding to 128 and truncation at 128 switched on. Fixed
padding would make mean pooling average [PAD] positions (every pair then scores ~0.8), so
padding is switched off and batches are padded here with an explicit attention mask.
Truncation is set to the model's sequence limit (256 tokens, sentence-transformers'
`max_seq_length`), [CLS] and [SEP] included.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

MAX_TOKENS = 256


@dataclass(frozen=True)
class TokenBatch:
    ids: np.ndarray        # int64 [n, T], padded with pad_id
    type_ids: np.ndarray   # int64 [n, T]
    mask: np.ndarray       # bool [n, T]: True at real tokens

    @property
    def lengths(self) -> np.ndarray:
        return self.mask.sum(axis=1)


class EmbeddingTokenizer:
    def __init__(self, path: Path, max_tokens: int = MAX_TOKENS, pad_id: int = 0) -> None:
        self._tok = Tokenizer.from_file(str(path))
        self._tok.no_padding()
        self._tok.enable_truncation(max_length=max_tokens)
        self.max_tokens, self.pad_id = max_tokens, pad_id

    def tokens(self, texts: list[str]) -> list[tuple[list[int], list[int]]]:
        """(ids, type_ids) per text, [CLS] … [SEP], truncated, unpadded."""
        return [(e.ids, e.type_ids) for e in self._tok.encode_batch(list(texts))] if texts else []

    def pad(self, rows: list[tuple[list[int], list[int]]]) -> TokenBatch:
        width = max((len(ids) for ids, _ in rows), default=0)
        n = len(rows)
        ids = np.full((n, width), self.pad_id, dtype=np.int64)
        type_ids = np.zeros((n, width), dtype=np.int64)
        mask = np.zeros((n, width), dtype=bool)
        for i, (row_ids, row_types) in enumerate(rows):
            k = len(row_ids)
            ids[i, :k], type_ids[i, :k], mask[i, :k] = row_ids, row_types, True
        return TokenBatch(ids, type_ids, mask)

    def encode(self, texts: list[str]) -> TokenBatch:
        return self.pad(self.tokens(texts))
