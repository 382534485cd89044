"""Engine counters and latency histograms; the step thread writes, anyone reads."""
from __future__ import annotations

import bisect
import threading
from collections import Counter
from dataclasses import dataclass, field

# Prometheus-style latency buckets, seconds (le=...; +Inf is implied by count)
TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0,
                2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
ITL_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
               0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0)


@dataclass(frozen=True)
class HistogramSnapshot:
    buckets: tuple[float, ...]     # upper bounds
    counts: tuple[int, ...]        # cumulative: observations <= buckets[i]
    sum: float
    count: int                     # all observations (the +Inf bucket)


class Histogram:
    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets = tuple(sorted(buckets))
        self._counts = [0] * len(self.buckets)
        self._sum = 0.0
        self._count = 0

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(self.buckets, value)
        if i < len(self._counts):
            self._counts[i] += 1
        self._sum += value
        self._count += 1

    def observe_all(self, values: list[float]) -> None:
        """``observe`` each of `values`, in order."""
        buckets, counts, left = self.buckets, self._counts, bisect.bisect_left
        n, total = len(counts), self._sum
        for value in values:
            i = left(buckets, value)
            if i < n:
                counts[i] += 1
            total += value
        self._sum = total
        self._count += len(values)

    def observe_times(self, value: float, times: int) -> None:
        """``observe(value)`` `times` times (the sum grows by value * times)."""
        i = bisect.bisect_left(self.buckets, value)
        if i < len(self._counts):
            self._counts[i] += times
        self._sum += value * times
        self._count += times

    def snapshot(self) -> HistogramSnapshot:
        cumulative, total = [], 0
        for c in self._counts:
            total += c
            cumulative.append(total)
        return HistogramSnapshot(self.buckets, tuple(cumulative), self._sum, self._count)


@dataclass(frozen=True)
class EngineStats:
    queue_depth: int                      # waiting (submitted, not yet admitted)
    running: int
    kv_pages_in_use: int
    kv_pages_total: int
    prompt_tokens_total: int              # prompt tokens run through the model
    generation_tokens_total: int          # tokens sampled
    requests_finished_total: dict[str, int] = field(default_factory=dict)  # by finish reason
    last_batch_width: int = 0             # decode rows in the latest step
    max_batch_width: int = 0              # most decode rows in any step so far
    steps_total: int = 0
    decode_rows_total: int = 0            # decode rows over all steps (mean width = / decode_steps_total)
    decode_steps_total: int = 0           # steps with at least one decode row
    # the device's busy time and the gaps between consecutive steps while work waited (the device
    # idle for the host): CUDA events on the overlapped CUDA launcher, the host clock elsewhere
    device_busy_s: float = 0.0
    device_idle_s: float = 0.0
    time_to_first_token: HistogramSnapshot = HistogramSnapshot(TTFT_BUCKETS, (0,) * len(TTFT_BUCKETS), 0.0, 0)
    inter_token_latency: HistogramSnapshot = HistogramSnapshot(ITL_BUCKETS, (0,) * len(ITL_BUCKETS), 0.0, 0)


class StatsCollector:
    """Thread-safe accumulation; `snapshot()` returns an immutable EngineStats."""

    def __init__(self, kv_pages_total: int) -> None:
        self._lock = threading.Lock()
        self._kv_total = kv_pages_total
        self._running = self._pages = 0
        self._prompt = self._gen = self._steps = 0
        self._last_width = self._max_width = 0
        self._decode_rows = self._decode_steps = 0
        self._finished: dict[str, int] = {}
        self._ttft = Histogram(TTFT_BUCKETS)
        self._itl = Histogram(ITL_BUCKETS)

    def set_gauges(self, running: int, pages_in_use: int) -> None:
        with self._lock:
            self._running, self._pages = running, pages_in_use

    def step(self, decode_rows: int, prompt_tokens: int) -> None:
        with self._lock:
            self._steps += 1
            self._prompt += prompt_tokens
            self._last_width = decode_rows
            self._decode_rows += decode_rows
            self._decode_steps += decode_rows > 0
            self._max_width = max(self._max_width, decode_rows)

    def token(self, ttft: float | None = None, itl: float | None = None) -> None:
        with self._lock:
            self._gen += 1
            if ttft is not None:
                self._ttft.observe(ttft)
            if itl is not None:
                self._itl.observe(itl)

    def tokens(self, ttfts: list[float], itls: list[float]) -> None:
        """One step's tokens at once: a first token's TTFT each, a later one's inter-token latency each."""
        if not ttfts and not itls:
            return
        with self._lock:
            self._gen += len(ttfts) + len(itls)
            self._ttft.observe_all(ttfts)
            self._itl.observe_all(itls)

    def tokens_at(self, now: float, ttfts: list[float], lasts: list[float]) -> None:
        """One step's tokens read at `now`: a first token's TTFT each, and for each later one the time of
        its sequence's token before (its inter-token latency is now - that). A steady batch's rows share a
        few such times (the steps before), so the ITLs are observed once per distinct time."""
        if not ttfts and not lasts:
            return
        grouped: object = ()
        if lasts:
            same = lasts.count(lasts[0])      # (a steady batch: every row's is the step before's time, one object)
            grouped = ((lasts[0], same),) if same == len(lasts) else Counter(lasts).items()
        with self._lock:
            self._gen += len(ttfts) + len(lasts)
            self._ttft.observe_all(ttfts)
            for last, times in grouped:
                self._itl.observe_times(now - last, times)

    def finished(self, reason: str) -> None:
        with self._lock:
            self._finished[reason] = self._finished.get(reason, 0) + 1

    def snapshot(self, queue_depth: int) -> EngineStats:
        with self._lock:
            return EngineStats(
                queue_depth=queue_depth, running=self._running,
                kv_pages_in_use=self._pages, kv_pages_total=self._kv_total,
                prompt_tokens_total=self._prompt, generation_tokens_total=self._gen,
                requests_finished_total=dict(self._finished),
                last_batch_width=self._last_width, max_batch_width=self._max_width,
                steps_total=self._steps,
                decode_rows_total=self._decode_rows, decode_steps_total=self._decode_steps,
                time_to_first_token=self._ttft.snapshot(),
                inter_token_latency=self._itl.snapshot(),
            )
