"""OpenAI legacy Completions through the official SDK."""
from __future__ import annotations

import openai
import pytest

MODEL = "smollm2-135m-instruct"
PROMPT = "The capital of France is"


def test_buffered_completion(openai_client):
    r = openai_client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=8, temperature=0)
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    assert r.choices[0].finish_reason in ("stop", "length")
    assert 0 < r.usage.completion_tokens <= 8 and r.usage.prompt_tokens > 0


def test_stream_equals_buffered(openai_client):
    b = openai_client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=8, temperature=0)
    chunks = list(openai_client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=8,
                                                   temperature=0, stream=True))
    assert all(c.object == "text_completion" for c in chunks)
    assert "".join(c.choices[0].text for c in chunks if c.choices) == b.choices[0].text


def test_echo_with_logprobs(openai_client):
    r = openai_client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=3, temperature=0,
                                         echo=True, logprobs=2)
    choice = r.choices[0]
    assert choice.text.startswith(PROMPT)
    lp = choice.logprobs
    n = r.usage.prompt_tokens + r.usage.completion_tokens
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) == n
    assert lp.token_logprobs[0] is None
    assert all(x <= 0 for x in lp.token_logprobs[1:])
    assert "".join(lp.tokens) == choice.text
    assert lp.text_offset[0] == 0 and lp.text_offset == sorted(lp.text_offset)
    assert all(len(t) <= 3 for t in lp.top_logprobs[1:])  # top-2 plus possibly the chosen token


def test_list_of_prompts_and_n(openai_client):
    r = openai_client.completions.create(model=MODEL, prompt=["One, two,", "Red, green,"],
                                         max_tokens=3, temperature=0, n=2)
    assert [c.index for c in r.choices] == [0, 1, 2, 3]
    assert r.choices[0].text == r.choices[1].text  # greedy: both choices of a prompt agree


def test_token_id_prompts_equal_text_prompt(openai_client, model_bundle):
    ids = model_bundle.tokenizer.encode(PROMPT)
    by_text = openai_client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=4, temperature=0)
    by_ids = openai_client.completions.create(model=MODEL, prompt=ids, max_tokens=4, temperature=0)
    batch = openai_client.completions.create(model=MODEL, prompt=[ids, ids], max_tokens=4, temperature=0)
    assert by_ids.usage.prompt_tokens == len(ids)
    assert by_ids.choices[0].text == by_text.choices[0].text
    assert [c.text for c in batch.choices] == [by_text.choices[0].text] * 2


def test_zero_and_negative_budgets(openai_client):
    r = openai_client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=0)
    assert r.usage.completion_tokens == 0 and r.choices[0].text == ""
    with pytest.raises(openai.BadRequestError) as exc:
        openai_client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=-3)
    assert "max_tokens" in exc.value.message


def test_stop_in_stream(openai_client):
    chunks = list(openai_client.completions.create(model=MODEL, prompt="1, 2, 3, 4,", max_tokens=20,
                                                   temperature=0, stop=[" 7"], stream=True))
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert " 7" not in text
    assert [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason] == ["stop"]


def test_logprobs_cover_exactly_the_returned_text_with_a_stop(openai_client):
    kw = dict(model=MODEL, prompt="1, 2, 3, 4,", max_tokens=20, temperature=0, stop=[" 7"],
              logprobs=1)
    r = openai_client.completions.create(**kw)
    choice = r.choices[0]
    assert choice.finish_reason == "stop" and " 7" not in choice.text
    assert "".join(choice.logprobs.tokens) == choice.text
    chunks = list(openai_client.completions.create(**kw, stream=True))
    tokens = []
    for c in chunks:
        for ch in c.choices:
            if ch.logprobs:
                assert "".join(ch.logprobs.tokens) == ch.text
                tokens += ch.logprobs.tokens
    assert tokens == choice.logprobs.tokens
