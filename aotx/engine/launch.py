"""Launchers: how a step reaches the backend, and how its sampled ids come back.

A step is launched with the ids of tokens it feeds from the step before it
still unknown to the host: ``prev_rows[t] >= 0`` says token ``t`` of the batch
is row ``prev_rows[t]`` of the previous launch's sampled ids (the "device"
resolves it; ``token_ids[t]`` is a placeholder there). ``launch`` returns a
handle; ``handle.ids()`` waits for the step and returns its sampled ids,
``handle.logits`` its logits (valid until the next launch on a device backend).

* ``InlineLauncher``: forward and sample run in ``launch`` itself (the engine's
  classic loop, and any backend without a device queue).
* ``ThreadLauncher``: a "device" thread runs the steps in order (numpy with
  ``overlap=True``: BLAS releases the GIL, so the host prepares step N+1 while
  step N computes; not numpy's default, slower on the 2-core CPU box).
* A backend may bring its own (``backend.step_launcher(force)``, e.g. CUDA:
  pinned staging, ids fed on the device, async copy and an event).
"""
from __future__ import annotations

import dataclasses
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from kernels.sampling_rows import SamplingRows
from kernels.step_batch import StepBatch
from kernels.token_mask import TokenMask

MaskArg = TokenMask | Callable[[], TokenMask] | None

log = logging.getLogger(__name__)
_NO_IDS = np.empty(0, dtype=np.int32)


class Launched(Protocol):
    logits: Any
    def ids(self) -> np.ndarray: ...


class Launcher(Protocol):
    overlaps: bool          # launch returns before the step has run
    # mask: the constrained rows' bitmasks (kernels/token_mask.py), or a callable returning them that
    # the launcher calls once the forward is on its way and before sampling (aotx.engine.masks: it
    # may wait for the previous launch's ids); None when no row is constrained. A callable with a true
    # `deferred` is computed on another thread (aotx.engine.mask_worker): launch returns without
    # waiting for it, and an overlapping launcher samples once it is ready (the device thread waits
    # for it; CUDA enqueues the sampling at the next launch or when the ids are read)
    def launch(self, batch: StepBatch, prev_rows: np.ndarray | None, sample_rows: np.ndarray,
               sampling: SamplingRows, mask: MaskArg = None) -> Launched: ...
    def pause(self) -> None: ...        # no work until the next launch: that wait is not a gap
    def timing(self) -> dict: ...       # {"steps", "busy_s", "idle_s", "busy_share"} since reset
    def close(self) -> None: ...


class DeviceClock:
    """Device-busy accounting on the host clock: each step's run time, and the gaps between one
    step's end and the next one's start while work was waiting (the device idle for the host)."""

    def __init__(self) -> None:
        self.reset_timing()

    def reset_timing(self) -> None:
        self.steps, self.busy, self.idle = 0, 0.0, 0.0
        self._last_end: float | None = None

    def pause(self) -> None:
        self._last_end = None

    def ran(self, start: float, end: float) -> None:
        self.steps += 1
        self.busy += end - start
        if self._last_end is not None:
            self.idle += max(0.0, start - self._last_end)
        self._last_end = end

    def timing(self) -> dict:
        total = self.busy + self.idle
        return {"steps": self.steps, "busy_s": self.busy, "idle_s": self.idle,
                "busy_share": self.busy / total if total > 0 else float("nan")}


class DependencyFailed(RuntimeError):
    """The step this one takes token ids from failed: this one cannot run either."""


def resolve_tokens(batch: StepBatch, prev_rows: np.ndarray | None, prev_ids: np.ndarray | None) -> StepBatch:
    """The batch with every placeholder replaced by the previous step's sampled id it names."""
    if prev_rows is None:
        return batch
    mask = prev_rows >= 0
    if not mask.any():
        return batch
    if prev_ids is None:
        raise DependencyFailed("the step that sampled this step's input tokens failed")
    tokens = batch.token_ids.copy()
    tokens[mask] = prev_ids[prev_rows[mask]]
    return dataclasses.replace(batch, token_ids=tokens)


def run_step(backend, batch: StepBatch, sample_rows: np.ndarray, sampling: SamplingRows,
             mask: MaskArg = None):
    """forward, then (the constrained rows masked: kernels/token_mask.py) sample the rows asked
    for: (logits, int32 ids). The logits returned stay unmasked (logprobs read them). ``batch`` has
    its placeholders resolved, so a row's pending output token (penalties) is read from it here."""
    if sampling.adjust is not None:
        sampling = dataclasses.replace(sampling, adjust=sampling.adjust.resolved(batch.token_ids))
    logits = backend.forward(batch)
    if not len(sample_rows):
        return logits, _NO_IDS
    whole = len(sample_rows) == logits.shape[0] and bool((sample_rows == np.arange(len(sample_rows))).all())
    sub = logits if whole else logits[sample_rows]
    if mask is not None:
        sub = backend.masked_logits(sub, mask() if callable(mask) else mask)
    return logits, np.asarray(backend.sample(sub, sampling), dtype=np.int32)


class Done:
    """A launch that has already run."""

    def __init__(self, logits: Any, ids: np.ndarray) -> None:
        self.logits = logits
        self._ids = ids

    def ids(self) -> np.ndarray:
        return self._ids


class InlineLauncher(DeviceClock):
    overlaps = False

    def __init__(self, backend) -> None:
        super().__init__()
        self.backend = backend
        self._last: np.ndarray | None = _NO_IDS

    def launch(self, batch, prev_rows, sample_rows, sampling, mask=None) -> Done:
        start = time.perf_counter()
        try:
            batch = resolve_tokens(batch, prev_rows, self._last)
            logits, ids = run_step(self.backend, batch, sample_rows, sampling, mask)
        except BaseException:
            self._last = None
            raise
        self.ran(start, time.perf_counter())
        self._last = ids
        return Done(logits, ids)

    def close(self) -> None:
        pass


class _Job:
    def __init__(self, batch, prev_rows, sample_rows, sampling, mask) -> None:
        self.args = (batch, prev_rows, sample_rows, sampling, mask)
        self.logits: Any = None
        self._ids: np.ndarray | None = None
        self._error: BaseException | None = None
        self._done = threading.Event()

    def ids(self) -> np.ndarray:
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._ids is not None
        return self._ids


class ThreadLauncher(DeviceClock):
    """Steps run in launch order on one "device" thread; launch returns at once."""
    overlaps = True

    def __init__(self, backend) -> None:
        super().__init__()
        self.backend = backend
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="aotx-device", daemon=True)
        self._thread.start()

    def launch(self, batch, prev_rows, sample_rows, sampling, mask=None) -> _Job:
        # a late mask reads the step before's ids (it waits for that job): here, on the engine's thread,
        # unless the mask worker computes it (`deferred`): then the device thread waits for it after
        # the forward
        if callable(mask) and not getattr(mask, "deferred", False):
            mask = mask()
        job = _Job(batch, prev_rows, sample_rows, sampling, mask)
        self._jobs.put(job)
        return job

    def close(self) -> None:
        self._jobs.put(None)
        self._thread.join()

    def _run(self) -> None:
        last: np.ndarray | None = _NO_IDS
        while (job := self._jobs.get()) is not None:
            batch, prev_rows, sample_rows, sampling, mask = job.args
            try:
                start = time.perf_counter()
                job.logits, job._ids = run_step(self.backend, resolve_tokens(batch, prev_rows, last),
                                                sample_rows, sampling, mask)
                self.ran(start, time.perf_counter())   # (read on the engine thread: floats, under the GIL)
                last = job._ids
            except BaseException as exc:  # handed to whoever waits on this step (the engine ends it)
                last, job._error = None, exc
            job.args = None
            job._done.set()


def make_launcher(backend, overlap: bool | None) -> Launcher:
    """overlap None: the backend's choice (its own overlapping launcher where it offers one by
    default, else inline: the classic loop); True: one step behind (the backend's own
    launcher if it has one, else a device thread); False: inline, the classic loop."""
    own = getattr(backend, "step_launcher", None)
    if overlap is False:
        return InlineLauncher(backend)
    if callable(own):
        native = own(force=bool(overlap))
        if native is not None:
            return native
    # numpy by default stays inline: measured on the 2-core CPU box, 16 streams, the device thread
    # decodes at ~90 tok/s against ~145 inline (threads contend with BLAS for the cores)
    return ThreadLauncher(backend) if overlap else InlineLauncher(backend)
