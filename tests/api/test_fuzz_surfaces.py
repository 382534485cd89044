"""Fuzz the four surfaces' request parsers: any JSON body gets a 2xx or a precise 4xx
in the surface's native envelope — never a 500, never a framework error page — and every answer
is strict JSON (no NaN/Infinity) with a request id. What is sent includes what is not quite JSON:
NaN/Infinity literals, bodies nested far past the depth bound, numbers in non-ASCII digits."""
from __future__ import annotations

import asyncio
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aotx.strict_json import MAX_JSON_DEPTH
from tests.api.fake_service import FakeService, make_app

MODEL = "smollm2-135m-instruct"
PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens",
         "/v1/responses")
# str.isdigit() holds for each; none is an ASCII digit
NON_ASCII_DIGITS = "²³¹١٢٣１２３①②߁৪𝟏𝟐"
digit_strings = st.text(alphabet=st.sampled_from(NON_ASCII_DIGITS + "0123456789"), min_size=1, max_size=6)

# json.dumps writes float('nan') / float('inf') as the NaN / Infinity / -Infinity literals
scalars = st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats() \
    | st.text(max_size=12) | digit_strings
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
FIELDS = ["model", "messages", "prompt", "input", "max_tokens", "max_completion_tokens",
          "max_output_tokens", "temperature", "top_p", "top_k", "n", "seed", "stop", "stream",
          "stream_options", "logprobs", "top_logprobs", "echo", "tools", "tool_choice", "system",
          "stop_sequences", "instructions", "include", "response_format", "text", "metadata"]
# plausible bodies: the fields every surface reads, each with an arbitrary JSON value,
# starting from a valid request so that the fuzzer reaches the deeper checks
bodies = st.fixed_dictionaries(
    {"model": st.just(MODEL) | json_values},
    optional={name: json_values for name in FIELDS if name != "model"},
)
base_messages = [{"role": "user", "content": "hi"}]


def _nested_text(depth: int, shape: str, leaf: str) -> str:
    opens = {"array": ["["], "object": ['{"k": '], "mixed": ["[", '{"k": ']}[shape]
    closes = {"[": "]", '{"k": ': "}"}
    chain = [opens[k % len(opens)] for k in range(depth)]
    return "".join(chain) + leaf + "".join(closes[o] for o in reversed(chain))


# hostile value texts: nesting around and far past the depth bound (a thousand deep overflows a recursive
# decoder), non-finite literals, an overflowing number, numbers spelled with non-ASCII digits (not JSON)
hostile_values = st.one_of(
    st.builds(_nested_text, st.sampled_from([MAX_JSON_DEPTH - 2, MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH,
                                             MAX_JSON_DEPTH + 1, 200, 1000, 3000]) | st.integers(0, 5000),
              st.sampled_from(["array", "object", "mixed"]),
              st.sampled_from(["1", "NaN", "-Infinity", '"x"', "{}", "1e999"])),
    st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "-1e400", "[NaN]", '{"x": Infinity}']),
    digit_strings,
)


@st.composite
def raw_bodies(draw) -> bytes:
    """A plausible body (as `bodies`, seeded towards valid) with one hostile value spliced in as raw text:
    at a top-level field, or inside a field the surfaces echo or walk (metadata, a tool's schema)."""
    body = draw(bodies)
    body.setdefault("messages", base_messages)
    body.setdefault("prompt", "hi")
    body.setdefault("input", "hi")
    body["model"] = MODEL
    hole = '"__HOSTILE__"'
    where = draw(st.sampled_from(["field", "metadata", "chat_tool", "flat_tool", "anthropic_tool"]))
    if where == "field":
        body[draw(st.sampled_from(FIELDS[1:]))] = "__HOSTILE__"
    elif where == "metadata":
        body["metadata"] = {"note": "__HOSTILE__"}
    elif where == "chat_tool":
        body["tools"] = [{"type": "function", "function": {"name": "f", "parameters": {
            "type": "object", "properties": {"a": {"default": "__HOSTILE__"}}}}}]
    else:
        key = "parameters" if where == "flat_tool" else "input_schema"
        tool = {"type": "function", "name": "f"} if where == "flat_tool" else {"name": "f"}
        body["tools"] = [{**tool, key: {"type": "object", "properties": {"a": {"default": "__HOSTILE__"}}}}]
    return json.dumps(body).replace(hole, draw(hostile_values), 1).encode()


def _check(path: str, status: int, payload: object) -> None:
    assert status < 500, (path, status, payload)
    if status >= 400:
        assert isinstance(payload, dict), payload
        if path.startswith("/v1/messages"):
            assert payload["type"] == "error" and isinstance(payload["error"]["message"], str)
        else:
            err = payload["error"]
            assert isinstance(err["message"], str) and isinstance(err["type"], str)


def _strict(raw: bytes) -> object:
    def refuse(name: str):
        raise AssertionError(f"{name} written on the wire")
    return json.loads(raw, parse_constant=refuse)


async def _post(client, path: str, data: bytes):
    resp = await client.post(path, data=data, headers={"content-type": "application/json"})
    raw = await resp.get_data()
    assert resp.headers.get("x-request-id"), dict(resp.headers)
    if resp.mimetype == "text/event-stream":
        for line in raw.decode().splitlines():
            if line.startswith("data: ") and line != "data: [DONE]":
                _strict(line[6:].encode())
        return resp.status_code, None
    return resp.status_code, _strict(raw)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), body=bodies, seed_messages=st.booleans())
def test_any_json_body_gets_a_native_answer(path, body, seed_messages):
    if seed_messages:
        body.setdefault("messages", base_messages)
        body.setdefault("prompt", "hi")
        body.setdefault("input", "hi")
    app = make_app(FakeService())

    async def run():
        status, payload = await _post(app.test_client(), path, json.dumps(body).encode())
        _check(path, status, payload)

    asyncio.run(run())


@settings(max_examples=60, deadline=None)
@given(path=st.sampled_from(PATHS), data=st.binary(max_size=64))
def test_any_bytes_get_a_native_answer(path, data):
    app = make_app(FakeService())

    async def run():
        status, payload = await _post(app.test_client(), path, data)
        _check(path, status, payload)

    asyncio.run(run())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), data=raw_bodies())
def test_hostile_json_text_gets_a_native_answer(path, data):
    app = make_app(FakeService())

    async def run():
        status, payload = await _post(app.test_client(), path, data)
        _check(path, status, payload)

    asyncio.run(run())
