"""A per-step breakdown of the overlapped CUDA launcher (kernels/cuda/overlap.py), for the benches.

Off unless asked (``CudaStepLauncher.breakdown(True)``: two more events and a few clock reads a step).
Per step read back, on the device (CUDA events on the stream, recorded where the host enqueued them):

* ``forward``: the step's start event to its forward's end (staging, token feed, the graph);
* ``wait``: the forward's end to the sampling's start, where the stream had nothing to do until the
  host enqueued the sampling (a deferred step whose mask came late, or a host that enqueued it late),
  or, for a gated sampling (kernels/cuda/mask_gate.py), until the mask's thread opened its gate;
* ``sample``: the sampling, the mask upload and the ids' copy back (sampling start to end event);
* ``gap``: this step's start event after the previous step's end (the next forward enqueued late).

The device is busy for forward + sample of each step's forward + wait + sample + gap (the launcher's
own ``timing()`` counts the wait as busy: it spans start to end). On the host clock: ``launch`` (in
``launch()``), ``defer`` (forward enqueued to sampling enqueued, or to its gate opened), ``ids_wait`` (the reader's wait in
``ids()``), ``period`` (one launch to the next), and the thread that enqueued each sampling.
"""
from __future__ import annotations

import threading
import time
from collections import Counter

from kernels.cuda import driver


class StepMarks:
    """One launch's extra events and host times (None where not reached)."""
    __slots__ = ("fwd_end", "sample_start", "t_launch", "t_forward", "t_sample", "t_launched", "sampled_on",
                 "ids_wait")

    def __init__(self, fwd_end, sample_start, t_launch: float) -> None:
        self.fwd_end, self.sample_start = fwd_end, sample_start
        self.t_launch, self.t_forward = t_launch, None
        self.t_sample = self.t_launched = None
        self.sampled_on, self.ids_wait = "", 0.0


class StepTimeline:
    def __init__(self, ring: int) -> None:
        self._events = [(driver.Event(timing=True), driver.Event(timing=True)) for _ in range(ring)]
        self._next = 0
        self.reset()

    def reset(self) -> None:
        self.rows: dict[str, list[float]] = {k: [] for k in (
            "forward", "wait", "sample", "gap", "launch", "defer", "ids_wait", "period")}
        self.sampled_on: Counter = Counter()
        self._last_launch: float | None = None

    def begin(self) -> StepMarks:
        """At a launch's start (its start event is about to be recorded)."""
        fwd_end, sample_start = self._events[self._next]
        self._next = (self._next + 1) % len(self._events)
        now = time.perf_counter()
        if self._last_launch is not None:
            self.rows["period"].append(1e3 * (now - self._last_launch))
        self._last_launch = now
        return StepMarks(fwd_end, sample_start, now)

    def pause(self) -> None:
        self._last_launch = None

    @staticmethod
    def forward_enqueued(marks: StepMarks | None, stream) -> None:
        if marks is not None:
            marks.fwd_end.record(stream)
            marks.t_forward = time.perf_counter()

    @staticmethod
    def sample_enqueued(marks: StepMarks | None, stream) -> None:
        """Right before the sampling is enqueued (on whichever thread does it)."""
        if marks is not None:
            marks.sample_start.record(stream)
            marks.t_sample = time.perf_counter()
            marks.sampled_on = threading.current_thread().name

    @staticmethod
    def sample_start(marks: StepMarks | None, stream) -> None:
        """A gated sampling (kernels/cuda/mask_gate.py): the device's start, right after the stream's
        wait for the mask; its host time and thread are the gate's opening (``sample_released``)."""
        if marks is not None:
            marks.sample_start.record(stream)

    @staticmethod
    def sample_released(marks: StepMarks | None) -> None:
        if marks is not None:
            marks.t_sample = time.perf_counter()
            marks.sampled_on = threading.current_thread().name + " (gate)"

    @staticmethod
    def launched(marks: StepMarks | None) -> None:
        if marks is not None:
            marks.t_launched = time.perf_counter()

    def read(self, marks: StepMarks | None, start, end, gap_ms: float | None) -> None:
        """A step read back (its end event complete): its figures join the breakdown."""
        if marks is None or marks.t_forward is None or marks.t_sample is None:
            return
        r = self.rows
        r["forward"].append(marks.fwd_end.since(start))
        r["wait"].append(marks.sample_start.since(marks.fwd_end))
        r["sample"].append(end.since(marks.sample_start))
        if gap_ms is not None:
            r["gap"].append(gap_ms)
        if marks.t_launched is not None:
            r["launch"].append(1e3 * (marks.t_launched - marks.t_launch))
        r["defer"].append(1e3 * (marks.t_sample - marks.t_forward))
        r["ids_wait"].append(1e3 * marks.ids_wait)
        self.sampled_on[marks.sampled_on] += 1

    def summary(self) -> dict:
        """{name: (mean ms, p50 ms, p90 ms, n)} per figure, "busy_share" (forward + sample over the
        steps' whole device time) and "sampled_on" ({thread name: steps})."""
        out: dict = {}
        for k, v in self.rows.items():
            s = sorted(v)
            out[k] = ((sum(s) / len(s), s[len(s) // 2], s[min(len(s) - 1, (9 * len(s)) // 10)], len(s))
                      if s else (float("nan"),) * 3 + (0,))
        r = self.rows
        busy = sum(r["forward"]) + sum(r["sample"])
        total = busy + sum(r["wait"]) + sum(r["gap"])
        out["busy_share"] = busy / total if total > 0 else float("nan")
        out["sampled_on"] = dict(self.sampled_on)
        return out
