"""A multi-MB prompt never stalls the event loop: it is refused before it is tokenized when it cannot
fit the context (every token is at most the vocabulary's longest token in bytes), and what is
tokenized is tokenized off the loop. `/health` keeps answering fast meanwhile. Real server."""
from __future__ import annotations

import asyncio
import time

import httpx
import pytest

MODEL = "smollm2-135m-instruct"
HEALTH_BOUND = 1.0     # seconds: generous for the slow CI box; tokenizing on the loop stalls it 4-10 s


def _text(size: int) -> str:
    parts, n, i = [], 0, 0
    while n < size:
        sentence = f"The quick brown fox {i} jumps over the lazy dog number {i * 7 % 1000}. "
        parts.append(sentence)
        n += len(sentence)
        i += 1
    return "".join(parts)[:size]


BIG = _text(6 * 1024 * 1024)


def _requests(text: str) -> dict:
    user = [{"role": "user", "content": text}]
    return {
        "chat": ("/v1/chat/completions", {"model": MODEL, "messages": user, "max_tokens": 4}),
        "completions": ("/v1/completions", {"model": MODEL, "prompt": text, "max_tokens": 4}),
        "responses": ("/v1/responses", {"model": MODEL, "input": text, "max_output_tokens": 4}),
        "messages": ("/v1/messages", {"model": MODEL, "messages": user, "max_tokens": 4}),
        "count_tokens": ("/v1/messages/count_tokens", {"model": MODEL, "messages": user}),
    }


async def _health_while(base_url: str, path: str, body: dict) -> tuple[httpx.Response, list[float]]:
    """Send `body` and ping /health back to back until it is answered: (its answer, each ping's latency)."""
    async with httpx.AsyncClient(base_url=base_url, timeout=120) as big, \
            httpx.AsyncClient(base_url=base_url, timeout=120) as pings:
        task = asyncio.create_task(big.post(path, json=body))
        latencies: list[float] = []
        while not task.done() or not latencies:
            start = time.perf_counter()
            assert (await pings.get("/health")).status_code == 200
            latencies.append(time.perf_counter() - start)
        return await task, latencies


@pytest.mark.parametrize("surface", ["chat", "completions", "responses", "messages", "count_tokens"])
async def test_health_stays_fast_while_a_6_mb_prompt_is_refused(base_url, surface):
    path, body = _requests(BIG)[surface]
    resp, latencies = await _health_while(base_url, path, body)
    assert max(latencies) < HEALTH_BOUND, f"slowest /health {max(latencies):.3f} s of {len(latencies)}"
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert "context" in error["message"] or "too long" in error["message"], error


async def test_prompt_tokenized_off_the_loop_is_refused_exactly(base_url):
    """Below the cheap bound (so it is tokenized) but over the context: the exact count is refused."""
    text = _text(400 * 1024)
    path, body = _requests(text)["chat"]
    resp, latencies = await _health_while(base_url, path, body)
    assert max(latencies) < HEALTH_BOUND, f"slowest /health {max(latencies):.3f} s of {len(latencies)}"
    assert resp.status_code == 400, resp.text
    error = resp.json()["error"]
    assert error["param"] == "messages" and error["code"] == "context_length_exceeded", error
    assert "your messages resulted in" in error["message"] and "at least" not in error["message"], error
