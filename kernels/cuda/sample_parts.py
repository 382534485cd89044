"""A constrained step's sampling in row groups (aotx.engine.mask_groups, ``AOTX_MASK_GROUPS=2``), enqueued at
its launch: each group's rows (a range of the sampled rows) behind its own gate, sampled by its own launch of
the kernel, its ids copied back and, for the first, an event recorded after it (``FirstIds``), so that the mask
worker reads the first range's ids, consumes them and fills that range's next mask while the device samples
the second range. On the stream, after the forward:

    wait(gate >= v1), bits 1 copied, sample rows [0, s), ids [0, s) copied, event 1,
    wait(gate >= v2), bits 2 copied, sample rows [s, n), ids [s, n) copied, the end event

The gates are one host word raised to consecutive values (kernels/cuda/mask_gate.py): the worker fills the
parts one at a time in launch order, so they open in that order, as two words would. Each part's bits take a
page-locked slot of their own (the gate keeps two a group).
"""
from __future__ import annotations

import numpy as np

from kernels.cuda.mask_gate import GatedBits
from kernels.cuda.step_timing import StepTimeline


def groups(env=None) -> int:
    """AOTX_MASK_GROUPS as the gate sizes its page-locked slots (aotx.engine.mask_groups.groups parses it for
    the engine: a value other than 1 or 2 fails there)."""
    import os
    return 2 if (os.environ if env is None else env).get("AOTX_MASK_GROUPS", "") == "2" else 1


class FirstIds:
    """A launch's first range of sampled ids (rows [0, n)), readable once its event has fired: before the
    launch's end where the second range still waits for its mask. ``whole``: the launch's handle."""

    def __init__(self, handle, n: int, event) -> None:
        self.whole, self.n, self._event = handle, n, event
        self._ids: np.ndarray | None = None

    def ids(self) -> np.ndarray:
        """Not under the launch's lock: the engine thread holds it while it waits for the whole launch, which
        waits for the second range's mask, which the worker fills after the first's (the caller, often)."""
        if self._ids is None:
            h = self.whole
            if h._ids is None:
                if h.error is not None:
                    raise h.error
                h.launcher.backend.dev.make_current()
                self._event.synchronize()
                if h.error is not None:     # its gated mask failed (set before its gate opened)
                    raise h.error
                got = h.arena.buf.view(np.int32, self.n, h.offset).copy()
                # the arena is reused only after the whole launch is read back (Staging.begin drains it): where
                # that read-back came first, its copy is the one to trust
                if h._ids is None:
                    self._ids = got
                    return got
            self._ids = h._ids[:self.n]
        return self._ids


def sample_grouped(launcher, handle, sub, sampling, groups, driver) -> None:
    """`handle`'s sampling of `sub` (every sampled row) in `groups`' ranges (aotx.engine.mask_groups
    .MaskGroups: ``bounds`` and ``parts``), each behind its gate; the ids' copy after each, the first range's
    event (``handle.first``) and the end event. Each part's gate opens once its mask is computed. `driver`:
    the launcher's (kernels.cuda.driver, or the CPU tests' stand-in)."""
    be, gate = launcher.backend, launcher.gate
    stream = be.dev.stream
    events = getattr(launcher, "_first_events", None)
    if events is None:
        events = launcher._first_events = [driver.Event() for _ in range(launcher.EVENTS)]
    event = events[launcher._next_event]
    marks = handle.marks
    gated, openers = [], []
    try:
        for g, ((lo, hi), mask) in enumerate(zip(groups.bounds, groups.parts)):
            bits, addr = gate.bits_for(len(mask.rows), mask.words, handle)
            mask.into(bits)
            value = gate.issue()
            openers.append((mask, gate.opener(handle, mask, bits, value, StepTimeline.sample_released)))

            def wait(stream_, value=value, g=g) -> None:
                gate.word.wait(stream_, value)
                if g == 0:
                    StepTimeline.sample_start(marks, stream_)
            rows = np.asarray(mask.rows, dtype=np.int32) - np.int32(lo)
            gated.append((lo, hi, GatedBits(rows, bits, addr, wait)))
        n = sub.shape[0]
        addr, off = launcher.staging.reserve(4 * max(n, 1))
        first = groups.bounds[0][1]

        def after(lo: int, hi: int) -> None:
            driver.dtoh_async(addr + 4 * lo, be.sample_out + 4 * lo, 4 * (hi - lo), stream)
            if lo == 0:
                event.record(stream)
        masked = be.masked_logits(sub, gated[0][2])     # (the device mask's buffers; every part's bits below)
        be.sample_enqueue(masked, sampling, gated, after)
        handle.end.record(stream)
        handle.n, handle.offset, handle.arena = n, off, launcher.staging.arena
        handle.first = FirstIds(handle, first, event)
        handle.enqueued.set()
    finally:     # opened once each mask is computed, even if this enqueue failed after a wait
        for mask, opener in openers:
            mask.when_ready(opener)
