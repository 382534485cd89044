"""Structured-output params on every surface, parsed through the real blueprints (tape service):
what is accepted reaches the engine as a constraint; what cannot be enforced is a 400 naming it."""
from __future__ import annotations

import asyncio
import threading

import pytest

from aotx.structured import ConstraintCompiler
from tests.waiting import wait_until_async

from tests.api.fake_service import FakeService, make_app
from tests.api.test_requests import MODEL, USER, assert_error, post

PERSON = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"],
          "additionalProperties": False}
BAD = {"type": "object", "properties": {"when": {"type": "string", "format": "no-such-format"}}}
CHAT_TOOL = {"type": "function", "function": {"name": "f", "parameters": PERSON, "strict": True}}
RESP_TOOL = {"type": "function", "name": "f", "parameters": PERSON, "strict": True}
MSG_TOOL = {"name": "f", "input_schema": PERSON, "strict": True}


@pytest.fixture
def service():
    return FakeService()


@pytest.fixture
def client(service):
    return make_app(service).test_client()


CHAT = ("/v1/chat/completions", {"model": MODEL, "messages": USER})
COMP = ("/v1/completions", {"model": MODEL, "prompt": "hi"})
RESP = ("/v1/responses", {"model": MODEL, "input": "hi"})
MSGS = ("/v1/messages", {"model": MODEL, "messages": USER, "max_tokens": 8})


@pytest.mark.parametrize("where, extra, kind", [
    (CHAT, {"response_format": {"type": "json_object"}}, "json_object"),
    (CHAT, {"response_format": {"type": "json_schema",
                                "json_schema": {"name": "p", "schema": PERSON, "strict": True}}}, "json_schema"),
    (COMP, {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON}}},
     "json_schema"),
    (RESP, {"text": {"format": {"type": "json_schema", "name": "p", "schema": PERSON, "strict": True}}},
     "json_schema"),
    (RESP, {"text": {"format": {"type": "json_object"}}}, "json_object"),
    (MSGS, {"output_config": {"format": {"type": "json_schema", "schema": PERSON}}}, "json_schema"),
    (CHAT, {"tools": [CHAT_TOOL]}, "tool_call"),
    (CHAT, {"tools": [{**CHAT_TOOL, "function": {**CHAT_TOOL["function"], "strict": False}}],
            "tool_choice": "required"}, "tool_call"),
    (RESP, {"tools": [RESP_TOOL], "tool_choice": "auto"}, "tool_call"),
    (MSGS, {"tools": [MSG_TOOL], "tool_choice": {"type": "any"}}, "tool_call"),
    (CHAT, {"tools": [CHAT_TOOL], "response_format": {"type": "json_object"}}, "tool_call"),
])
async def test_accepted_modes_reach_the_engine_constrained(client, service, where, extra, kind):
    path, body = where
    resp, out = await post(client, path, {**body, **extra})
    assert resp.status_code == 200, out
    c = service.submitted[-1][1].constraint
    assert c is not None and c.kind == ("json_schema" if kind == "json_object" else kind)


@pytest.mark.parametrize("where, extra", [
    (CHAT, {}), (CHAT, {"response_format": {"type": "text"}}),
    (CHAT, {"tools": [{**CHAT_TOOL, "function": {**CHAT_TOOL["function"], "strict": False}}]}),
    (CHAT, {"tools": [CHAT_TOOL], "tool_choice": "none"}),
])
async def test_unconstrained_requests_stay_unconstrained(client, service, where, extra):
    path, body = where
    resp, out = await post(client, path, {**body, **extra})
    assert resp.status_code == 200, out
    assert service.submitted[-1][1].constraint is None


@pytest.mark.parametrize("where, extra, param", [
    (CHAT, {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": BAD}}},
     "response_format.json_schema.schema"),
    (CHAT, {"response_format": {"type": "json_schema", "json_schema": {"name": "p p", "schema": PERSON}}},
     "response_format.json_schema.name"),
    (CHAT, {"response_format": {"type": "grammar"}}, "response_format.type"),
    (CHAT, {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": PERSON,
                                                                       "strict": "yes"}}},
     "response_format.json_schema.strict"),
    (COMP, {"response_format": {"type": "json_schema", "json_schema": {"name": "p", "schema": BAD}}},
     "response_format.json_schema.schema"),
    (RESP, {"text": {"format": {"type": "json_schema", "name": "p", "schema": BAD}}}, "text.format.schema"),
    (RESP, {"text": {"format": {"type": "json_schema", "schema": PERSON}}}, "text.format.name"),
    (CHAT, {"tools": [{**CHAT_TOOL, "function": {**CHAT_TOOL["function"], "parameters": BAD}}]},
     "tools[0].function.parameters"),
    (RESP, {"tools": [{**RESP_TOOL, "parameters": BAD}]}, "tools[0].parameters"),
])
async def test_what_cannot_be_enforced_is_a_400_naming_it(client, service, where, extra, param):
    path, body = where
    resp, out = await post(client, path, {**body, **extra})
    assert_error(resp, out, 400, param=param)
    assert not service.submitted


@pytest.mark.parametrize("extra, words", [
    ({"output_config": {"format": {"type": "json_schema", "schema": BAD}}}, "output_config.format.schema"),
    ({"tools": [{**MSG_TOOL, "input_schema": BAD}]}, "tools[0].input_schema"),
    ({"output_config": {"format": {"type": "json_schema", "schema": PERSON}},
      "messages": USER + [{"role": "assistant", "content": "{"}]}, "prefill"),
])
async def test_messages_refusals_are_anthropic_400s(client, service, extra, words):
    path, body = MSGS
    resp, out = await post(client, path, {**body, **extra})
    assert_error(resp, out, 400, anthropic=True, contains=words)
    assert not service.submitted


async def test_responses_echo_the_text_format(client):
    fmt = {"type": "json_schema", "name": "p", "schema": PERSON, "strict": True}
    path, body = RESP
    resp, out = await post(client, path, {**body, "text": {"format": fmt}})
    assert resp.status_code == 200 and out["text"]["format"] == fmt


OPTIONAL = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
            "required": ["name"]}


async def test_responses_function_tools_are_strict_unless_strict_false(client, service):
    """OpenAI's function-calling guide: a Responses tool that omits `strict` is strict, its schema
    normalized (every property required, no additional ones); Chat stays non-strict; an explicit
    `strict: false` opts out."""
    path, body = RESP
    tool = {"type": "function", "name": "f", "parameters": OPTIONAL}
    resp, out = await post(client, path, {**body, "tools": [tool]})
    assert resp.status_code == 200, out
    c = service.submitted[-1][1].constraint
    assert c is not None and c.kind == "tool_call"
    echoed = out["tools"][0]
    assert echoed["strict"] is True
    assert echoed["parameters"]["required"] == ["name", "age"]
    assert echoed["parameters"]["additionalProperties"] is False
    resp, out = await post(client, path, {**body, "tools": [{**tool, "strict": False}]})
    assert resp.status_code == 200, out
    assert service.submitted[-1][1].constraint is None and out["tools"][0]["strict"] is False
    assert out["tools"][0]["parameters"] == OPTIONAL
    path, body = CHAT
    resp, out = await post(client, path, {**body, "tools": [{"type": "function", "function": {
        "name": "f", "parameters": OPTIONAL}}]})
    assert resp.status_code == 200, out
    assert service.submitted[-1][1].constraint is None


class GatedCompiler(ConstraintCompiler):
    """The real compiler whose builds wait at `gate`: a build on the event loop would hold it."""

    def __init__(self, tokenizer) -> None:
        super().__init__(tokenizer)
        self.entered, self.gate = threading.Event(), threading.Event()

    def _build(self, kind, digest, grammar):
        self.entered.set()
        assert self.gate.wait(timeout=30), "the compile held the event loop"
        return super()._build(kind, digest, grammar)


class GatedService(FakeService):
    def __init__(self, compiler) -> None:
        super().__init__()
        self._compiler = compiler

    @property
    def constraints(self):
        return self._compiler


async def test_a_schema_compiles_off_the_event_loop():
    """While a new schema compiles, the loop serves: a plain request completes before it."""
    from kernels import load_model_cached
    compiler = GatedCompiler(load_model_cached(progress=False).tokenizer)
    svc = GatedService(compiler)
    client = make_app(svc).test_client()
    path, body = CHAT
    fmt = {"type": "json_schema", "json_schema": {"name": "p", "schema": {**PERSON, "title": "gated"}}}
    slow = asyncio.create_task(post(client, path, {**body, "response_format": fmt}))
    await wait_until_async(compiler.entered.is_set, "the schema's compile to start")
    resp, out = await post(client, path, body)
    assert resp.status_code == 200, out
    assert not slow.done() and svc.submitted[-1][1].constraint is None
    compiler.gate.set()
    resp, out = await slow
    assert resp.status_code == 200, out
    assert svc.submitted[-1][1].constraint is not None
