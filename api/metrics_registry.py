"""`/metrics` through prometheus_client: one registry per scrape over the live figures.

Collectors: the engine's counters, gauges and histograms and the route counters (EngineCollector, the
names /metrics always had), the request latency histograms by surface and lane (aotx.request_latency,
on the ModelService), the journal's appends, ack (fsync) latency, hold and replay progress
(aotx.runtime.journal_metrics, on the shared runtime's writer) and the process's own figures
(prometheus_client's process and platform collectors). A registry per scrape, not the global one: several
apps live in one test process, and each answers only for its own service and runtime. Rendered with
`generate_latest` in the 0.0.4 text format. Every label value comes from a fixed set.
"""
from __future__ import annotations

from typing import Any, Iterable

from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from aotx.route_metrics import LANES, SURFACES

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
FINISH_REASONS = ("stop", "length", "cancelled", "error")   # the engine's (aotx.engine.types.Delta)


def _histogram(name: str, doc: str, snap) -> HistogramMetricFamily:
    buckets = [(floatToGoString(b), c) for b, c in zip(snap.buckets, snap.counts)] + [("+Inf", snap.count)]
    return HistogramMetricFamily(name, doc, buckets=buckets, sum_value=snap.sum)


class EngineCollector:
    """The engine's figures and the route counters of one ModelService."""

    def __init__(self, service: Any) -> None:
        self.service = service

    def collect(self) -> Iterable[Metric]:
        routes, stats = self.service.routes.snapshot(), self.service.engine.stats()
        cells = CounterMetricFamily("aotx_route_requests_total", "Requests a wire surface handed to the engine, by lane.",
                                    labels=["surface", "lane"])
        for s in SURFACES:
            for lane in LANES:
                cells.add_metric([s, lane], routes[(s, lane)])
        yield cells
        yield CounterMetricFamily("aotx_prompt_tokens_total", "Prompt tokens run through the model.",
                                  value=stats.prompt_tokens_total)
        yield CounterMetricFamily("aotx_generation_tokens_total", "Tokens sampled.", value=stats.generation_tokens_total)
        finished = CounterMetricFamily("aotx_requests_finished_total", "Finished requests by finish reason.",
                                       labels=["reason"])
        for reason in FINISH_REASONS:   # a fixed set: an unexpected reason is counted as "error"
            finished.add_metric([reason], stats.requests_finished_total.get(reason, 0) + (
                sum(n for r, n in stats.requests_finished_total.items() if r not in FINISH_REASONS)
                if reason == "error" else 0))
        yield finished
        for name, doc, value in (
                ("aotx_queue_depth", "Requests waiting for admission.", stats.queue_depth),
                ("aotx_running_requests", "Requests being decoded.", stats.running),
                ("aotx_kv_pages_in_use", "KV pages owned by sequences.", stats.kv_pages_in_use),
                ("aotx_kv_pages_total", "KV pages in the pool.", stats.kv_pages_total),
                ("aotx_batch_width", "Decode rows in the latest step.", stats.last_batch_width),
                ("aotx_batch_width_max", "Most decode rows in one step.", stats.max_batch_width)):
            yield GaugeMetricFamily(name, doc, value=value)
        yield CounterMetricFamily("aotx_engine_steps_total", "Engine steps run.", value=stats.steps_total)
        yield CounterMetricFamily("aotx_decode_rows_total", "Decode rows over all steps.", value=stats.decode_rows_total)
        yield CounterMetricFamily("aotx_device_busy_seconds_total", "Device busy time.", value=stats.device_busy_s)
        yield _histogram("aotx_time_to_first_token_seconds", "Submission to first sampled token (engine clock).",
                         stats.time_to_first_token)
        yield _histogram("aotx_inter_token_latency_seconds", "Time between a request's tokens (engine clock).",
                         stats.inter_token_latency)


def journal_metrics(runtime: Any) -> Any:
    """The journal collector of a shared runtime (a GrantedRuntime's SharedRuntime), or None (a lone
    gateway's RemoteRuntime keeps no journal)."""
    inner = getattr(runtime, "runtime", runtime)
    return getattr(getattr(inner, "writer", None), "metrics", None)


def render_metrics(service: Any, runtime: Any = None) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(EngineCollector(service))
    for collector in (getattr(service, "latency", None), journal_metrics(runtime)):
        if collector is not None:
            registry.register(collector)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    return generate_latest(registry)
