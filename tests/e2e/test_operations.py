"""Operational routes, metrics, batching width and disconnect cancellation on the real server."""
from __future__ import annotations

import asyncio
import re

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.waiting import wait_until

MODEL = "smollm2-135m-instruct"
SURFACES = ("chat", "completions", "messages", "responses", "shared")  # shared: inputs of /aotx/v1/shared
LANES = ("buffered", "stream")


def test_models_and_health(openai_client, base_url):
    models = openai_client.models.list()
    assert [m.id for m in models.data] == [MODEL]
    assert httpx.get(f"{base_url}/health").json()["status"] == "ok"


def test_metrics_has_every_route_cell(base_url):
    text = httpx.get(f"{base_url}/metrics").text
    cells = {(m.labels["surface"], m.labels["lane"]) for f in text_string_to_metric_families(text)
             for m in f.samples if m.name == "aotx_route_requests_total"}
    assert cells == {(s, lane) for s in SURFACES for lane in LANES}
    for name in ("aotx_generation_tokens_total", "aotx_prompt_tokens_total", "aotx_queue_depth",
                 "aotx_kv_pages_in_use", "aotx_time_to_first_token_seconds_bucket",
                 "aotx_inter_token_latency_seconds_bucket"):
        assert re.search(rf"^{name}", text, re.M), name


def test_stats_json_mirrors_metrics(base_url):
    doc = httpx.get(f"{base_url}/v1/stats").json()
    assert set(doc["routes"]) == set(SURFACES)
    assert all(set(doc["routes"][s]) == set(LANES) for s in SURFACES)
    assert {"queue_depth", "kv_pages_in_use", "kv_pages_total"} <= set(doc["engine"])


def test_unknown_route_is_json_not_html(base_url):
    r = httpx.get(f"{base_url}/v1/nope")
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/json")
    assert "error" in r.json()
    r = httpx.get(f"{base_url}/v1/chat/completions")
    assert r.status_code == 405 and "error" in r.json()
    r = httpx.post(f"{base_url}/v1/chat/completions", content=b"{not json",
                   headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    r = httpx.post(f"{base_url}/v1/messages", content=b"{not json",
                   headers={"content-type": "application/json"})
    assert r.status_code == 400 and r.json()["type"] == "error"


async def test_sixteen_concurrent_streams_share_one_batch(async_openai_client, base_url):
    prompts = [f"Count from {i} to {i + 5}." for i in range(16)]

    async def one(p):
        stream = await async_openai_client.chat.completions.create(
            model=MODEL, messages=[{"role": "user", "content": p}], temperature=0, max_tokens=24,
            stream=True)
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    outs = await asyncio.gather(*(one(p) for p in prompts))
    assert all(outs)
    # each streamed answer equals the same request served alone
    alone = await async_openai_client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": prompts[3]}], temperature=0, max_tokens=24)
    assert outs[3] == alone.choices[0].message.content
    stats = httpx.get(f"{base_url}/v1/stats").json()["engine"]
    assert stats["max_batch_width"] >= 16


def test_client_disconnect_cancels(base_url):
    before = httpx.get(f"{base_url}/v1/stats").json()["engine"]
    body = {"model": MODEL, "messages": [{"role": "user", "content": "Write a very long story."}],
            "max_tokens": 2000, "stream": True}
    with httpx.stream("POST", f"{base_url}/v1/chat/completions", json=body, timeout=60) as r:
        for i, _ in enumerate(r.iter_lines()):
            if i > 3:
                break
    after = wait_until(lambda: httpx.get(f"{base_url}/v1/stats").json()["engine"],
                       "the disconnected request to be cancelled",
                       done=lambda st: st["finished"].get("cancelled", 0) > before["finished"].get("cancelled", 0)
                       and st["running"] == 0)
    assert after["generation_tokens_total"] - before["generation_tokens_total"] < 2000


def test_auto_backend_is_numpy_without_a_gpu(base_url):
    assert httpx.get(f"{base_url}/health").json()["backend"] == "numpy"
