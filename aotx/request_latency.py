"""Latency histograms of the requests a wire surface hands to the engine, by surface and lane.

TTFT (submission to the first token's delta on the caller's loop), inter-token latency (between a
request's tokens as the caller receives them), queue time (submission to the scheduler's first
admission: `Delta.queued_s`) and request duration (submission to the final delta). The label sets are
fixed (aotx.route_metrics SURFACES x LANES, every cell present from the start): no model name, key or
request id is ever a label, so two models or two keys add no series. In `aotx serve --http-workers N`
every generation is submitted to the main process's ModelService (aotx.engine_service), so these
histograms there cover the workers' requests too, and the main process answers /metrics.
"""
from __future__ import annotations

import time
from typing import Callable, Iterable

from prometheus_client import Histogram
from prometheus_client.metrics_core import Metric

from aotx.engine.stats import ITL_BUCKETS, TTFT_BUCKETS
from aotx.engine.types import Delta
from aotx.route_metrics import LANES, SURFACES

DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0)
LABELS = ("surface", "lane")


class RequestLatency:
    """The four histograms; `observer(surface, lane)` times one request from now (a RequestHandle's
    `observe`). A prometheus_client collector: `collect()` yields the metric families."""

    def __init__(self) -> None:
        def hist(name: str, doc: str, buckets) -> Histogram:
            return Histogram(name, doc, LABELS, buckets=buckets, registry=None)

        self.ttft = hist("aotx_request_time_to_first_token_seconds",
                         "Submission to the first token, as the surface receives it.", TTFT_BUCKETS)
        self.itl = hist("aotx_request_inter_token_latency_seconds",
                        "Time between a request's tokens, as the surface receives them.", ITL_BUCKETS)
        self.queue = hist("aotx_request_queue_seconds", "Submission to admission by the scheduler.", TTFT_BUCKETS)
        self.duration = hist("aotx_request_duration_seconds", "Submission to the request's last delta.",
                             DURATION_BUCKETS)
        for h in self._all():
            for s in SURFACES:
                for lane in LANES:
                    h.labels(s, lane)   # every cell exists (0) before its first request

    def _all(self) -> tuple[Histogram, ...]:
        return self.ttft, self.itl, self.queue, self.duration

    def observer(self, surface: str, lane: str) -> Callable[[Delta], None]:
        if surface not in SURFACES or lane not in LANES:
            raise ValueError(f"unknown route cell surface={surface!r} lane={lane!r}")
        ttft, itl, queue, duration = (h.labels(surface, lane) for h in self._all())
        began = time.monotonic()
        last: list[float | None] = [None]

        def on(delta: Delta) -> None:
            now = time.monotonic()
            if delta.queued_s is not None:
                queue.observe(max(0.0, delta.queued_s))
            if delta.token_ids:
                if last[0] is None:
                    ttft.observe(now - began)
                else:
                    gap = (now - last[0]) / len(delta.token_ids)
                    for _ in delta.token_ids:
                        itl.observe(gap)
                last[0] = now
            if delta.finish_reason is not None:
                duration.observe(now - began)
        return on

    def collect(self) -> Iterable[Metric]:
        for h in self._all():
            yield from h.collect()
