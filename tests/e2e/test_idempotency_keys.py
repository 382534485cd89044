"""Idempotency-Key on the four model surfaces through the official SDKs against a real `aotx serve`: a repeat is
the saved answer byte for byte (a stream: the same events) with `Idempotent-Replayed: true`; concurrent duplicates
cost one generation (the engine's request counter in /metrics); another body is a 422 in the surface's envelope;
another API key runs afresh. Sampling is not greedy here: a second generation would not give the same bytes."""
from __future__ import annotations

import asyncio
import re
import uuid

import anthropic
import httpx
import openai
import pytest


MODEL = "smollm2-135m-instruct"
ASK = [{"role": "user", "content": "Name a colour."}]
REPLAYED = "Idempotent-Replayed"
_COUNT = re.compile(r'^aotx_route_requests_total\{[^}]*\} (\d+)\.0$', re.M)   # prometheus_client writes 3.0


@pytest.fixture(scope="module")
def served(base_url):
    # the session's server: its xdist worker runs one module at a time, so the generation counter's
    # differences (all these tests read) are this module's own; tests/e2e/test_http_workers.py runs the
    # same tests against its `--http-workers 2` server
    return base_url


def generations(url: str) -> int:
    return sum(int(n) for n in _COUNT.findall(httpx.get(f"{url}/metrics", timeout=30).text))


def clients(url: str, api_key: str = "key-a"):
    return (openai.OpenAI(base_url=f"{url}/v1", api_key=api_key, max_retries=0, timeout=120),
            anthropic.Anthropic(base_url=url, api_key=api_key, max_retries=0, timeout=120))


def key() -> dict:
    return {"Idempotency-Key": f"k-{uuid.uuid4()}"}


# surface -> (buffered call, streamed call): each takes (openai client, anthropic client, headers, **extra)
def _chat(o, a, h, **x):
    r = o.chat.completions.with_raw_response.create(model=MODEL, messages=ASK, max_tokens=8, temperature=1.0,
                                                    extra_headers=h, **x)
    return r.headers, r.http_response.content


def _chat_s(o, a, h, **x):
    s = o.chat.completions.create(model=MODEL, messages=ASK, max_tokens=8, temperature=1.0, stream=True,
                                  extra_headers=h, **x)
    return s.response.headers, [c.model_dump_json() for c in s]


def _cmpl(o, a, h, **x):
    r = o.completions.with_raw_response.create(model=MODEL, prompt="Colours: red,", max_tokens=8, temperature=1.0,
                                               extra_headers=h, **x)
    return r.headers, r.http_response.content


def _cmpl_s(o, a, h, **x):
    s = o.completions.create(model=MODEL, prompt="Colours: red,", max_tokens=8, temperature=1.0, stream=True,
                             extra_headers=h, **x)
    return s.response.headers, [c.model_dump_json() for c in s]


def _msg(o, a, h, **x):
    r = a.messages.with_raw_response.create(model=MODEL, messages=ASK, max_tokens=8, extra_headers=h, **x)
    return r.headers, r.http_response.content


def _msg_s(o, a, h, **x):
    s = a.messages.create(model=MODEL, messages=ASK, max_tokens=8, stream=True, extra_headers=h, **x)
    return s.response.headers, [e.model_dump_json() for e in s]


def _resp(o, a, h, **x):
    r = o.responses.with_raw_response.create(model=MODEL, input="Name a colour.", max_output_tokens=8,
                                             temperature=1.0, extra_headers=h, **x)
    return r.headers, r.http_response.content


def _resp_s(o, a, h, **x):
    s = o.responses.create(model=MODEL, input="Name a colour.", max_output_tokens=8, temperature=1.0, stream=True,
                           extra_headers=h, **x)
    return s.response.headers, [e.model_dump_json() for e in s]


CALLS = {"chat": _chat, "chat-stream": _chat_s, "completions": _cmpl, "completions-stream": _cmpl_s,
         "messages": _msg, "messages-stream": _msg_s, "responses": _resp, "responses-stream": _resp_s}
OTHER = {"chat": {"top_p": 0.5}, "completions": {"top_p": 0.5}, "responses": {"top_p": 0.5},
         "messages": {"extra_body": {"top_k": 5}}}


@pytest.mark.parametrize("name", sorted(CALLS))
def test_a_repeat_is_the_saved_answer_with_the_replay_header(served, name):
    o, a = clients(served)
    call, h = CALLS[name], key()
    before = generations(served)
    first_headers, first = call(o, a, h)
    again_headers, again = call(o, a, h)
    assert again == first and first                   # bytes (buffered) / every event's data (stream)
    assert REPLAYED not in first_headers and again_headers[REPLAYED] == "true"
    assert again_headers["content-type"] == first_headers["content-type"]
    assert generations(served) == before + 1
    surface = name.removesuffix("-stream")
    error = anthropic.UnprocessableEntityError if surface == "messages" else openai.UnprocessableEntityError
    with pytest.raises(error) as refused:
        call(o, a, h, **OTHER[surface])
    body = refused.value.body
    if surface == "messages":
        assert refused.value.response.json()["type"] == "error"
    else:
        assert body["code"] == "idempotency_key_reused" and body["param"] == "Idempotency-Key"
    o2, a2 = clients(served, api_key="key-b")           # another API key: its own keys, a fresh run
    other_headers, _ = call(o2, a2, h)
    assert REPLAYED not in other_headers and generations(served) == before + 2


async def _twice(coro_fn):
    return await asyncio.gather(coro_fn(), coro_fn())


@pytest.mark.parametrize("stream", [False, True])
def test_concurrent_duplicates_share_one_generation_on_both_sdks(served, stream):
    oa = openai.AsyncOpenAI(base_url=f"{served}/v1", api_key="key-a", max_retries=0, timeout=120)
    aa = anthropic.AsyncAnthropic(base_url=served, api_key="key-a", max_retries=0, timeout=120)
    h1, h2 = key(), key()

    async def chat():
        if not stream:
            r = await oa.chat.completions.with_raw_response.create(model=MODEL, messages=ASK, max_tokens=24,
                                                                   temperature=1.0, extra_headers=h1)
            return r.headers.get(REPLAYED), r.http_response.content
        s = await oa.chat.completions.create(model=MODEL, messages=ASK, max_tokens=24, temperature=1.0,
                                             stream=True, extra_headers=h1)
        return s.response.headers.get(REPLAYED), [c.model_dump_json() async for c in s]

    async def message():
        if not stream:
            r = await aa.messages.with_raw_response.create(model=MODEL, messages=ASK, max_tokens=24, extra_headers=h2)
            return r.headers.get(REPLAYED), r.http_response.content
        s = await aa.messages.create(model=MODEL, messages=ASK, max_tokens=24, stream=True, extra_headers=h2)
        return s.response.headers.get(REPLAYED), [e.model_dump_json() async for e in s]

    for fn in (chat, message):
        before = generations(served)
        (r1, d1), (r2, d2) = asyncio.run(_twice(fn))
        assert d1 == d2 and d1
        assert sorted([r1 or "", r2 or ""]) == ["", "true"]      # one ran, the other followed or replayed it
        assert generations(served) == before + 1
