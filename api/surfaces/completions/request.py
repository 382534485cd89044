"""POST /v1/completions: body -> CompletionRequest (strict, params named)."""
from __future__ import annotations

from dataclasses import dataclass, replace

from aotx.engine.types import SamplingParams
from api import fields, structured
from api.budgets import decode_budget
from api.errors import ApiError
from api.sampling_params import openai_sampling
from api.unsupported import check_suffix

MAX_N = 16


@dataclass(frozen=True)
class PromptInput:
    text: str | None          # the prompt as given (None: token ids)
    token_ids: list[int] | None


@dataclass(frozen=True)
class CompletionRequest:
    model: str
    prompts: list[PromptInput]
    n: int
    echo: bool
    logprobs: int | None
    stream: bool
    include_usage: bool
    params: list[SamplingParams]    # one per choice of one prompt (seed + i)


def _is_token_list(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(fields.is_int(t) for t in value)


def parse_prompts(raw: object) -> list[PromptInput]:
    bad = ApiError(400, "'prompt' must be a string, an array of strings, an array of token ids "
                        "or an array of token-id arrays.", param="prompt")
    if isinstance(raw, str):
        return [PromptInput(raw, None)]
    if not isinstance(raw, list) or not raw:
        raise bad
    if all(isinstance(p, str) for p in raw):
        return [PromptInput(p, None) for p in raw]
    if _is_token_list(raw):
        return [PromptInput(None, list(raw))]
    if all(_is_token_list(p) for p in raw):
        return [PromptInput(None, list(p)) for p in raw]
    raise bad


def parse_completion_request(body: dict, service) -> CompletionRequest:
    model = fields.known_model(body, service)
    if "prompt" not in body or body["prompt"] is None:
        raise ApiError(400, "Missing required parameter: 'prompt'.", param="prompt")
    prompts = parse_prompts(body["prompt"])
    check_suffix(body)
    answer = structured.response_format(body)
    n = fields.opt_int(body, "n", 1, 1, MAX_N)
    best_of = fields.opt_int(body, "best_of", None, 1)
    if best_of is not None and best_of != n:
        raise ApiError(400, f"'best_of' other than 'n' is not supported (best_of={best_of}, "
                            f"n={n}).", param="best_of", code="unsupported_parameter")
    stream = fields.opt_bool(body, "stream")
    options = fields.opt_object(body, "stream_options") or {}
    include_usage = stream and fields.opt_bool(options, "include_usage")
    echo = fields.opt_bool(body, "echo")
    logprobs = fields.opt_int(body, "logprobs", None, 0, 5)
    seed = fields.opt_int(body, "seed", None)
    temperature, top_p = fields.sampling_numbers(body, service)
    base = SamplingParams(
        max_tokens=decode_budget(body, "max_tokens", service.default_max_tokens),
        temperature=temperature, top_p=top_p, seed=seed,
        stop=fields.stop_strings(body, "stop"), logprobs=logprobs,
        prompt_logprobs=logprobs if echo and logprobs is not None else None,
        **openai_sampling(body, service.vocab_size),
        constraint=structured.constraint(service, answer, [], None, ""))
    params = [base if seed is None else replace(base, seed=seed + i) for i in range(n)]
    return CompletionRequest(model, prompts, n, echo, logprobs, stream, include_usage, params)
