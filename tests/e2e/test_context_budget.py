"""A budget that cannot fit the model's context is a 400 naming the client's field, on every surface
(as OpenAI and vLLM answer); an omitted budget is clipped to what fits. Official SDKs, real server."""
from __future__ import annotations

import anthropic
import openai
import pytest

MODEL = "smollm2-135m-instruct"
HI = [{"role": "user", "content": "Say hi."}]
CONTEXT = 8192      # SmolLM2's context window (the test server's pool is larger)
HUGE = 10**12


def _openai_refusal(exc: pytest.ExceptionInfo, param: str) -> str:
    error = exc.value.body
    assert exc.value.status_code == 400
    assert error["param"] == param and error["code"] == "context_length_exceeded", error
    assert f"maximum context length is {CONTEXT} tokens" in error["message"], error
    return error["message"]


@pytest.mark.parametrize("field", ["max_tokens", "max_completion_tokens"])
def test_chat_budget_over_context_is_400(openai_client, field):
    with pytest.raises(openai.BadRequestError) as exc:
        openai_client.chat.completions.create(model=MODEL, messages=HI, **{field: HUGE})
    message = _openai_refusal(exc, field)
    assert f"{HUGE} in the completion" in message, message


def test_completions_budget_over_context_is_400(openai_client):
    with pytest.raises(openai.BadRequestError) as exc:
        openai_client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=HUGE)
    _openai_refusal(exc, "max_tokens")
    # the same on a token-id prompt, with the count it holds
    with pytest.raises(openai.BadRequestError) as exc:
        openai_client.completions.create(model=MODEL, prompt=[1, 2, 3], max_tokens=CONTEXT - 2)
    message = _openai_refusal(exc, "max_tokens")
    assert f"you requested {CONTEXT + 1} tokens (3 in the prompt, {CONTEXT - 2} in the completion)" in message


def test_completions_budget_that_exactly_fits_is_accepted(openai_client):
    # prompt + budget == context: accepted (streamed, and closed after the first chunk)
    with openai_client.completions.create(model=MODEL, prompt=[1, 2, 3], max_tokens=CONTEXT - 3,
                                          stream=True) as stream:
        first = next(iter(stream))
    assert first.object == "text_completion"


def test_responses_budget_over_context_is_400(openai_client):
    with pytest.raises(openai.BadRequestError) as exc:
        openai_client.responses.create(model=MODEL, input="Say hi.", max_output_tokens=HUGE)
    _openai_refusal(exc, "max_output_tokens")


def test_anthropic_budget_over_context_is_400(anthropic_client):
    with pytest.raises(anthropic.BadRequestError) as exc:
        anthropic_client.messages.create(model=MODEL, messages=HI, max_tokens=HUGE)
    error = exc.value.body["error"]
    assert error["type"] == "invalid_request_error"
    assert "`max_tokens`" in error["message"] and f"> {CONTEXT}" in error["message"], error


def test_fractional_budget_stays_400(openai_client, anthropic_client):
    with pytest.raises(openai.BadRequestError) as exc:
        openai_client.chat.completions.create(model=MODEL, messages=HI, max_tokens=2.5)
    assert exc.value.body["param"] == "max_tokens"
    with pytest.raises(anthropic.BadRequestError):
        anthropic_client.messages.create(model=MODEL, messages=HI, max_tokens=2.5)


def test_prompt_alone_over_context_is_400_naming_the_prompt(openai_client):
    with pytest.raises(openai.BadRequestError) as exc:
        openai_client.completions.create(model=MODEL, prompt=[1] * CONTEXT, max_tokens=0)
    message = _openai_refusal(exc, "prompt")
    assert f"your prompt resulted in {CONTEXT} tokens" in message, message
