"""The journal's figures for /metrics: appends and their ack latency (with `sync_always` the ack waits
for the log's fsync, so this is the fsync latency a client's "saved" waits on), append errors, the hold
and replay progress at boot. Fixed label sets: the append path (single / batch) and the hold reason.
A prometheus_client collector: `collect()` yields the metric families (api.metrics_registry)."""
from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric

from .hold import HoldStatus

PATHS = ("single", "batch")        # one message per append, or one atomic batch (aotx.runtime.batch_append)
HOLD_REASONS = ("full", "unavailable")
ACK_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class JournalMetrics:
    def __init__(self, hold: HoldStatus, applied_seq: Callable[[], int]) -> None:
        self._hold, self._applied = hold, applied_seq
        self.appends = Counter("aotx_journal_appended_messages", "Journal messages the log acknowledged, by append path.",
                               ("path",), registry=None)
        self.errors = Counter("aotx_journal_append_errors", "Appends (or batches) that failed or were refused.",
                              ("path",), registry=None)
        self.ack = Histogram("aotx_journal_append_ack_seconds",
                             "One append or one atomic batch to its ack (the log's fsync included).",
                             ("path",), buckets=ACK_BUCKETS, registry=None)
        self.replayed = Gauge("aotx_journal_replay_messages", "Journal messages the boot replay has applied.",
                              registry=None)
        self.to_replay = Gauge("aotx_journal_replay_total_messages", "Journal messages the boot replay reads.",
                               registry=None)
        # each path's children, looked up once (`labels()` costs ~3 µs a call: it was paid twice an append)
        self._children = {path: (self.appends.labels(path), self.errors.labels(path), self.ack.labels(path))
                          for path in PATHS}

    @contextmanager
    def timed(self, path: str, messages: int) -> Iterator[None]:
        """Around one append (or batch) of `messages`: its ack latency, or an error."""
        began = time.perf_counter()
        try:
            yield
        except Exception:   # failed or refused (counted, then raised on); a cancelled append is neither
            self.failed(path)
            raise
        self.acked(path, messages, began)

    def acked(self, path: str, messages: int, began: float) -> None:
        """One append (or batch) of `messages` acknowledged, sent at `began` (time.perf_counter())."""
        appends, _, ack = self._children[path]
        ack.observe(time.perf_counter() - began)
        appends.inc(messages)

    def failed(self, path: str) -> None:
        """One append (or batch) failed or was refused."""
        self._children[path][1].inc()

    def replay_progress(self, done: int, total: int) -> None:
        self.replayed.set(done)
        self.to_replay.set(total)

    def collect(self) -> Iterable[Metric]:
        for m in (self.appends, self.errors, self.ack, self.replayed, self.to_replay):
            yield from m.collect()
        h = self._hold
        active = GaugeMetricFamily("aotx_journal_hold", "1 while persistent admission is on hold, by reason.",
                                   labels=["reason"])
        for reason in HOLD_REASONS:
            active.add_metric([reason], 1.0 if h.reason == reason else 0.0)
        yield active
        yield CounterMetricFamily("aotx_journal_holds", "Holds begun since boot.", value=h.holds)
        yield GaugeMetricFamily("aotx_journal_pending_bytes", "Bytes a hold keeps waiting.", value=h.pending_bytes)
        yield GaugeMetricFamily("aotx_journal_applied_sequence", "The last stream sequence applied.",
                                value=self._applied())
