"""Values that cross the engine's boundary: what a caller asks for and what it gets back."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class SamplingParams:
    max_tokens: int                      # decode budget; 0 means prefill only, no output token
    temperature: float = 1.0             # 0 = greedy
    top_p: float = 1.0
    top_k: int = 0                       # 0 = off
    min_p: float = 0.0                   # 0 = off; drop tokens with p < min_p * p_max
    presence_penalty: float = 0.0        # OpenAI semantics over this answer's output tokens
    frequency_penalty: float = 0.0
    logit_bias: tuple[tuple[int, float], ...] = ()  # (token id, bias added to the logit), distinct ids
    seed: int | None = None              # None: the engine draws one
    stop: tuple[str, ...] = ()           # stop strings; matched text is not returned
    stop_token_ids: tuple[int, ...] = () # extra ids that end generation (EOS always does, unless ignore_eos)
    # vLLM's benchmark switch: EOS does not end the answer (it adds no text); max_tokens or a stop does
    ignore_eos: bool = False
    logprobs: int | None = None          # None: off; k >= 0: chosen token's logprob plus the top k
    prompt_logprobs: int | None = None   # same, for every prompt token (Completions echo)
    # aotx.structured.Constraint (or anything with start() -> a row matcher): every sampled token
    # is drawn from the tokens it allows (a per-row bitmask applied to the logits), EOS only once
    # the output is complete; None: unconstrained, and the row pays nothing for the feature
    constraint: Any = None


@dataclass(frozen=True)
class TopLogprob:
    token_id: int
    token: str          # the token's text as the tokenizer decodes it alone (may hold U+FFFD)
    bytes: bytes        # the token's exact bytes
    logprob: float


@dataclass(frozen=True)
class TokenLogprob:
    token_id: int
    token: str
    bytes: bytes
    logprob: float | None                 # None only for the first prompt token (no context)
    top: tuple[TopLogprob, ...] = ()      # most likely first; empty when k == 0


@dataclass(frozen=True)
class Delta:
    """One increment of a request's output.

    `text` holds only complete UTF-8 characters and never a possible prefix of
    a stop string; `token_ids`/`logprobs` are the tokens sampled since the
    previous delta (their text may be partly held back until a later delta).
    The last delta of a request has `finish_reason` set:
    "stop" (EOS or a stop string; `stop_sequence` names the string),
    "length" (budget spent), "cancelled", or "error" (`error` says why).
    """

    text: str
    token_ids: tuple[int, ...] = ()
    logprobs: tuple[TokenLogprob, ...] = ()
    finish_reason: str | None = None
    stop_sequence: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None
    prompt_logprobs: tuple[TokenLogprob, ...] = field(default=())  # set on the first delta only
    queued_s: float | None = None   # on the first token's delta: seconds from submission to admission


_new = object.__new__


def plain_delta(text: str, token_id: int, prompt_tokens: int, completion_tokens: int,
                queued_s: float | None) -> Delta:
    """``Delta(text, (token_id,), (), None, None, prompt_tokens, completion_tokens, queued_s=queued_s)``,
    equal to it, built with one dict update instead of a frozen dataclass's ten ``object.__setattr__``
    calls (the engine makes one per streamed token: ~1 µs against ~2.7 on the 2-core box)."""
    d = _new(Delta)
    d.__dict__.update(text=text, token_ids=(token_id,), logprobs=(), finish_reason=None, stop_sequence=None,
                      prompt_tokens=prompt_tokens, completion_tokens=completion_tokens, error=None,
                      prompt_logprobs=(), queued_s=queued_s)
    return d
