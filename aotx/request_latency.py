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

import threading
import time
from typing import Callable, Iterable

import numpy as np
from prometheus_client import Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample
from prometheus_client.utils import floatToGoString

from aotx.engine.stats import ITL_BUCKETS, TTFT_BUCKETS
from aotx.engine.types import Delta
from aotx.route_metrics import LANES, SURFACES

DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0, 320.0, 640.0)
LABELS = ("surface", "lane")


class LightHistogram(Histogram):
    """prometheus_client's Histogram with a cheap `observe` (the ITL cell takes one a streamed token on
    the caller's loop): the value is appended to a list (`add`, a bound list.append, for callers that
    hold it), and the list is folded into the bucket counts in bulk (numpy) when it grows past FOLD_AT
    values and before every scrape, instead of a linear bucket scan and two locked increments a value.
    Its samples are the parent's, built from those counts: the same exposition, `_created` included
    (tests/aotx/test_request_latency.py). Any thread may add; a fold takes the values present when it
    starts and deletes exactly those (a list's slice deletion is atomic), so none is lost or counted twice."""

    FOLD_AT = 4096

    def _metric_init(self) -> None:
        super()._metric_init()
        self._bounds = np.asarray(self._upper_bounds, dtype=np.float64)
        self._counts = np.zeros(len(self._bounds), dtype=np.int64)
        self._total = 0.0
        self._pending: list[float] = []
        self.add = self._pending.append
        self._lock = threading.Lock()      # one fold at a time
        self._le = tuple(floatToGoString(b) for b in self._upper_bounds)

    def observe(self, amount: float, exemplar=None) -> None:
        if exemplar is not None:
            raise ValueError("LightHistogram takes no exemplars")
        self._raise_if_not_observable()
        self._pending.append(float(amount))
        if len(self._pending) >= self.FOLD_AT:
            self.fold()

    def fold(self) -> None:
        """The values added so far, into the counts and the sum (in the order they came)."""
        with self._lock:
            pending = self._pending
            n = len(pending)
            if not n:
                return
            values = pending[:n]
            del pending[:n]
            where = np.searchsorted(self._bounds, values, side="left")   # the first bound >= value
            self._counts += np.bincount(where, minlength=len(self._bounds))[:len(self._bounds)]
            total = self._total
            for v in values:         # one addition a value, in order: the sum prometheus_client keeps
                total += v
            self._total = total

    def _child_samples(self) -> Iterable[Sample]:
        self.fold()
        with self._lock:
            counts, total = self._counts.tolist(), self._total
        samples, acc = [], 0.0
        for le, c in zip(self._le, counts):
            acc += c
            samples.append(Sample("_bucket", {"le": le}, acc, None, None))
        samples.append(Sample("_count", {}, acc, None, None))
        if self._upper_bounds[0] >= 0:
            samples.append(Sample("_sum", {}, total, None, None))
        created = super()._child_samples()[-1]   # the parent's own `_created` sample, where it writes one
        if created.name == "_created":
            samples.append(created)
        return tuple(samples)


class RequestLatency:
    """The four histograms; `observer(surface, lane)` times one request from now (a RequestHandle's
    `observe`). A prometheus_client collector: `collect()` yields the metric families."""

    def __init__(self) -> None:
        def hist(name: str, doc: str, buckets) -> Histogram:
            return LightHistogram(name, doc, LABELS, buckets=buckets, registry=None)

        self.ttft = hist("aotx_request_time_to_first_token_seconds",
                         "Submission to the first token, as the surface receives it.", TTFT_BUCKETS)
        self.itl = hist("aotx_request_inter_token_latency_seconds",
                        "Time between a request's tokens, as the surface receives them.", ITL_BUCKETS)
        self.queue = hist("aotx_request_queue_seconds", "Submission to admission by the scheduler.", TTFT_BUCKETS)
        self.duration = hist("aotx_request_duration_seconds", "Submission to the request's last delta.",
                             DURATION_BUCKETS)
        # every cell exists (0) before its first request; its four children are looked up here once, not by
        # `labels` (a lock and a dict lookup each) at every request's observer
        self._cells = {(s, lane): tuple(h.labels(s, lane) for h in self._all()) for s in SURFACES for lane in LANES}

    def _all(self) -> tuple[Histogram, ...]:
        return self.ttft, self.itl, self.queue, self.duration

    def observer(self, surface: str, lane: str) -> Callable[[Delta], None]:
        cell = self._cells.get((surface, lane))
        if cell is None:
            raise ValueError(f"unknown route cell surface={surface!r} lane={lane!r}")
        ttft, itl, queue, duration = cell
        began = time.monotonic()
        last: list[float | None] = [None]
        itl_add, itl_pending, fold_at, clock = itl.add, itl._pending, itl.FOLD_AT, time.monotonic

        def on(delta: Delta) -> None:
            now = clock()
            if delta.queued_s is not None:
                queue.observe(max(0.0, delta.queued_s))
            ids = delta.token_ids
            if ids:
                if last[0] is None:
                    ttft.observe(now - began)
                elif len(ids) == 1:    # a token a delta, the common case: one append
                    itl_add(now - last[0])
                    if len(itl_pending) >= fold_at:
                        itl.fold()
                else:
                    gap = (now - last[0]) / len(ids)
                    for _ in ids:
                        itl.observe(gap)
                last[0] = now
            if delta.finish_reason is not None:
                duration.observe(now - began)

        def plain() -> None:
            """A plain token's delta (RequestHandle.put_plain: one token, no queue time, not the last):
            what `on` does with it, without the Delta."""
            now = clock()
            if last[0] is None:
                ttft.observe(now - began)
            else:
                itl_add(now - last[0])
                if len(itl_pending) >= fold_at:
                    itl.fold()
            last[0] = now
        on.plain = plain   # type: ignore[attr-defined]
        return on

    def collect(self) -> Iterable[Metric]:
        for h in self._all():
            yield from h.collect()
