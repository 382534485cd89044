"""/metrics by the book: prometheus_client's own parser reads it; a request moves the request latency
histograms of its surface and lane (TTFT, inter-token latency, queue time, duration); a shared mutation
moves the journal's appends and ack (fsync) latency; and the label sets are fixed: other models, keys or
request ids add no series."""
from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.ops.client import SharedClient

MODEL = "smollm2-135m-instruct"
REQUEST_HISTOGRAMS = ("aotx_request_time_to_first_token_seconds", "aotx_request_inter_token_latency_seconds",
                      "aotx_request_queue_seconds", "aotx_request_duration_seconds")


def _scrape(url: str) -> dict[tuple[str, tuple], float]:
    r = httpx.get(f"{url}/metrics", timeout=30)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(r.text) for s in family.samples}


def _count(samples, name: str, **labels) -> float:
    return samples[(f"{name}_count", tuple(sorted(labels.items())))]


def test_a_request_moves_its_surface_and_lanes_histograms(server):
    before = _scrape(server.base_url)
    with httpx.stream("POST", f"{server.base_url}/v1/chat/completions", timeout=120,
                      json={"model": MODEL, "max_tokens": 6, "stream": True,
                            "messages": [{"role": "user", "content": "Say hello."}]}) as r:
        assert r.status_code == 200
        r.read()
    after = _scrape(server.base_url)
    cell = {"surface": "chat", "lane": "stream"}
    for name in ("aotx_request_time_to_first_token_seconds", "aotx_request_queue_seconds",
                 "aotx_request_duration_seconds"):
        assert _count(after, name, **cell) == _count(before, name, **cell) + 1, name
    assert _count(after, "aotx_request_inter_token_latency_seconds", **cell) > \
        _count(before, "aotx_request_inter_token_latency_seconds", **cell)
    other = {"surface": "messages", "lane": "buffered"}
    assert _count(after, "aotx_request_duration_seconds", **other) == _count(before, "aotx_request_duration_seconds", **other)
    inf = ("aotx_request_duration_seconds_bucket", tuple(sorted({**cell, "le": "+Inf"}.items())))
    assert after[inf] == _count(after, "aotx_request_duration_seconds", **cell)
    key = ("aotx_route_requests_total", tuple(sorted(cell.items())))
    assert after[key] == before[key] + 1
    assert after[("aotx_time_to_first_token_seconds_count", ())] > before[("aotx_time_to_first_token_seconds_count", ())]


def test_a_shared_mutation_moves_the_journal_figures(server):
    before = _scrape(server.base_url)
    alice = SharedClient.fresh_keys(server.base_url, (server.var / "tokens" / "alice").read_text().strip())
    try:
        if not alice.sync()["registered"]:
            assert alice.post("/participant")[0] == 201
            alice.sync()
        assert alice.post("/spaces")[0] == 201
    finally:
        alice.close()
    after = _scrape(server.base_url)
    appended = sum(after[("aotx_journal_appended_messages_total", (("path", p),))] -
                   before[("aotx_journal_appended_messages_total", (("path", p),))] for p in ("single", "batch"))
    acks = sum(after[("aotx_journal_append_ack_seconds_count", (("path", p),))] -
               before[("aotx_journal_append_ack_seconds_count", (("path", p),))] for p in ("single", "batch"))
    assert appended >= 1 and acks >= 1
    assert after[("aotx_journal_applied_sequence", ())] > before[("aotx_journal_applied_sequence", ())]
    assert after[("aotx_journal_hold", (("reason", "full"),))] == 0
    assert after[("aotx_journal_replay_messages", ())] == after[("aotx_journal_replay_total_messages", ())]


def test_models_keys_and_request_ids_add_no_series(server):
    series = set(_scrape(server.base_url))
    for key, model, rid in (("key-one", MODEL, "rid-one"), ("key-two", "another-model", "rid-two"),
                            ("key-three", MODEL + "-x", "rid-three")):
        r = httpx.post(f"{server.base_url}/v1/chat/completions", timeout=120,
                       headers={"Authorization": f"Bearer {key}", "x-request-id": rid},
                       json={"model": model, "max_tokens": 2, "messages": [{"role": "user", "content": "Hi"}]})
        assert r.status_code in (200, 404), r.text
    text = httpx.get(f"{server.base_url}/metrics", timeout=30).text
    assert set(_scrape(server.base_url)) == series
    for value in ("key-one", "key-two", "another-model", "rid-one", MODEL):
        assert value not in text


def test_the_grafana_dashboard_reads_only_metrics_that_exist(server):
    import json
    import re
    from pathlib import Path

    doc = json.loads((Path(__file__).parents[2] / "docs" / "grafana" / "aotx.json").read_text())
    exprs = [t["expr"] for p in doc["panels"] for t in p["targets"]]
    used = {m for e in exprs for m in re.findall(r"\baotx_[a-z_]+", e)}
    served = {name for name, _ in _scrape(server.base_url)}
    assert used and used <= served, used - served
    histograms = {m[:-len("_bucket")] for m in used if m.endswith("_bucket")}
    assert set(REQUEST_HISTOGRAMS) <= histograms and "aotx_journal_append_ack_seconds" in histograms
