"""What builds llguidance's view of a tokenizer again in another process: (key, HF tokenizer JSON,
n_vocab, eos). The compiler records it in each Constraint (Constraint.source); the matcher processes
(aotx.structured.matcher_pool) receive it once and build their own LLTokenizer; equal keys mean the
same tokenizer. No llguidance here: the engine computes it before any constraint exists."""
from __future__ import annotations

import hashlib


def tokenizer_source(tokenizer) -> tuple[str, str, int, int]:
    """`tokenizer`: what kernels.load_model gives (hf_json(), vocab_size, eos_id)."""
    text = tokenizer.hf_json()
    key = hashlib.sha256(f"{tokenizer.vocab_size}:{tokenizer.eos_id}:".encode() + text.encode()).hexdigest()
    return key, text, int(tokenizer.vocab_size), int(tokenizer.eos_id)
