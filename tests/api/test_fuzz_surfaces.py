"""Fuzz the four surfaces' request parsers: any JSON body gets a 2xx or a precise 4xx
in the surface's native envelope — never a 500, never a framework error page."""
from __future__ import annotations

import asyncio
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.fake_service import FakeService, make_app

MODEL = "smollm2-135m-instruct"
PATHS = ("/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/messages/count_tokens",
         "/v1/responses")

scalars = st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.floats(allow_nan=False) \
    | st.text(max_size=12)
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


def _check(path: str, status: int, payload: object) -> None:
    assert status < 500, (path, status, payload)
    if status >= 400:
        assert isinstance(payload, dict), payload
        if path.startswith("/v1/messages"):
            assert payload["type"] == "error" and isinstance(payload["error"]["message"], str)
        else:
            err = payload["error"]
            assert isinstance(err["message"], str) and isinstance(err["type"], str)


async def _post(client, path: str, data: bytes):
    resp = await client.post(path, data=data, headers={"content-type": "application/json"})
    raw = await resp.get_data()
    if resp.mimetype == "text/event-stream":
        return resp.status_code, None
    return resp.status_code, json.loads(raw)


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
