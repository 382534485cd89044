"""EmbeddingProcess: the embedding model's `embed(texts)` answered by a worker process
(kernels.embedding.worker), started at `start()` (or the first call) and stopped at `close()`.

Blocking and thread-safe (one batch at a time): call it from a worker thread. A worker that died is
started again at the next call; the call it died in raises EmbeddingWorkerError. The worker inherits
the environment; where OPENBLAS_NUM_THREADS is not set it gets `threads` BLAS threads.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from typing import Sequence

import numpy as np

from kernels.embedding.worker import U32, read_exact

DEFAULT_THREADS = 4
CLOSE_SECONDS = 5.0


class EmbeddingWorkerError(RuntimeError):
    pass


class EmbeddingProcess:
    def __init__(self, threads: int = DEFAULT_THREADS) -> None:
        self.threads = max(1, int(threads))
        self._proc: subprocess.Popen | None = None
        self._ready = False
        self.dim = 0
        self._lock = threading.Lock()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> None:
        """Start the worker (it loads the model meanwhile); a no-op where it runs."""
        with self._lock:
            self._spawn()

    def _spawn(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        env = dict(os.environ)
        env.setdefault("OPENBLAS_NUM_THREADS", str(self.threads))
        self._proc = subprocess.Popen([sys.executable, "-m", "kernels.embedding.worker"], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, env=env)
        self._ready = False

    def _read(self, n: int) -> bytes:
        assert self._proc is not None and self._proc.stdout is not None
        data = read_exact(self._proc.stdout, n)
        if data is None:
            proc, self._proc = self._proc, None
            code = proc.wait()
            _close_pipes(proc)
            raise EmbeddingWorkerError(f"the embedding worker exited (status {code})")
        return data

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"texts[{i}] is {type(text).__name__}, not str")
        with self._lock:
            self._spawn()
            proc = self._proc
            assert proc is not None and proc.stdin is not None
            if not self._ready:
                head = self._read(5)
                if head[:1] != b"R":
                    raise EmbeddingWorkerError(f"the embedding worker said {head[:1]!r}, not ready")
                self.dim, self._ready = U32.unpack(head[1:])[0], True
            frame = [b"E", U32.pack(len(texts))]
            for text in texts:
                body = text.encode("utf-8")
                frame += [U32.pack(len(body)), body]
            try:
                proc.stdin.write(b"".join(frame))
                proc.stdin.flush()
            except (BrokenPipeError, ValueError) as exc:
                self._proc = None
                proc.kill()
                proc.wait()
                _close_pipes(proc)
                raise EmbeddingWorkerError(f"the embedding worker is gone: {exc}") from exc
            head = self._read(5)
            if head[:1] == b"X":
                raise EmbeddingWorkerError(self._read(U32.unpack(head[1:])[0]).decode("utf-8", errors="replace"))
            n, dim = U32.unpack(head[1:])[0], U32.unpack(self._read(4))[0]
            if head[:1] != b"V" or n != len(texts):
                raise EmbeddingWorkerError(f"the embedding worker answered {head[:1]!r} for {n} texts, not {len(texts)}")
            return np.frombuffer(self._read(4 * n * dim), dtype="<f4").reshape(n, dim).astype(np.float32)

    def close(self) -> None:
        """Stop the worker (its stdin closed; killed past CLOSE_SECONDS)."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        _close_stdin(proc)
        try:
            proc.wait(timeout=CLOSE_SECONDS)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        _close_pipes(proc)


def _close_stdin(proc: subprocess.Popen) -> None:
    if proc.stdin is not None and not proc.stdin.closed:
        try:
            proc.stdin.close()
        except BrokenPipeError:   # the worker is gone: nothing to flush to
            pass


def _close_pipes(proc: subprocess.Popen) -> None:
    _close_stdin(proc)
    if proc.stdout is not None:
        proc.stdout.close()
