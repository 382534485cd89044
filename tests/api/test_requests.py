"""Request parsing through the real blueprints over a tape-replaying service (no model)."""
from __future__ import annotations

import pytest

from tests.api.fake_service import FakeService, make_app
from tests.api.tapes import CALL, tape
from tests.api.validators import (validate_chat_stream, validate_messages_stream,
                                  validate_responses_stream)

MODEL = FakeService.model_id
USER = [{"role": "user", "content": "hi"}]
SURFACES = {
    "chat": ("/v1/chat/completions", {"model": MODEL, "messages": USER}, "max_tokens"),
    "chat2": ("/v1/chat/completions", {"model": MODEL, "messages": USER}, "max_completion_tokens"),
    "completions": ("/v1/completions", {"model": MODEL, "prompt": "hi"}, "max_tokens"),
    "messages": ("/v1/messages", {"model": MODEL, "messages": USER}, "max_tokens"),
    "responses": ("/v1/responses", {"model": MODEL, "input": "hi"}, "max_output_tokens"),
}


@pytest.fixture
def service():
    return FakeService()


@pytest.fixture
def client(service):
    return make_app(service).test_client()


def assert_error(resp, body, status, *, anthropic=False, param=None, contains=None):
    assert resp.status_code == status, body
    if anthropic:
        assert body["type"] == "error" and set(body["error"]) == {"type", "message"}
        message = body["error"]["message"]
    else:
        assert set(body["error"]) == {"message", "type", "param", "code"}
        message = body["error"]["message"]
        if param is not None:
            assert body["error"]["param"] == param
    if contains:
        assert contains in message, message
    return message


async def post(client, path, body):
    resp = await client.post(path, json=body)
    return resp, await resp.get_json()


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("value,expected", [(None, 64), ("omit", 64), (0, 0), (5, 5)])
async def test_budget_accepted(client, service, surface, value, expected):
    path, body, field = SURFACES[surface]
    if value != "omit":
        body = {**body, field: value}
    resp, _ = await post(client, path, body)
    assert resp.status_code == 200
    assert service.submitted[-1][1].max_tokens == expected


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("value", [-1, 1.5, "10", True])
async def test_budget_rejected_names_field(client, surface, value):
    path, body, field = SURFACES[surface]
    resp, out = await post(client, path, {**body, field: value})
    anthropic = surface == "messages"
    assert_error(resp, out, 400, anthropic=anthropic, param=None if anthropic else field,
                 contains=field)
    assert resp.headers["x-should-retry"] == "false"


async def test_chat_both_budgets_take_smaller(client, service):
    await post(client, "/v1/chat/completions", {**SURFACES["chat"][1], "max_tokens": 9,
                                                 "max_completion_tokens": 4})
    assert service.submitted[-1][1].max_tokens == 4


@pytest.mark.parametrize("surface", SURFACES)
async def test_unknown_model_is_native_404(client, surface):
    path, body, _ = SURFACES[surface]
    resp, out = await post(client, path, {**body, "model": "gpt-9"})
    if surface == "messages":
        assert_error(resp, out, 404, anthropic=True)
        assert out["error"]["type"] == "not_found_error"
    else:
        assert_error(resp, out, 404, param="model")
        assert out["error"]["code"] == "model_not_found"


@pytest.mark.parametrize("surface,extra,param", [
    ("chat", {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
     "response_format.json_schema.schema"),
    ("completions", {"response_format": "json_object"}, "response_format"),
    ("completions", {"suffix": "end"}, "suffix"),
    ("responses", {"text": {"format": {"type": "json_schema", "name": "x", "schema": {"if": {}}}}},
     "text.format.schema"),
    ("responses", {"previous_response_id": "resp_1"}, "previous_response_id"),
    ("responses", {"conversation": "conv_1"}, "conversation"),
    ("messages", {"output_format": {"type": "json_schema"}}, None),
    ("messages", {"output_config": {"format": {"type": "json_schema"}}}, None),
    ("messages", {"output_config": {"format": {"type": "json_schema", "schema": {"type": "string",
                                                                              "format": "nope"}}}}, None),
    ("chat", {"top_logprobs": 3}, "top_logprobs"),
    ("chat", {"stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ("chat", {"temperature": "hot"}, "temperature"),
    ("chat", {"n": 0}, "n"),
    ("completions", {"logprobs": 6}, "logprobs"),
    ("completions", {"best_of": 3}, "best_of"),
    ("chat", {"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "tool_choice"),
])
async def test_refusals_are_typed_400(client, surface, extra, param):
    path, body, _ = SURFACES[surface]
    resp, out = await post(client, path, {**body, **extra})
    assert_error(resp, out, 400, anthropic=surface == "messages", param=param)


@pytest.mark.parametrize("surface,extra", [
    ("chat", {"response_format": {"type": "text"}}), ("chat", {"response_format": None}),
    ("chat", {"response_format": {}}), ("responses", {"text": {"format": {"type": "text"}}}),
    ("responses", {"previous_response_id": None, "conversation": None}),
    ("chat", {"unknown_extra_key": 1}),
])
async def test_text_modes_and_null_accepted(client, surface, extra):
    path, body, _ = SURFACES[surface]
    resp, _ = await post(client, path, {**body, **extra})
    assert resp.status_code == 200


@pytest.mark.parametrize("path,body,anthropic", [
    ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]}]}, False),
    ("/v1/chat/completions", {"model": MODEL, "messages": [{"role": "user", "content": [
        {"type": "input_audio", "input_audio": {"data": "AA", "format": "wav"}}]}]}, False),
    ("/v1/responses", {"model": MODEL, "input": [{"role": "user", "content": [
        {"type": "input_image", "image_url": "data:image/png;base64,AA"}]}]}, False),
    ("/v1/responses", {"model": MODEL, "input": [{"role": "user", "content": [
        {"type": "input_file", "file_id": "f"}]}]}, False),
    ("/v1/messages", {"model": MODEL, "messages": [{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA"}}]}]},
     True),
    ("/v1/messages", {"model": MODEL, "messages": [{"role": "user", "content": [
        {"type": "document", "source": {"type": "text", "data": "x"}}]}]}, True),
])
async def test_media_refused_text_only(client, path, body, anthropic):
    resp, out = await post(client, path, body)
    assert_error(resp, out, 400, anthropic=anthropic, contains="text-only")


async def test_malformed_json_native_envelopes(client):
    resp = await client.post("/v1/messages", data=b"{nope", headers={"content-type": "application/json"})
    assert_error(resp, await resp.get_json(), 400, anthropic=True)
    resp = await client.post("/v1/chat/completions", data=b"[1]")
    assert_error(resp, await resp.get_json(), 400)


async def test_queue_full_is_429_retryable(client, service):
    service.reject = ("queue_full", "busy")
    resp, out = await post(client, *SURFACES["chat"][:2])
    assert_error(resp, out, 429)
    assert "x-should-retry" not in resp.headers
    resp, out = await post(client, *SURFACES["messages"][:2])
    assert out["error"]["type"] == "rate_limit_error"


async def test_context_length_is_400(client, service):
    service.reject = ("context_length_exceeded", "too long")
    resp, out = await post(client, *SURFACES["responses"][:2])
    assert_error(resp, out, 400)
    assert out["error"]["code"] == "context_length_exceeded"


async def test_chat_tools_history_and_stream(client, service):
    service.tapes = [tape(["Sure.", CALL])]
    body = {"model": MODEL, "stream": True, "stream_options": {"include_usage": True},
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
            "messages": [USER[0], {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]}
    resp = await client.post("/v1/chat/completions", json=body)
    assert resp.headers["content-type"].startswith("text/event-stream")
    result = validate_chat_stream(await resp.get_data(), include_usage=True)
    assert result["choices"][0]["finish"] == "tool_calls"
    messages, tools, choice = service.chat_calls[-1]
    assert messages[2].role == "tool" and messages[2].name == "get_weather"
    assert tools[0].name == "get_weather" and choice is None


async def test_chat_n_and_seed(client, service):
    resp, out = await post(client, "/v1/chat/completions",
                           {"model": MODEL, "messages": USER, "n": 3, "seed": 10})
    assert [c["index"] for c in out["choices"]] == [0, 1, 2]
    assert [s[1].seed for s in service.submitted] == [10, 11, 12]


async def test_completions_token_prompts_and_echo(client, service):
    resp, out = await post(client, "/v1/completions",
                           {"model": MODEL, "prompt": [[72, 105], [79]], "n": 2, "echo": True})
    assert [c["index"] for c in out["choices"]] == [0, 1, 2, 3]
    assert out["choices"][0]["text"] == "HiHello world" and out["choices"][2]["text"].startswith("O")
    assert [s[0] for s in service.submitted] == [[72, 105], [72, 105], [79], [79]]


async def test_messages_prefill_system_and_stream(client, service):
    body = {"model": MODEL, "stream": True, "system": [{"type": "text", "text": "be nice"}],
            "stop_sequences": ["END"], "top_k": 5,
            "messages": [USER[0], {"role": "assistant", "content": "Well"}]}
    resp = await client.post("/v1/messages", json=body)
    result = validate_messages_stream(await resp.get_data())
    assert result["blocks"][0]["text"] == "Hello world"
    prompt, params, _, _ = service.submitted[-1]
    assert prompt == [1, 2, 3] + [ord(c) for c in "Well"]
    assert params.top_k == 5 and params.stop == ("END",)
    messages, _, _ = service.chat_calls[-1]
    assert [m.role for m in messages] == ["system", "user"]


async def test_messages_count_tokens(client):
    resp, out = await post(client, "/v1/messages/count_tokens", {"model": MODEL, "messages": USER})
    assert out == {"input_tokens": 3}


async def test_responses_items_and_stream(client, service):
    body = {"model": MODEL, "stream": True, "instructions": "be brief",
            "tools": [{"type": "function", "name": "get_weather", "parameters": {}}],
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
                      {"type": "function_call", "call_id": "call_1", "name": "get_weather",
                       "arguments": "{}"},
                      {"type": "function_call_output", "call_id": "call_1", "output": "sunny"}]}
    resp = await client.post("/v1/responses", json=body)
    result = validate_responses_stream(await resp.get_data())
    assert result["terminal"] == "response.completed"
    messages, tools, _ = service.chat_calls[-1]
    assert [m.role for m in messages] == ["system", "user", "assistant", "tool"]
    assert messages[3].name == "get_weather"


async def test_stream_cancels_handles_on_error(client, service):
    service.tapes = [tape(["Hel"], "error", error="boom")]
    resp = await client.post("/v1/responses", json={"model": MODEL, "input": "hi", "stream": True})
    result = validate_responses_stream(await resp.get_data())
    assert result["terminal"] == "response.failed"
    assert service.handles[-1].cancelled


async def test_buffered_engine_error_is_500_no_retry(client, service):
    service.tapes = [tape(["Hel"], "error", error="boom")]
    resp, out = await post(client, *SURFACES["messages"][:2])
    assert resp.status_code == 500 and out["error"]["type"] == "api_error"
    assert resp.headers["x-should-retry"] == "false"


@pytest.mark.parametrize("surface,param", [("chat", "messages"), ("completions", "prompt"),
                                           ("responses", "input")])
@pytest.mark.parametrize("code", ["context_length_exceeded", "invalid_prompt", "empty_prompt"])
async def test_prompt_rejection_names_the_surface_prompt_field(client, service, surface, param,
                                                               code):
    service.reject = (code, "refused")
    resp, out = await post(client, *SURFACES[surface][:2])
    assert_error(resp, out, 400, param=param)
    assert out["error"]["code"] == code


@pytest.mark.parametrize("surface", SURFACES)
async def test_budget_over_the_context_is_400_naming_the_field(client, service, surface):
    """Prompt tokens + an explicit budget over the context: refused, nothing submitted."""
    path, body, field = SURFACES[surface]
    prompt = 3 if surface != "completions" else 2            # the fake's prompts: [1, 2, 3] or "hi"
    resp, out = await post(client, path, {**body, field: 10**12})
    message = assert_error(resp, out, 400, anthropic=surface == "messages",
                           param=None if surface == "messages" else field)
    assert str(10**12) in message and "8192" in message, message
    fits = service.context_tokens - prompt
    resp, _ = await post(client, path, {**body, field: fits})          # exactly fits: accepted
    assert resp.status_code == 200 and service.submitted[-1][1].max_tokens == fits
    resp, out = await post(client, path, {**body, field: fits + 1})
    assert resp.status_code == 400
    assert len(service.submitted) == 1


async def test_chat_names_the_smaller_of_its_two_budget_fields(client, service):
    body = {"model": MODEL, "messages": USER, "max_tokens": 10**9, "max_completion_tokens": 10**12}
    resp, out = await post(client, "/v1/chat/completions", body)
    assert_error(resp, out, 400, param="max_tokens", contains="1000000000 in the completion")
    assert out["error"]["code"] == "context_length_exceeded"


async def test_an_omitted_budget_never_refuses_the_engine_clips_it(client, service):
    """A prompt that leaves less room than the default budget: omitted is accepted (the engine clips
    the default to what fits), the same budget given explicitly is refused."""
    body = {"model": MODEL, "prompt": [1] * (service.context_tokens - 10)}
    resp, _ = await post(client, "/v1/completions", body)
    assert resp.status_code == 200
    resp, out = await post(client, "/v1/completions", {**body, "max_tokens": service.default_max_tokens})
    assert_error(resp, out, 400, param="max_tokens")
    resp, out = await post(client, "/v1/completions", {"model": MODEL, "prompt": [1] * service.context_tokens})
    assert_error(resp, out, 400, param="prompt", contains="your prompt resulted in 8192 tokens")
