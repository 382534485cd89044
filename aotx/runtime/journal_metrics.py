"""The journal's figures for /metrics: appends and their ack latency (with `sync_always` the ack waits
for the log's fsync, so this is the fsync latency a client's "saved" waits on), append errors, the hold
and replay progress at boot. Fixed label sets: the append path (single / batch) and the hold reason.
A prometheus_client collector: `collect()` yields the metric families (api.metrics_registry)."""
from __future__ import annotations

import math
import time
from bisect import bisect_left
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

from prometheus_client import Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.metrics_core import Metric
from prometheus_client.utils import floatToGoString

from .hold import HoldStatus

PATHS = ("single", "batch")        # one message per append, or one atomic batch (aotx.runtime.batch_append)
HOLD_REASONS = ("full", "unavailable")
ACK_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class _PathFigures:
    """One append path's figures as plain numbers: what prometheus_client's Counter and Histogram children
    held (theirs take a lock and make ~8 Python calls an observation: ~17k instructions an ack, callgrind),
    exposed by `JournalMetrics.collect` sample for sample as those children exposed them."""

    __slots__ = ("appended", "errors", "buckets", "sum", "created")

    def __init__(self) -> None:
        self.appended, self.errors, self.sum = 0.0, 0.0, 0.0
        self.buckets = [0] * len(_BOUNDS)   # observations per bucket (not cumulative); the last is +Inf
        self.created = time.time()


_BOUNDS = (*ACK_BUCKETS, math.inf)
_LE = tuple(floatToGoString(b) for b in _BOUNDS)   # the `le` labels, as prometheus_client writes them
_APPENDED = ("aotx_journal_appended_messages", "Journal messages the log acknowledged, by append path.")
_ERRORS = ("aotx_journal_append_errors", "Appends (or batches) that failed or were refused.")
_ACK = ("aotx_journal_append_ack_seconds", "One append or one atomic batch to its ack (the log's fsync included).")


class JournalMetrics:
    def __init__(self, hold: HoldStatus, applied_seq: Callable[[], int]) -> None:
        self._hold, self._applied = hold, applied_seq
        self._paths = {path: _PathFigures() for path in PATHS}
        self.replayed = Gauge("aotx_journal_replay_messages", "Journal messages the boot replay has applied.",
                              registry=None)
        self.to_replay = Gauge("aotx_journal_replay_total_messages", "Journal messages the boot replay reads.",
                               registry=None)

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
        f = self._paths[path]
        took = time.perf_counter() - began
        f.buckets[bisect_left(_BOUNDS, took)] += 1   # the first bound >= took (Histogram.observe's bucket)
        f.sum += took
        f.appended += messages

    def failed(self, path: str) -> None:
        """One append (or batch) failed or was refused."""
        self._paths[path].errors += 1

    def appends_metric(self) -> Metric:
        return self._counter(_APPENDED, "appended")

    def errors_metric(self) -> Metric:
        return self._counter(_ERRORS, "errors")

    def _counter(self, what: tuple[str, str], field: str) -> Metric:
        name, doc = what
        m = Metric(name, doc, "counter")
        for path, f in self._paths.items():
            labels = {"path": path}
            m.add_sample(name + "_total", labels, float(getattr(f, field)))
            m.add_sample(name + "_created", dict(labels), f.created)
        return m

    def ack_metric(self) -> Metric:
        name, doc = _ACK
        m = Metric(name, doc, "histogram")
        for path, f in self._paths.items():
            total = 0
            for le, n in zip(_LE, f.buckets):
                total += n
                m.add_sample(name + "_bucket", {"path": path, "le": le}, float(total))
            m.add_sample(name + "_count", {"path": path}, float(total))
            m.add_sample(name + "_sum", {"path": path}, f.sum)
            m.add_sample(name + "_created", {"path": path}, f.created)
        return m

    def replay_progress(self, done: int, total: int) -> None:
        self.replayed.set(done)
        self.to_replay.set(total)

    def collect(self) -> Iterable[Metric]:
        yield self.appends_metric()
        yield self.errors_metric()
        yield self.ack_metric()
        for m in (self.replayed, self.to_replay):
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
