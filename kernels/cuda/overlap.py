"""CudaStepLauncher: steps enqueued on the GPU's stream without waiting for the one before.

Per launch, on the one stream, in order: the step's host arrays staged from pinned memory (two
arenas, alternating per launch, so a copy still queued never reads memory the host is filling),
the previous step's sampled ids copied on the device into this step's token slots (``prev_rows``;
one device-to-device copy per run of consecutive rows), the forward pass (CUDA graph for decode),
the sampling kernel, an async copy of the ids into pinned memory, and a timing event. ``ids()``
waits on that event only. A step whose token mask is computed on another thread (a callable mask
with a true ``deferred``: aotx.engine.mask_worker) has its forward enqueued and its sampling, read-back
and end event deferred (``flush``): to the moment its mask is filled, on the thread that filled it
(the mask worker: ``mask.when_ready``, so the GPU samples as soon as the mask exists, not after the
engine thread's delivery and build; ``AOTX_SAMPLE_ON_WORKER=0`` turns that off), or else to the start
of the next launch (before its staging and forward, which reads these ids) or to the first ``ids()`` on
the launching thread, whichever comes first. So the launching thread never waits for a mask while the
GPU has the forward to run. Launches and enqueued samplings hold the launcher's lock (one thread on
the stream and the staging at a time). Where the device can wait on host memory (the default;
``AOTX_MASK_GATE=0`` off), such a step is not deferred at all: its whole sampling is enqueued at the
launch behind a gate that the mask's thread opens with one store once the bits are written
(kernels/cuda/mask_gate.py: no driver call, hence no GIL hand-over, on the mask's thread).
Where a step must reallocate the backend's buffers (more tokens or rows
than they hold), the previous step's ids are read back first and the tokens filled on the host.

``timing()``: GPU-busy milliseconds (each step from its start event to its end event; a start
event fires when the stream reaches it, so a host that is late shows up as a gap; a deferred sampling
enqueued late is inside a step, and counts as busy) and the gaps between consecutive steps, since
``reset_timing()``. ``breakdown(True)``: the per-step figures of kernels/cuda/step_timing.py as well.
"""
from __future__ import annotations

import os
import threading
import time

import numpy as np

from kernels.cuda import driver
from kernels.cuda.copy_runs import runs
from kernels.cuda.mask_gate import GatedBits, available, wanted
from kernels.cuda.step_timing import StepTimeline

ALIGN = 64


def _feeder(copies: list[tuple[int, int, int]], src: int, stream):
    """The ``patch`` for ``forward``: copy the previous step's ids (``src``, int32) into the staged
    token slots, one device-to-device copy per run."""
    def patch(p: dict[str, int]) -> None:
        for t, r, n in copies:
            driver.dtod(p["tokens"] + 4 * t, src + 4 * r, 4 * n, stream)
    return patch


class _Arena:
    def __init__(self, nbytes: int) -> None:
        self.buf = driver.Pinned(nbytes)
        self.used = 0
        self.last: "_Handle | None" = None     # the launch that staged here last


class Staging:
    """Pinned staging for host->device copies: the backend's ``_htod`` goes through ``htod``."""

    def __init__(self, dev: driver.Device, nbytes: int) -> None:
        self.dev = dev
        self.arenas = [_Arena(nbytes), _Arena(nbytes)]
        self.i = 0

    @property
    def arena(self) -> _Arena:
        return self.arenas[self.i]

    def begin(self) -> None:
        """A new launch takes the other arena, once the launch that used it last has finished."""
        self.i ^= 1
        if self.arena.last is not None:
            self.arena.last.drain()
        self.arena.used, self.arena.last = 0, None

    def reserve(self, nbytes: int) -> tuple[int, int]:
        """(address, offset) of ``nbytes`` in the current arena."""
        off = -(-self.arena.used // ALIGN) * ALIGN
        if off + nbytes > self.arena.buf.nbytes:
            self._grow(off + nbytes)
            off = -(-self.arena.used // ALIGN) * ALIGN
        self.arena.used = off + nbytes
        return self.arena.buf.ptr + off, off

    def htod(self, dst: int, host: np.ndarray) -> None:
        raw = np.ascontiguousarray(host).view(np.uint8).ravel()
        addr, off = self.reserve(raw.nbytes)
        self.arena.buf.view(np.uint8, raw.nbytes, off)[:] = raw
        driver.htod_pinned(dst, addr, raw.nbytes, self.dev.stream)

    def _grow(self, need: int) -> None:
        """Bigger arenas: wait for the stream (every copy queued from the old ones has run) and read
        the ids an earlier launch left in them before they go."""
        self.dev.synchronize()
        size = max(need, 2 * self.arena.buf.nbytes)
        for a in self.arenas:
            if a.last is not None and a.last.enqueued.is_set():   # (a deferred one has no ids there yet)
                a.last.drain()
            a.buf.free()
            a.buf = driver.Pinned(size)
            a.used = 0

    def close(self) -> None:
        self.dev.synchronize()
        for a in self.arenas:
            a.buf.free()


class _Handle:
    def __init__(self, launcher: "CudaStepLauncher", logits, n: int, offset: int, arena: _Arena,
                 start: driver.Event, end: driver.Event) -> None:
        self.launcher, self.logits, self.n, self.offset, self.arena = launcher, logits, n, offset, arena
        self.start, self.end = start, end
        self._ids: np.ndarray | None = None
        self._lock = threading.Lock()   # read by the engine thread and by its mask worker
        self.enqueued = threading.Event()   # the sampling, read-back and end event are on the stream
        self.error: BaseException | None = None   # a deferred sampling that could not be enqueued
        self.marks = None                   # kernels.cuda.step_timing.StepMarks, with a breakdown on

    def drain(self) -> None:
        """The stream is past this launch's use of its staging arena."""
        if self.enqueued.is_set() and self.error is None:
            self.ids()
        else:
            self.launcher.backend.dev.synchronize()

    def ids(self) -> np.ndarray:
        if self._ids is None:
            if not self.enqueued.is_set():
                if threading.get_ident() == self.launcher.owner:
                    self.launcher.flush()      # its deferred sampling, now
                else:
                    self.enqueued.wait()       # (another thread reads only launches already flushed)
            if self.error is not None:
                raise self.error
            if not self.enqueued.is_set():
                raise RuntimeError("this step's sampling was never enqueued")
            with self._lock:
                if self._ids is None:
                    self.launcher.backend.dev.make_current()   # (a no-op on the engine thread)
                    waited = time.perf_counter()
                    self.end.synchronize()
                    if self.marks is not None:
                        self.marks.ids_wait = time.perf_counter() - waited
                    if self.error is not None:    # a gated mask that failed (set before its gate opened)
                        raise self.error
                    ids = self.arena.buf.view(np.int32, self.n, self.offset).copy()
                    self.launcher._account(self)
                    self._ids = ids
        return self._ids


class CudaStepLauncher:
    overlaps = True
    EVENTS = 8          # (start, end) pairs reused round-robin: at most two launches are unread

    def __init__(self, backend) -> None:
        self.backend = backend
        backend.dev.make_current()
        self.staging = Staging(backend.dev, 4 * backend.ints_cap + backend.r_cap * 40 + 4096)
        backend.staging = self.staging
        self._events = [(driver.Event(timing=True), driver.Event(timing=True)) for _ in range(self.EVENTS)]
        self._next_event = 0
        self._prev: _Handle | None = None
        self._prev_failed = False
        self._deferred: tuple | None = None     # (handle, logits rows, sampling, mask, the mask's thread samples it)
        self.owner = threading.get_ident()      # the launching thread (the engine's; set per launch)
        self._lock = threading.RLock()          # the stream, the staging, _deferred: launch and flush
        # a deferred sampling is enqueued by the thread that fills its mask, once it is filled
        self.sample_on_worker = os.environ.get("AOTX_SAMPLE_ON_WORKER", "1") != "0"
        # or, better, enqueued at the launch behind a gate the mask's thread opens (None: not here)
        self.gate = available(backend.dev.stream) if wanted(backend) else None
        self.gated = self.gate is not None
        self.timeline: StepTimeline | None = None
        self.reset_timing()

    def breakdown(self, on: bool = True) -> None:
        """Record the per-step breakdown (kernels/cuda/step_timing.py) from the next launch on."""
        self.timeline = StepTimeline(self.EVENTS) if on else None

    def launch(self, batch, prev_rows, sample_rows, sampling, mask=None) -> _Handle:
        self._await_worker()
        with self._lock:
            return self._launch(batch, prev_rows, sample_rows, sampling, mask)

    def _launch(self, batch, prev_rows, sample_rows, sampling, mask) -> _Handle:
        be = self.backend
        stream = be.dev.stream
        be.dev.make_current()
        self.owner = threading.get_ident()
        self.flush()        # the previous launch's deferred sampling first: this forward reads its ids
        placeholders = prev_rows is not None and bool((prev_rows >= 0).any())
        if placeholders and self._prev_failed:
            raise RuntimeError("the step that sampled this step's input tokens failed")
        try:
            patch = None
            if placeholders:
                if batch.num_tokens > be.t_cap or len(batch.logits_rows) > be.r_cap:
                    batch = self._resolve_on_host(batch, prev_rows)   # forward reallocates sample_out
                else:
                    t_idx = np.nonzero(prev_rows >= 0)[0]
                    patch = _feeder(runs(t_idx, prev_rows[t_idx]), be.sample_out, stream)
            self.staging.begin()
            marks = self.timeline.begin() if self.timeline is not None else None
            start, end = self._events[self._next_event]
            self._next_event = (self._next_event + 1) % self.EVENTS
            start.record(stream)
            logits = be.forward(batch, patch=patch)
            StepTimeline.forward_enqueued(marks, stream)
            handle = _Handle(self, logits, 0, 0, self.staging.arena, start, end)
            handle.marks = marks
            sub = None
            if len(sample_rows):
                whole = len(sample_rows) == logits.shape[0] and bool((sample_rows == np.arange(len(sample_rows))).all())
                sub = logits if whole else logits[sample_rows]
            if (sub is not None and self.gated and getattr(mask, "deferred", False)
                    and hasattr(mask, "into") and hasattr(mask, "when_ready")):
                self._sample_gated(handle, sub, sampling, mask)
            elif sub is not None and callable(mask) and getattr(mask, "deferred", False):
                when_ready = getattr(mask, "when_ready", None) if self.sample_on_worker else None
                # sampled by flush(), or (when_ready) by the thread that fills the mask, once filled
                self._deferred = (handle, sub, sampling, mask, when_ready is not None)
                if when_ready is not None:
                    when_ready(lambda: self._flush_for(handle))
            else:
                self._sample(handle, sub, sampling, mask)
        except BaseException:
            self._prev_failed = True
            raise
        self.staging.arena.last = handle
        self._prev, self._prev_failed = handle, False
        StepTimeline.launched(marks)
        return handle

    def _sample(self, handle: _Handle, sub, sampling, mask, gated: bool = False) -> None:
        """The sampling of `handle`'s rows `sub`, the ids' read-back and its end event, on the stream."""
        be, stream = self.backend, self.backend.dev.stream
        if sub is not None and mask is not None:   # constrained rows: sample_rows reads them through their bitmasks
            # a late mask (aotx.engine.masks) not computed elsewhere waits for the previous step's
            # ids and fills the bitmasks on the host now, while the GPU runs the forward
            sub = be.masked_logits(sub, mask() if callable(mask) else mask)
        if not gated:       # (a gated one's start is recorded after the stream's wait for its mask)
            StepTimeline.sample_enqueued(handle.marks, stream)
        n = be.sample_enqueue(sub, sampling) if sub is not None else 0
        addr, off = self.staging.reserve(4 * max(n, 1))
        driver.dtoh_async(addr, be.sample_out, 4 * n, stream)
        handle.end.record(stream)
        handle.n, handle.offset, handle.arena = n, off, self.staging.arena
        handle.enqueued.set()

    def _sample_gated(self, handle: _Handle, sub, sampling, mask) -> None:
        """`handle`'s sampling enqueued now, its bits copied behind the stream's wait for `mask`'s thread
        to write them into page-locked memory and open the gate (kernels/cuda/mask_gate.py)."""
        gate = self.gate
        bits, addr = gate.bits_for(len(mask.rows), mask.words, handle)
        mask.into(bits)
        value = gate.issue()

        def wait(stream) -> None:
            gate.word.wait(stream, value)
            StepTimeline.sample_start(handle.marks, stream)
        try:
            self._sample(handle, sub, sampling, GatedBits(mask.rows, bits, addr, wait), gated=True)
        finally:   # opened once the mask is computed, even if this enqueue failed after the wait
            mask.when_ready(gate.opener(handle, mask, bits, value, StepTimeline.sample_released))

    def flush(self, wait: bool = True) -> None:
        """Enqueue the deferred sampling, if a launch left one (waiting for its mask; with `wait`
        False only if its mask is ready: ``mask.ready()``). A mask that fails fails that launch (its
        ids() raise) and any launch fed by its ids. On the launching thread, or (``_flush_for``) on the
        thread that filled the mask. One that the mask's thread enqueues is waited for (wait) or left to
        it (not wait)."""
        if wait:
            self._await_worker()
        with self._lock:
            self._flush(wait)

    def _await_worker(self) -> None:
        """A deferred sampling that the mask's thread enqueues: wait until it has (without the lock)."""
        deferred = self._deferred
        if deferred is not None and deferred[4]:
            deferred[0].enqueued.wait()

    def _flush_for(self, handle: _Handle) -> None:
        """`handle`'s mask is computed (called on the thread that computed it): enqueue its sampling now,
        unless it is enqueued already."""
        with self._lock:
            if self._deferred is not None and self._deferred[0] is handle:
                self._flush(wait=True, by_worker=True)

    def _flush(self, wait: bool, by_worker: bool = False) -> None:
        deferred = self._deferred
        if deferred is None or (deferred[4] and not (wait or by_worker)):
            return
        if not (wait or getattr(deferred[3], "ready", lambda: True)()):
            return
        self._deferred = None
        handle, sub, sampling, mask, _ = deferred
        try:
            self.backend.dev.make_current()
            self._sample(handle, sub, sampling, mask)
        except BaseException as exc:  # handed to whoever reads this launch's ids (the engine ends it)
            handle.error = exc
            handle.enqueued.set()
            if handle is self._prev:
                self._prev_failed = True

    def _resolve_on_host(self, batch, prev_rows):
        import dataclasses
        prev = self._prev.ids()
        tokens = np.array(batch.token_ids, dtype=np.int32)
        mask = prev_rows >= 0
        tokens[mask] = prev[prev_rows[mask]]
        return dataclasses.replace(batch, token_ids=tokens)

    # -- GPU-busy accounting ------------------------------------------------------
    def reset_timing(self) -> None:
        self._busy_ms = self._gap_ms = 0.0
        self._steps = 0
        self._last_end_handle: _Handle | None = None
        if getattr(self, "timeline", None) is not None:
            self.timeline.reset()

    def pause(self) -> None:
        """The engine has no work: the time until the next launch is not the host's lateness."""
        self._last_end_handle = None
        if self.timeline is not None:
            self.timeline.pause()

    def _account(self, h: _Handle) -> None:
        self._busy_ms += h.end.since(h.start)
        gap = None
        if self._last_end_handle is not None:
            gap = max(0.0, h.start.since(self._last_end_handle.end))
            self._gap_ms += gap
        self._last_end_handle = h
        self._steps += 1
        if self.timeline is not None:
            self.timeline.read(h.marks, h.start, h.end, gap)

    def timing(self) -> dict:
        """Since reset_timing: steps read back, GPU-busy seconds and the gaps between steps."""
        total = self._busy_ms + self._gap_ms
        return {"steps": self._steps, "busy_s": self._busy_ms / 1e3, "idle_s": self._gap_ms / 1e3,
                "busy_share": self._busy_ms / total if total > 0 else float("nan")}

    def close(self) -> None:
        with self._lock:
            self._close()

    def _close(self) -> None:
        self.backend.dev.make_current()
        if self._deferred is not None:      # never sampled: whoever waits for it is told
            handle, self._deferred = self._deferred[0], None
            handle.error = RuntimeError("the launcher closed before this step was sampled")
            handle.enqueued.set()
        if self.gate is not None:           # a mask nobody fills (the worker is closed) must not hold the stream
            self.gate.open_all()
        self.staging.close()
        if self.gate is not None:
            self.gate.free()
            self.gate = None
        self.backend.staging = None


__all__ = ["CudaStepLauncher", "Staging", "runs"]
