"""The mask worker: one thread that fills each launch's token mask (aotx.engine.masks.LateMask)
while the launch's forward runs on the device and the engine thread does the rest of its step.

A mask the runner gives it (``take``, before the launch: the launcher then defers the sampling, and
CUDA's has this thread enqueue it right after the fill: ``LateMask.when_ready``) is filled once its rows
have consumed the previous launch's tokens: at once when no row has one pending (``handed``), else once
the engine thread has read that launch back (``read_back``: one hand-over a step); meanwhile it builds what
llguidance is handed (``LateMask.prepare``, queued at ``handed``). The worker consumes
those tokens itself, in one llguidance call with the GIL released (``batch.consume_rows``), right before it
fills (``consumes``; ``AOTX_MASK_CONSUME=engine``
has the engine thread consume them in read_back instead, the A/B): the engine thread's own check of each
token it reads back is then a bit of the mask that let it through (RowMatcher.sync), never an llguidance
call. One mask at a time, in launch order, so a matcher is never touched by two threads at once. Started
by the first constrained step; ``AOTX_MASK_WORKER=0`` turns it off (the launcher computes every mask on the
engine thread, after the forward is enqueued and before the sampling: the A/B).

The worker needs the GIL twice a step for short stretches (taking the mask and building the list it
hands llguidance; the result after llguidance's GIL-free fill); with Python's default switch interval
(5 ms) a busy engine thread could hold it off for a whole step each time, so while a worker runs the
process's interval is ``SWITCH_S`` (``AOTX_GIL_SWITCH_S``, 0 keeps Python's; the engine's stop puts it
back). It only matters while two threads want the GIL.
"""
from __future__ import annotations

import logging
import os
import queue
import sys
import threading

log = logging.getLogger(__name__)
SWITCH_S = 0.00005   # 50 µs: H200, 64 streams, json_schema ÷ plain 0.943× against 0.843× at 0.2 ms (session 6)

_switch_lock = threading.Lock()
_switch_users = 0
_switch_saved: float | None = None


def _lower_switch_interval() -> None:
    """While a mask worker runs (one per engine), the switch interval is SWITCH_S at most; the last
    one to close puts the process's back."""
    global _switch_users, _switch_saved
    raw = os.environ.get("AOTX_GIL_SWITCH_S", "")
    try:
        want = float(raw) if raw else SWITCH_S
    except ValueError:
        log.warning("AOTX_GIL_SWITCH_S=%r is not a number: %s s used", raw, SWITCH_S)
        want = SWITCH_S
    with _switch_lock:
        _switch_users += 1
        if want > 0 and want < sys.getswitchinterval():
            if _switch_saved is None:
                _switch_saved = sys.getswitchinterval()
            sys.setswitchinterval(want)


def _restore_switch_interval() -> None:
    global _switch_users, _switch_saved
    with _switch_lock:
        _switch_users -= 1
        if _switch_users == 0 and _switch_saved is not None:
            sys.setswitchinterval(_switch_saved)
            _switch_saved = None


class MaskWorker:
    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._held = None                  # a mask waiting for its previous launch to be read back
        self.started = 0                   # masks handed to the thread (tests, benches)
        self.enabled = os.environ.get("AOTX_MASK_WORKER", "1") != "0"
        # the worker consumes the tokens read back, before it fills (AOTX_MASK_CONSUME=engine: the engine
        # thread does, in read_back: the A/B)
        self.consumes = self.consumes and os.environ.get("AOTX_MASK_CONSUME", "worker") != "engine"

        # a mask whose worker consumes is handed over at its launch, and the worker waits for the step
        # before's ids itself: no hand-over at read-back (the default since session 12's H100 run:
        # json_schema / plain 0.715-0.756x -> 0.834-0.854x at 64 streams; AOTX_MASK_EARLY=0: at read-back)
        self.early = self.consumes and os.environ.get("AOTX_MASK_EARLY", "1") != "0"

    consumes = True     # (the matcher processes' worker: False, its consume is the frame it sends)

    @staticmethod
    def step_mask(sampled, previous=None, last=False):
        """The launch's mask (aotx.engine.masks.step_mask, chained to `last`, the launch before's mask, where
        the runner gives it; the process path's own: mask_procs)."""
        from aotx.engine.masks import step_mask
        return step_mask(sampled, previous, last)

    def take(self, mask) -> bool:
        """Mark `mask` as the worker's, before the launcher sees it (it may sample later); False when
        the worker is off (the launcher computes it)."""
        if mask is None or not self.enabled:
            return False
        defer = getattr(mask, "defer", None)
        if defer is not None:
            defer(self.consumes)
        else:
            mask.deferred = True
        return True

    def handed(self, mask) -> None:
        """`mask`'s launch is enqueued: fill it now, or once its previous launch is read back."""
        if self._held is not None:     # (never read back: its launch failed) consumed where it is filled
            self._submit(self._held)
        self._held = None
        if mask.reads_previous and not (self.early and getattr(mask, "worker_consumes", False)):
            self._held = mask
            prepare = getattr(mask, "prepare", None)
            if prepare is not None:     # (what llguidance is handed, built while the thread waits anyway)
                self._start()
                self._jobs.put(prepare)
        else:
            self._submit(mask)

    def read_back(self, launched) -> None:
        """The engine thread has read `launched`'s ids: the held mask is handed to the worker, which
        consumes them, then fills (``consumes``; else they are consumed here, on the engine thread)."""
        mask = self._held
        if mask is not None and mask.previous is launched:
            self._held = None
            try:
                if not getattr(mask, "worker_consumes", False):
                    mask.consume()
            finally:
                self._submit(mask)

    def _start(self) -> None:
        if self._thread is None:
            _lower_switch_interval()
            self._thread = threading.Thread(target=self._run, name="aotx-mask-fill", daemon=True)
            self._thread.start()

    def _submit(self, mask) -> None:
        self._start()
        self.started += 1
        self._jobs.put(mask.run)

    def close(self) -> None:
        if self._held is not None:     # nobody waits for it any more; its thread is told to stop
            self._held = None
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None
            _restore_switch_interval()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            job()       # a mask's run, or its prepare
