"""aotx.request_latency.LightHistogram: the same exposition as prometheus_client's Histogram."""
from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from aotx.engine.stats import ITL_BUCKETS
from aotx.request_latency import LightHistogram

# on a bound, between bounds, below the first, past the last, zero, negative, repeated
VALUES = [0.001, 0.0007, 0.0031, 0.0031, 2.5, 7.0, 0.0, -0.5, 0.2, 1e-9, 0.15000001]


def _text(kind, feed) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    hist = kind("aotx_x_seconds", "doc.", ("surface", "lane"), buckets=ITL_BUCKETS, registry=registry)
    for cell in (("chat", "stream"), ("chat", "buffered")):
        child = hist.labels(*cell)
        child._created = 1_700_000_000.25   # the two kinds' creation instants differ by construction
        feed(child)
    return generate_latest(registry)


def test_the_exposition_is_prometheus_clients():
    def each(child):
        for v in VALUES:
            child.observe(v)
    want = _text(Histogram, each)
    assert b'aotx_x_seconds_bucket{lane="stream",le="0.001",surface="chat"} 5.0' in want   # (a real count)
    assert _text(LightHistogram, each) == want


def test_added_values_and_folds_count_once(monkeypatch):
    monkeypatch.setattr(LightHistogram, "FOLD_AT", 3)   # several folds before the scrape's own

    def each(child):
        for v in VALUES * 3:
            child.observe(v)

    def add(child):
        for v in VALUES * 3:
            child.add(v)
            if len(child._pending) >= 5:
                child.fold()
    want = _text(Histogram, each)
    assert _text(LightHistogram, each) == want
    assert _text(LightHistogram, add) == want


def test_no_exemplars():
    hist = LightHistogram("aotx_y_seconds", "doc.", buckets=ITL_BUCKETS, registry=None)
    with pytest.raises(ValueError):
        hist.observe(0.1, {"trace": "1"})


def test_an_observer_counts_into_its_own_cell_and_an_unknown_cell_is_refused():
    from aotx.engine.types import Delta
    from aotx.request_latency import RequestLatency

    lat = RequestLatency()
    on = lat.observer("chat", "stream")
    on(Delta("a", token_ids=(1,), queued_s=0.01))
    on(Delta("b", token_ids=(2,)))
    on(Delta("", finish_reason="length", completion_tokens=2))
    counts = {}
    for family in lat.collect():
        for s in family.samples:
            if s.name.endswith("_count"):
                counts[(s.name, s.labels["surface"], s.labels["lane"])] = s.value
    for name in ("ttft", "queue", "duration"):
        cells = {k[1:]: v for k, v in counts.items() if name in k[0] or (name == "ttft" and "first_token" in k[0])}
        assert cells[("chat", "stream")] == 1 and sum(cells.values()) == 1, (name, cells)
    itl = {k[1:]: v for k, v in counts.items() if "inter_token" in k[0]}
    assert itl[("chat", "stream")] == 1 and sum(itl.values()) == 1
    with pytest.raises(ValueError):
        lat.observer("chat", "nowhere")
