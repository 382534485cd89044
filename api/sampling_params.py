"""Sampling parameters past temperature / top_p, read from a request body (each failure names its param).

Chat Completions and Completions: OpenAI's `presence_penalty`, `frequency_penalty` (-2..2) and
`logit_bias` ({"<token id>": bias -100..100}), and as extensions (as vLLM takes them) `top_k`
(0 or -1: off), `min_p` (0..1) and `ignore_eos` (a benchmark switch: EOS does not end the answer, which
runs to max_tokens or a stop). Responses and Messages refuse what their wire format does not
define (api.unsupported.check_foreign_sampling).
"""
from __future__ import annotations

from typing import Any

from api import fields
from api.fields import bad

LOGIT_BIAS_LIMIT = 100.0


def logit_bias(body: dict, vocab_size: int) -> tuple[tuple[int, float], ...]:
    value = body.get("logit_bias")
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise bad("logit_bias", "'logit_bias' must be an object mapping token ids (strings) to biases.")
    out = []
    for key, bias in value.items():
        if not (key.isascii() and key.isdigit() and str(int(key)) == key):
            raise bad("logit_bias", f"'logit_bias' keys must be token ids written as decimal integers; got {key!r}.")
        if int(key) >= vocab_size:
            raise bad("logit_bias", f"'logit_bias' names token id {key}; the vocabulary has ids 0 to {vocab_size - 1}.")
        if not fields.is_number(bias) or not -LOGIT_BIAS_LIMIT <= bias <= LOGIT_BIAS_LIMIT:
            raise bad("logit_bias", f"'logit_bias' values must be numbers between -100 and 100; got {bias!r} "
                                    f"for token {key}.")
        out.append((int(key), float(bias)))
    return tuple(out)


def top_k(body: dict) -> int:
    """0 or -1 (vLLM's spelling) turns it off."""
    value = fields.opt_int(body, "top_k", 0, -1)
    return max(0, value)


def openai_sampling(body: dict, vocab_size: int) -> dict[str, Any]:
    """SamplingParams keyword arguments for Chat Completions and Completions."""
    return {"presence_penalty": fields.opt_number(body, "presence_penalty", 0.0, -2.0, 2.0),
            "frequency_penalty": fields.opt_number(body, "frequency_penalty", 0.0, -2.0, 2.0),
            "logit_bias": logit_bias(body, vocab_size), "top_k": top_k(body),
            "min_p": fields.opt_number(body, "min_p", 0.0, 0.0, 1.0),
            "ignore_eos": fields.opt_bool(body, "ignore_eos")}
