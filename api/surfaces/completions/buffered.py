"""Legacy Completions buffered builder: Deltas per choice -> text_completion."""
from __future__ import annotations

from typing import Sequence

from aotx.engine.types import Delta
from api.errors import engine_failure
from api.logprobs import merge_completion_blocks
from api.surfaces.completions.stream import CompletionChoice, prompt_usage


def build_completion(deltas: Sequence[Sequence[Delta]], *, id: str, created: int, model: str,
                     fingerprint: str, n: int, echo_texts: Sequence[str | None],
                     logprobs: int | None) -> dict:
    choices, states = [], []
    for index, (tape, echo) in enumerate(zip(deltas, echo_texts)):
        state = CompletionChoice(echo, logprobs)
        pieces = [p for delta in tape for p in state.feed(delta)]
        errors = [p.error for p in pieces if p.error is not None]
        if errors:
            raise engine_failure(errors[0])
        finish = next((p.finish for p in pieces if p.finish), None)
        if finish is None:
            raise engine_failure("generation ended without a finish")
        blocks = [p.logprobs for p in pieces if p.logprobs is not None]
        choices.append({"index": index, "text": "".join(p.text for p in pieces),
                        "logprobs": merge_completion_blocks(blocks) if logprobs is not None
                        else None, "finish_reason": finish})
        states.append(state)
    return {"id": id, "object": "text_completion", "created": created, "model": model,
            "system_fingerprint": fingerprint, "choices": choices,
            "usage": prompt_usage(states, n)}
