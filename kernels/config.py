"""LlamaConfig: the shape of a Llama-architecture model, read from GGUF metadata."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class LlamaConfig:
    n_layers: int
    hidden: int
    ffn: int
    n_heads: int
    n_kv_heads: int
    head_dim: int
    rope_base: float
    rms_eps: float
    vocab_size: int
    context_length: int
    bos_id: int
    eos_id: int

    @property
    def q_size(self) -> int:
        return self.n_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.n_kv_heads * self.head_dim

    @classmethod
    def from_metadata(cls, meta: Mapping[str, Any]) -> "LlamaConfig":
        """Build from GGUF key/values (already decoded to Python values)."""
        arch = meta["general.architecture"]
        if arch != "llama":
            raise ValueError(f"unsupported architecture {arch!r}: only 'llama' is implemented")

        def key(name: str) -> Any:
            return meta[f"{arch}.{name}"]

        hidden = int(key("embedding_length"))
        n_heads = int(key("attention.head_count"))
        n_kv_heads = int(meta.get(f"{arch}.attention.head_count_kv", n_heads))
        head_dim = int(meta.get(f"{arch}.rope.dimension_count", hidden // n_heads))
        if "llama.vocab_size" in meta:
            vocab = int(meta["llama.vocab_size"])
        else:
            vocab = len(meta["tokenizer.ggml.tokens"])
        return cls(
            n_layers=int(key("block_count")),
            hidden=hidden,
            ffn=int(key("feed_forward_length")),
            n_heads=n_heads,
            n_kv_heads=n_kv_heads,
            head_dim=head_dim,
            rope_base=float(meta.get(f"{arch}.rope.freq_base", 10000.0)),
            rms_eps=float(key("attention.layer_norm_rms_epsilon")),
            vocab_size=vocab,
            context_length=int(key("context_length")),
            bos_id=int(meta["tokenizer.ggml.bos_token_id"]),
            eos_id=int(meta["tokenizer.ggml.eos_token_id"]),
        )
