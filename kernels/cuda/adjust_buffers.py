"""Device buffers of the logit adjustments (penalties, logit_bias) and their kernel launch.

Only a step with adjusted rows touches them: one upload of the sparse entries (kernels/logit_adjust.py)
and ``adjust_rows`` writing each adjusted row into a scratch row that ``sample_rows`` then reads. The
row's pending output token (one-step-behind loop) is read from the step's staged token ids on the
device (``backend.ints``: the tokens are the first array ``_stage`` uploads), so the counts stay exact
although the host has not read that token yet. Buffers grow on demand, after a device synchronize
(a kernel still queued may read the old ones).
"""
from __future__ import annotations

import numpy as np

from kernels.cuda import driver
from kernels.logit_adjust import LogitAdjust


class AdjustBuffers:
    def __init__(self, backend) -> None:
        self.backend = backend
        self.entries: driver.Buffer | None = None
        self.scratch: driver.Buffer | None = None

    def _ensure(self, attr: str, nbytes: int) -> int:
        buf = getattr(self, attr)
        if buf is None or buf.nbytes < nbytes:
            self.backend.dev.synchronize()
            if buf is not None:
                buf.free()
            buf = driver.Buffer(max(nbytes, 2 * (buf.nbytes if buf is not None else 0)))
            setattr(self, attr, buf)
        return buf.ptr

    def enqueue(self, logits_ptr: int, sample_base: int, adj: LogitAdjust) -> int:
        """Enqueue ``adjust_rows`` for ``adj``; returns the scratch rows' device pointer. ``sample_base``:
        the staged sampling arrays (their first section is the rows' logits row indices)."""
        be = self.backend
        a = len(adj.rows)
        vocab = be.config.vocab_size
        parts = [np.asarray(adj.rows, np.int32), np.asarray(adj.offsets, np.int32), np.asarray(adj.token, np.int32),
                 np.asarray(adj.count, np.int32), np.asarray(adj.pending, np.int32),
                 np.asarray(adj.bias, np.float32).view(np.int32), np.asarray(adj.presence, np.float32).view(np.int32),
                 np.asarray(adj.frequency, np.float32).view(np.int32)]
        host = np.concatenate(parts)
        base = self._ensure("entries", 4 * max(host.size, 64))
        scratch = self._ensure("scratch", 4 * vocab * max(a, 1))
        be._htod(base, host)
        ptrs, off = [], 0
        for p in parts:
            ptrs.append(base + 4 * off)
            off += p.size
        src_row, offsets, token, count, pending, bias, presence, frequency = ptrs
        be.k.adjust(logits_ptr, sample_base, src_row, vocab, offsets, token, count, bias, presence, frequency,
                    pending, be.ints, scratch, a)
        return scratch
