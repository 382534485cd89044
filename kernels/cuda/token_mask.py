"""Constrained rows on the GPU: upload a step's bitmask; mask as sample_rows reads, or into a copy.

Fused (the default): ``DeviceTokenMask.fused(logits, mask)`` wraps the rows about to be sampled and
their mask (``MaskedLogits``); the backend's ``sample_enqueue`` uploads the bits (``sample_args``) and
sample_rows (kernels/cuda/sampling.cu) reads every logit through its row's mask: no copy, no extra
kernel. ``AOTX_FUSED_MASK=0``: ``masked(logits, mask)`` runs token_mask.cu into a scratch copy and
returns ``DeviceLogits`` over it (the step's own logits are not written). kernels/token_mask.py is
the specification of both. Called only for a step that has a constrained row: other steps never touch
it. The uploads go through the backend's ``_htod`` (pinned staging when the overlapped launcher runs),
on the one stream.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from kernels.cuda import driver
from kernels.cuda.logits import DeviceLogits
from kernels.token_mask import TokenMask, kernel_args

THREADS = 256
FUSED = os.environ.get("AOTX_FUSED_MASK", "1") != "0"


@dataclass(frozen=True)
class MaskedLogits:
    """Rows about to be sampled and the token mask sample_rows applies as it reads them."""
    logits: DeviceLogits
    mask: TokenMask

    @property
    def shape(self) -> tuple[int, int]:
        return self.logits.shape


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

    def fused(self, logits: DeviceLogits, mask: TokenMask) -> MaskedLogits:
        logits.check_live()
        return MaskedLogits(logits, mask)

    def sample_args(self, n: int, mask: TokenMask) -> tuple[int, int, int]:
        """(mask_bits, mask_row, words) of sample_rows for `n` sampled rows, uploaded. A mask whose
        bits are not written yet (kernels.cuda.mask_gate.GatedBits: page-locked already) is copied
        behind the stream's wait for them (``mask.gate``)."""
        gate = getattr(mask, "gate", None)
        bits = mask.bits if gate is not None else np.ascontiguousarray(mask.bits, dtype=np.uint32)
        mask_row = kernel_args(n, mask)
        row_ptr = self._buf("mask_row", mask_row.nbytes)
        bits_ptr = self._buf("bits", max(bits.nbytes, 4))
        self.be._htod(row_ptr, mask_row)
        if gate is None:
            self.be._htod(bits_ptr, bits)
        else:
            gate(self.be.dev.stream)
            driver.htod_pinned(bits_ptr, mask.addr, bits.nbytes, self.be.dev.stream)
        return bits_ptr, row_ptr, bits.shape[1]

    def close(self) -> None:
        for buf, _ in self._bufs.values():
            buf.free()
        self._bufs = {}
