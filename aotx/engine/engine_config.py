"""What an Engine is built with: its sizes and schedule (EngineConfig) and what it needs of a tokenizer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Tokenizer(Protocol):
    eos_id: int
    def token_bytes(self, token_id: int) -> bytes: ...
    def token_text(self, token_id: int) -> str: ...


@dataclass(frozen=True)
class EngineConfig:
    max_batch: int = 64                 # running sequences at most
    num_pages: int = 2048               # must match the backend's KV pool
    page_size: int = 16
    max_model_len: int = 8192           # prompt + completion tokens
    prefill_token_budget: int = 2048    # prompt tokens per step (longer prompts are chunked)
    max_queue: int = 1024               # waiting requests before "queue_full"
    # one step behind: step N+1 is launched before step N's ids are read back (None: the backend's
    # choice, aotx.engine.launch.make_launcher); False: the classic schedule -> run -> deliver loop
    overlap: bool | None = None
