"""The one-step-behind engine loop through the official openai SDK: a server started with
`--engine-overlap on` (numpy: a device thread, one step behind) against the suite's server (numpy's
default, the classic loop), request for request: the same text, finish reasons and usage, with stops, max_tokens, n > 1 and
several streams at once; a client that disconnects mid-step leaves nothing behind."""
from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from tests.conftest import SERVER_ARGS
from tests.server_process import ServerProcess
from tests.waiting import wait_until

MODEL = "smollm2-135m-instruct"
REQUESTS = [
    {"messages": [{"role": "user", "content": "What is the capital of France?"}], "temperature": 0,
     "max_tokens": 40},
    {"messages": [{"role": "user", "content": "Name three colours."}], "temperature": 0, "max_tokens": 9},
    {"messages": [{"role": "user", "content": "Write a word."}], "temperature": 0.9, "top_p": 0.95,
     "seed": 5, "max_tokens": 12, "n": 2},
    {"messages": [{"role": "user", "content": "What is the capital of France?"}], "temperature": 0,
     "max_tokens": 40, "stop": ["Paris"]},
]


@pytest.fixture(scope="module")
def behind_server():
    proc = ServerProcess(*SERVER_ARGS, "--engine-overlap", "on").start()
    try:
        yield proc
    finally:
        proc.stop()


async def _stream(client, body) -> tuple[dict, object]:
    stream = await client.chat.completions.create(model=MODEL, stream=True,
                                                  stream_options={"include_usage": True}, **body)
    texts, finishes, usage = {}, {}, None
    async for chunk in stream:
        if chunk.usage is not None:
            usage = chunk.usage
        for c in chunk.choices:
            texts[c.index] = texts.get(c.index, "") + (c.delta.content or "")
            if c.finish_reason:
                finishes[c.index] = c.finish_reason
    return {"texts": texts, "finishes": finishes}, usage


async def test_streams_match_the_classic_loop(async_openai_client, behind_server):
    behind = openai.AsyncOpenAI(base_url=f"{behind_server.base_url}/v1", api_key="any-key", max_retries=0,
                                timeout=120)
    results = {}
    for name, client in (("behind", behind), ("classic", async_openai_client)):
        results[name] = await asyncio.gather(*(_stream(client, body) for body in REQUESTS))
    for body, (got, usage), (want, usage_want) in zip(REQUESTS, results["behind"], results["classic"]):
        assert got == want, body
        assert usage.completion_tokens == usage_want.completion_tokens, body
        assert usage.prompt_tokens == usage_want.prompt_tokens
    (first, u0), (short, u1), (pair, _), (cut, _) = results["behind"]
    assert "Paris" in first["texts"][0]
    assert short["finishes"] == {0: "length"} and u1.completion_tokens == 9       # max_tokens exactly
    assert set(pair["texts"]) == {0, 1}
    assert cut["finishes"] == {0: "stop"} and first["texts"][0].startswith(cut["texts"][0])
    # buffered: the same answer and the same usage as the stream
    buffered = await behind.chat.completions.create(model=MODEL, **REQUESTS[1])
    assert buffered.choices[0].message.content == short["texts"][0]
    assert buffered.usage.completion_tokens == 9


def test_disconnect_mid_step_cancels_and_frees_pages(behind_server):
    base_url = behind_server.base_url
    before = httpx.get(f"{base_url}/v1/stats").json()["engine"]
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Write a very long story."}],
            "max_tokens": 1000, "stream": True, "temperature": 0}
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body, timeout=60) as r:
        for i, _ in enumerate(r.iter_lines()):
            if i > 6:
                break
    after = wait_until(lambda: httpx.get(f"{base_url}/v1/stats").json()["engine"],
                       "the disconnected request to be cancelled and its pages freed",
                       done=lambda st: st["finished"].get("cancelled", 0) > before["finished"].get("cancelled", 0)
                       and st["running"] == 0 and st["kv_pages_in_use"] == 0)
    assert after["generation_tokens_total"] - before["generation_tokens_total"] < 1000
