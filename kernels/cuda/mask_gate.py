"""A constrained step's sampling enqueued at its launch, behind a gate that the mask's thread opens.

Why: a sampling enqueued by the mask worker (kernels/cuda/overlap.py, ``sample_on_worker``) made ~10
driver calls after the fill (context, event, three uploads, the kernel, the ids' copy, the end event);
cuda.bindings releases the GIL around each, and with the engine thread busy in Python the worker then
waits about a switch interval to get it back, each time: ~1 ms a step on the H100 host ("after the fill"
0.99 ms even with no llguidance at all, docs/PERFORMANCE.md, session 7), part of it inside the device's
sampling (the kernels queued one by one as the worker got the GIL).

So the engine thread enqueues the whole sampling at the launch, right after the forward: the sampling
parameters, the mask's row map, a wait of the stream on a host word (``driver.HostWord``: the stream
goes on once the word reaches this launch's number), the bits' copy from a page-locked buffer, the
sampling kernel, the ids' copy back, the end event. The mask's thread writes the bits straight into that
page-locked buffer (``LateMask.into``) and opens the gate with one store: no driver call, no GIL
hand-over. The next launch's forward is queued behind it and never waits for the worker either.

Masks are filled one at a time in launch order (aotx.engine.mask_worker), so the gates open in the
order they were issued. A mask that fails opens its gate over an all-allowed mask and fails its step's
``ids()``. ``close`` opens every gate, so a stream never waits on a mask nobody will fill.
Two page-locked buffers alternate between gated launches; one is reused only after the launch that
used it last has been read back (as the staging arenas). On where the device has stream memory
operations (``available``) and the backend masks inside the sampling kernel (the fused mask).

On by default since it passed `make gpu-check` on an H100 (2026-12-07: token ids of every way equal to
the mask worker's; 64 streams with a json_schema 0.866x plain against 0.755x for the worker without the
gate, docs/PERFORMANCE.md "GPU call set of session 9"): ``AOTX_MASK_GATE=0`` turns it off, and the
sampling is enqueued by the mask's thread, as before.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import numpy as np

from kernels.cuda import driver


@dataclass(frozen=True)
class GatedBits:
    """kernels.token_mask.TokenMask's interface for the backend, for bits not written yet: ``gate(stream)``
    enqueues the wait for them, then the backend copies ``bits`` from ``addr`` (page-locked)."""
    rows: np.ndarray
    bits: np.ndarray
    addr: int
    gate: Callable


def wanted(backend) -> bool:
    return os.environ.get("AOTX_MASK_GATE", "1") != "0" and bool(getattr(backend, "gated_masks", False))


def available(stream) -> "MaskGate | None":
    """A gate for ``stream``, or None where the driver (or a stand-in of it) has no stream waits."""
    if not hasattr(driver, "HostWord"):
        return None
    try:
        word = driver.HostWord()
    except RuntimeError:  # (driver.CudaError) no device-mapped host memory: the mask worker enqueues the sampling
        return None
    try:
        word.wait(stream, 0)      # satisfied at once: checks that this device takes stream waits
    except RuntimeError:  # (CUDA_ERROR_NOT_SUPPORTED)
        word.free()
        return None
    return MaskGate(word)


class MaskGate:
    def __init__(self, word) -> None:
        self.word = word
        self.issued = 0
        self._slots: list[list] = [[None, None], [None, None]]    # [Pinned, the launch that used it last]
        self._i = 0

    def bits_for(self, rows: int, words: int, handle) -> tuple[np.ndarray, int]:
        """A page-locked uint32 [rows, words] for `handle`'s mask, and its address."""
        self._i ^= 1
        slot = self._slots[self._i]
        if slot[1] is not None:
            slot[1].drain()           # its copy has run (the stream is past that launch)
        need = max(4 * rows * words, 64)
        if slot[0] is None or slot[0].nbytes < need:
            size = max(need, 2 * slot[0].nbytes if slot[0] is not None else need)
            if slot[0] is not None:
                slot[0].free()
            slot[0] = driver.Pinned(size)
        slot[1] = handle
        return slot[0].view(np.uint32, rows * words).reshape(rows, words), slot[0].ptr

    def issue(self) -> int:
        self.issued += 1
        return self.issued

    def opener(self, handle, mask, bits: np.ndarray, value: int, released) -> Callable[[], None]:
        """What the mask's thread calls once the mask is computed: the bits are in place (or, if the
        mask failed, every token is allowed and `handle`'s ids() raise its error); the gate opens."""
        def open_gate() -> None:
            try:
                got = mask()              # computed: returns at once (or raises the mask's error)
                if got.bits is not bits:  # (a mask that did not fill in place)
                    bits[...] = got.bits
            except BaseException as exc:  # handed to whoever reads this launch's ids (the engine ends it)
                bits.fill(np.uint32(0xFFFFFFFF))
                handle.error = exc
            finally:
                released(handle.marks)
                self.word.open(value)
        return open_gate

    def open_all(self) -> None:
        self.word.open(self.issued)

    def free(self) -> None:
        for slot in self._slots:
            if slot[0] is not None:
                slot[0].free()
            slot[0] = slot[1] = None
        self.word.free()
