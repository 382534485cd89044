"""In-process route tests over the real model (the `app` fixture from tests/conftest.py).
Live output is never a byte oracle: these check wire shapes and automata only."""
from __future__ import annotations

import pytest
from anthropic.types import Message
from openai.types import Completion
from openai.types.chat import ChatCompletion
from openai.types.responses import Response

from tests.api.validators import (validate_chat_stream, validate_completion_stream,
                                  validate_messages_stream, validate_responses_stream)

pytestmark = pytest.mark.server
USER = [{"role": "user", "content": "Say hello."}]


async def _model(app):
    return app.extensions["aotx"].model_id


async def test_live_chat_buffered_and_stream(app):
    client, model = app.test_client(), await _model(app)
    resp = await client.post("/v1/chat/completions", json={
        "model": model, "messages": USER, "max_tokens": 8, "temperature": 0,
        "logprobs": True, "top_logprobs": 2})
    parsed = ChatCompletion.model_validate(await resp.get_json())
    assert parsed.choices[0].finish_reason in ("stop", "length")
    assert parsed.usage.completion_tokens <= 8
    assert all(len(t.top_logprobs) == 2 for t in parsed.choices[0].logprobs.content)
    resp = await client.post("/v1/chat/completions", json={
        "model": model, "messages": USER, "max_tokens": 8, "stream": True, "n": 2, "seed": 1,
        "stream_options": {"include_usage": True}})
    validate_chat_stream(await resp.get_data(), n=2, include_usage=True)


async def test_live_zero_budget_every_surface(app):
    client, model = app.test_client(), await _model(app)
    resp = await client.post("/v1/messages", json={"model": model, "messages": USER,
                                                   "max_tokens": 0})
    msg = Message.model_validate(await resp.get_json())
    assert msg.stop_reason == "max_tokens" and msg.content == [] and msg.usage.output_tokens == 0
    resp = await client.post("/v1/completions", json={"model": model, "prompt": "Hi",
                                                      "max_tokens": 0, "echo": True})
    comp = Completion.model_validate(await resp.get_json())
    assert comp.choices[0].text == "Hi" and comp.usage.completion_tokens == 0
    resp = await client.post("/v1/responses", json={"model": model, "input": "Hi",
                                                    "max_output_tokens": 0})
    r = Response.model_validate(await resp.get_json())
    assert r.status == "incomplete" and r.usage.output_tokens == 0


async def test_live_streams_pass_automata(app):
    client, model = app.test_client(), await _model(app)
    resp = await client.post("/v1/completions", json={
        "model": model, "prompt": ["Once", "Twice"], "max_tokens": 6, "stream": True,
        "logprobs": 1})
    validate_completion_stream(await resp.get_data(), choices=2)
    resp = await client.post("/v1/messages", json={"model": model, "messages": USER,
                                                   "max_tokens": 6, "stream": True})
    result = validate_messages_stream(await resp.get_data())
    assert result["stop_reason"] in ("end_turn", "max_tokens")
    resp = await client.post("/v1/responses", json={
        "model": model, "input": "Hi", "max_output_tokens": 6, "stream": True,
        "top_logprobs": 1, "include": ["message.output_text.logprobs"]})
    result = validate_responses_stream(await resp.get_data())
    assert result["terminal"] in ("response.completed", "response.incomplete")
