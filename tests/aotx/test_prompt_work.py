"""Prompt building off the event loop: the cheap token bound, and refusals before tokenizing."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aotx.chat_types import ChatMessage
from aotx.prompt_work import PromptTooLong, PromptWork


class CountingTokenizer:
    """The real tokenizer, counting what it is asked to encode."""

    def __init__(self, tokenizer) -> None:
        self._tokenizer = tokenizer
        self.max_token_bytes = tokenizer.max_token_bytes
        self.min_tokens = tokenizer.min_tokens
        self.encoded = 0

    def encode(self, text: str) -> list[int]:
        self.encoded += 1
        return self._tokenizer.encode(text)


@pytest.fixture(scope="module")
def tok(model_bundle):
    return model_bundle.tokenizer


# text with what the vocabulary lacks (control characters, planes 4-16) and long runs (long tokens)
PIECES = st.one_of(st.text(st.characters(codec="utf-8"), max_size=8),
                   st.sampled_from(["\x06", "\U00040000", "\U0010fffd", " " * 16, "=" * 32, "\n\n", "<|im_end|>"]))
TEXT = st.lists(PIECES, max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_the_bound_never_exceeds_the_real_count(tok, text):
    assert tok.min_tokens(text) <= len(tok.encode(text))


def test_bytes_the_vocabulary_drops_count_for_nothing(tok):
    assert tok.encode("\x06" * 1000) == [] and tok.min_tokens("\x06" * 1000) == 0
    assert tok.min_tokens("a" * (10 * tok.max_token_bytes)) == 10


async def test_a_prompt_over_the_bound_is_refused_before_it_is_tokenized(model_bundle):
    counting = CountingTokenizer(model_bundle.tokenizer)
    work = PromptWork(counting, model_bundle.chat_template)
    try:
        big = "x" * (100 * counting.max_token_bytes)
        with pytest.raises(PromptTooLong) as exc:
            await work.chat([ChatMessage("user", big)], limit=99)
        assert exc.value.tokens >= 100 and counting.encoded == 0
        with pytest.raises(PromptTooLong):
            await work.text(big, limit=99)
        assert counting.encoded == 0
        # under the bound: tokenized, the exact ids (the caller checks them against its limit)
        ids = await work.chat([ChatMessage("user", "hi")], prefill="Sure", limit=99)
        rendered = work.render([ChatMessage("user", "hi")])
        assert ids == model_bundle.tokenizer.encode(rendered) + model_bundle.tokenizer.encode("Sure")
        assert await work.text(big) == model_bundle.tokenizer.encode(big)   # no limit: no refusal
    finally:
        work.close()
