"""The next step's token masks, filled on a worker thread while the engine thread does the rest.

With the engine one step behind, step k+1's masks need step k's tokens. Filling them inside step
k+1's launch (aotx.engine.masks.LateMask, the fallback) puts the whole fill (~20 µs a row, more
for deep schemas) on the engine thread's critical path. Instead, as soon as step k is launched,
``MaskPrefetch.start`` hands its constrained rows to one worker thread, which waits for step k's
ids, advances each row's matcher by its token and fills the rows' bitmasks (llguidance's own
threads, the GIL released: aotx.structured.batch). Meanwhile the engine thread reads step k-1
back, delivers it, schedules and builds step k+1 and enqueues its forward pass. Step k+1's
LateMask then takes the rows it finds here (``Prefetched.row``) and fills only the others (a row
that joined since, e.g. its first decode step).

The worker needs the GIL for short stretches (taking a job, the tokens' bookkeeping); with Python's
default switch interval (5 ms) a busy engine thread could hold it off for a whole step, so while a
prefetch worker runs the process's interval is ``SWITCH_S`` (0.5 ms; ``AOTX_GIL_SWITCH_S``, 0 keeps
Python's; the engine's stop puts it back). It only matters while two threads want the GIL.

Matchers are touched by one thread at a time: while a fill is in flight the engine thread only
reads rows' matchers through ``RowMatcher.sync`` for tokens they have consumed already (a Python
comparison; the token of step k-1 was consumed by step k's mask), and a step the worker covers is
waited for (``settle``) before the engine reads it back (its tokens would be consumed there).
"""
from __future__ import annotations

import logging
import os
import queue
import sys
import threading

import numpy as np

from kernels.token_mask import mask_words

log = logging.getLogger(__name__)
SWITCH_S = 0.0005


_switch_lock = threading.Lock()
_switch_users = 0
_switch_saved: float | None = None


def _lower_switch_interval() -> None:
    """While a prefetch worker runs (one per engine), the switch interval is SWITCH_S at most; the
    last one to close puts the process's back."""
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


class Prefetched:
    """One launched step's constrained rows, advanced by that step's tokens and filled."""

    def __init__(self, launched, rows: list) -> None:
        self.launched = launched
        # (seq, its row of the step's ids, the output index of the token there)
        self._rows = [(seq, seq.pending_row, len(seq.output_ids) + seq.pending - 1) for seq in rows]
        self.vocab = max(int(seq.params.constraint.vocab_size) for seq in rows)
        self.bits: np.ndarray | None = None
        self._where: dict[int, tuple[int, int]] = {}     # seq_id -> (row of bits, matcher tokens then)
        self._done = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        from aotx.structured import batch        # only a constrained step gets here
        try:
            ids = self.launched.ids()
            oks = batch.sync_rows([seq.matcher for seq, _, _ in self._rows], [i for _, _, i in self._rows],
                                  [int(ids[row]) for _, row, _ in self._rows])
            fill = [k for k, ok in enumerate(oks) if ok]
            blank = [k for k, ok in enumerate(oks) if not ok]
            bits = np.empty((len(self._rows), mask_words(self.vocab)), dtype=np.uint32)
            if fill:
                sub = bits if len(fill) == len(self._rows) else np.empty((len(fill), bits.shape[1]), np.uint32)
                batch.fill_rows([self._rows[k][0].matcher for k in fill], sub)
                if sub is not bits:
                    bits[fill] = sub
            bits[blank] = np.uint32(0xFFFFFFFF)
            self._where = {seq.seq_id: (k, seq.matcher.consumed) for k, (seq, _, _) in enumerate(self._rows)}
            self.bits = bits
        except BaseException as exc:   # the step failed, or a matcher did: the late mask does it again
            self.error = exc
            log.debug("mask prefetch failed (the late mask fills again): %s: %s", type(exc).__name__, exc)
        finally:
            self._done.set()

    def wait(self) -> None:
        self._done.wait()

    def row(self, seq) -> int:
        """The row of `bits` holding `seq`'s mask as it is now, or -1 (not here, or stale)."""
        self.wait()
        if self.bits is None:
            return -1
        k, consumed = self._where.get(seq.seq_id, (-1, -1))
        return k if k >= 0 and seq.matcher.consumed == consumed else -1


class MaskPrefetch:
    """One worker thread (started by the first constrained step) and the fill it runs now."""

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[Prefetched | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._current: Prefetched | None = None
        self.started = 0                     # fills started (tests, benches)
        # off by default: on the H200 (session 5) json_schema at 64 streams ran 0.419x plain with it, 0.514x
        # without, and the engine thread spent longer in the mask (docs/PERFORMANCE.md); AOTX_MASK_PREFETCH=1
        self.enabled = os.environ.get("AOTX_MASK_PREFETCH", "0") == "1"

    def start(self, step) -> None:
        """Begin filling the masks that follow the launched `step` (an aotx.engine.runner.InFlight).
        Only with AOTX_MASK_PREFETCH=1 (off by default: every mask filled late, on the engine thread)."""
        self._current = None
        if step is None or step.launched is None or not self.enabled:
            return
        rows = [seq for _, seq in step.plan.sample if seq.matcher is not None and seq.pending > 0]
        if not rows:
            return
        job = Prefetched(step.launched, rows)
        if self._thread is None:
            _lower_switch_interval()
            self._thread = threading.Thread(target=self._run, name="aotx-mask-fill", daemon=True)
            self._thread.start()
        self._current = job
        self.started += 1
        self._jobs.put(job)

    def take(self, launched) -> Prefetched | None:
        """The fill for the step `launched` (the one before the step being launched), if one was
        started; not waited for here (LateMask waits when it is called, after the forward pass is
        enqueued). A fill for another step is waited for and dropped."""
        job, self._current = self._current, None
        if job is not None and job.launched is not launched:
            job.wait()
            return None
        return job

    def settle(self, launched) -> None:
        """Before `launched` is read back: its fill, if one runs, is over (it consumes that step's tokens)."""
        job = self._current
        if job is not None and job.launched is launched:
            job.wait()

    def close(self) -> None:
        if self._thread is not None:
            self._jobs.put(None)
            self._thread.join()
            self._thread = None
            _restore_switch_interval()

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            job.run()
