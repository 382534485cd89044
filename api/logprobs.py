"""Token logprobs in each surface's wire shape."""
from __future__ import annotations

import codecs
from typing import Sequence

from aotx.engine.types import TokenLogprob


def chat_entry(lp: TokenLogprob) -> dict:
    """Chat `logprobs.content[]` and Responses `output_text.logprobs[]` (bytes required)."""
    return {"token": lp.token, "logprob": lp.logprob, "bytes": list(lp.bytes),
            "top_logprobs": [{"token": t.token, "logprob": t.logprob, "bytes": list(t.bytes)}
                             for t in lp.top]}


def chat_logprobs(lps: Sequence[TokenLogprob]) -> dict:
    return {"content": [chat_entry(lp) for lp in lps], "refusal": None}


def responses_delta_entry(lp: TokenLogprob) -> dict:
    """`response.output_text.delta.logprobs[]`: no bytes on the streaming event."""
    return {"token": lp.token, "logprob": lp.logprob,
            "top_logprobs": [{"token": t.token, "logprob": t.logprob} for t in lp.top]}


class CompletionLogprobs:
    """Legacy Completions parallel arrays; `text_offset` is absolute in the returned text.

    A token's offset counts the complete characters before its first byte: token
    bytes go through the same UTF-8 decoding as the text, so a token that splits a
    character neither shifts later offsets nor points past the text.
    """

    def __init__(self, offset: int = 0) -> None:
        self.restart(offset)

    def restart(self, offset: int) -> None:
        """Continue counting from `offset` with fresh UTF-8 state (after the echoed prompt)."""
        self.offset = offset
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def block(self, lps: Sequence[TokenLogprob], *, first_is_prompt_start: bool = False) -> dict:
        tokens, token_lps, tops, offsets = [], [], [], []
        for k, lp in enumerate(lps):
            tokens.append(lp.token)
            token_lps.append(lp.logprob)
            if first_is_prompt_start and k == 0 and lp.logprob is None:
                tops.append(None)
            else:
                # the chosen token plus the top k: up to k + 1 entries
                top = {lp.token: lp.logprob} if lp.logprob is not None else {}
                top.update((t.token, t.logprob) for t in lp.top)
                tops.append(top)
            offsets.append(self.offset)
            self.offset += len(self._utf8.decode(lp.bytes))
        return {"tokens": tokens, "token_logprobs": token_lps, "top_logprobs": tops,
                "text_offset": offsets}


def merge_completion_blocks(blocks: Sequence[dict]) -> dict:
    out = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for block in blocks:
        for key in out:
            out[key].extend(block[key])
    return out
