"""Constrained rows on the GPU: upload a step's bitmask, run token_mask.cu into a scratch copy.

``DeviceTokenMask.masked(logits, mask)`` takes the rows about to be sampled (``DeviceLogits``) and
returns ``DeviceLogits`` over a scratch buffer holding them with the constrained rows masked
(kernels/token_mask.py is the specification); the step's own logits are not written. Called only
for a step that has a constrained row: other steps never touch it. The uploads go through the
backend's ``_htod`` (pinned staging when the overlapped launcher runs), on the one stream.
"""
from __future__ import annotations

import numpy as np

from kernels.cuda import driver
from kernels.cuda.logits import DeviceLogits
from kernels.token_mask import TokenMask, kernel_args

THREADS = 256


class DeviceTokenMask:
    def __init__(self, backend) -> None:
        self.be = backend
        self._bufs: dict[str, tuple[driver.Buffer, int]] = {}

    def _buf(self, name: str, nbytes: int) -> int:
        have = self._bufs.get(name)
        if have is None or have[1] < nbytes:
            if have is not None:
                self.be.dev.synchronize()       # a queued kernel may still read the old one
                have[0].free()
            size = max(nbytes, 2 * have[1] if have else nbytes)
            have = (driver.Buffer(size), size)
            self._bufs[name] = have
        return have[0].ptr

    def masked(self, logits: DeviceLogits, mask: TokenMask) -> DeviceLogits:
        be = self.be
        logits.check_live()
        n, vocab = len(logits.rows), logits.vocab
        bits = np.ascontiguousarray(mask.bits, dtype=np.uint32)
        words = bits.shape[1]
        ints = np.concatenate([logits.rows.astype(np.int32), kernel_args(n, mask)])
        rows_ptr = self._buf("ints", ints.nbytes)
        bits_ptr = self._buf("bits", max(bits.nbytes, 4))
        out_ptr = self._buf("out", n * vocab * 4)
        be._htod(rows_ptr, ints)
        be._htod(bits_ptr, bits)
        be.k.token_mask(logits.ptr, rows_ptr, bits_ptr, rows_ptr + 4 * n, out_ptr, vocab, words, n)
        return DeviceLogits(be, out_ptr, n, vocab, be.generation)

    def close(self) -> None:
        for buf, _ in self._bufs.values():
            buf.free()
        self._bufs = {}
