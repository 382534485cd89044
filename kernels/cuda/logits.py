"""DeviceLogits: a step's logits left on the GPU; rows are selected lazily, copied only on demand.

``forward`` returns one; ``sample`` reads it on the device (only token ids come back), and
``np.asarray`` copies the selected rows to the host (logprobs, tests). It is valid until the
backend's next ``forward``, which reuses the buffer.
"""
from __future__ import annotations

import numpy as np


class DeviceLogits:
    def __init__(self, backend, ptr: int, n_rows: int, vocab: int, generation: int, rows=None):
        self._backend = backend
        self.ptr = ptr
        self.n_rows = n_rows
        self.vocab = vocab
        self.generation = generation
        self.rows = np.arange(n_rows, dtype=np.int32) if rows is None else np.asarray(rows, dtype=np.int32)

    @property
    def shape(self) -> tuple[int, int]:
        return (len(self.rows), self.vocab)

    @property
    def dtype(self):
        return np.dtype(np.float32)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, idx) -> "DeviceLogits":
        if isinstance(idx, tuple):
            raise TypeError("DeviceLogits selects whole rows only")
        return DeviceLogits(self._backend, self.ptr, self.n_rows, self.vocab, self.generation,
                            self.rows[np.asarray(idx) if not isinstance(idx, slice) else idx])

    def check_live(self) -> None:
        if self.generation != self._backend.generation:
            raise RuntimeError("these logits were overwritten by a later forward()")

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        self.check_live()
        host = self._backend.copy_logits(self.ptr, self.n_rows)
        out = host[self.rows]
        return out.astype(dtype) if dtype is not None else out
