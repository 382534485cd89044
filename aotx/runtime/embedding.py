"""Embeddings of inputs' retained texts, batched: the texts of inputs waiting at the same time go to
the model in one call, from a worker thread. The model: in this process (`default_embedder`), or in a
worker process of its own (`process_embedder`, what `aotx serve` and `aotx boot` use with
`--embedding-worker process`, and by default where they have at least PROCESS_CPUS usable CPUs:
`embedding_worker`), so that its forward never queues for this process's GIL behind the event loop and
the engine's thread (nor they behind it). A batch costs about its texts' tokens: one call, not
one per text."""

from __future__ import annotations

import asyncio
import functools
import os
from typing import Any, Optional

from . import memory_work as mw

# `auto` embeds in a worker process from this many usable CPUs on: below, the worker's start (its own
# interpreter and model load, ~2.3 s of CPU) competes with the server's for the cores and every
# `aotx serve` got ~3 s slower to ready on 2 cores, while on the H200's 16 it took shared inputs
# from 3.41x to 1.28x chat's time at 32 (docs/CONTRACTS.md, "the embedding worker's default")
PROCESS_CPUS = 4
WORKERS = ("auto", "process", "thread")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask, as a container or taskset limits it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):   # no affinity call on this platform
        return os.cpu_count() or 1


def embedding_worker(choice: str, cpus: int | None = None) -> str:
    """`--embedding-worker` resolved: `process` or `thread`; `auto` is `process` from PROCESS_CPUS
    usable CPUs on (`cpus`, default this process's), else `thread`."""
    if choice not in WORKERS:
        raise ValueError(f"embedding worker must be one of {', '.join(WORKERS)}, not {choice!r}")
    if choice != "auto":
        return choice
    return "process" if (usable_cpus() if cpus is None else cpus) >= PROCESS_CPUS else "thread"


@functools.lru_cache(maxsize=1)
def default_embedder() -> Any:
    """all-MiniLM-L6-v2 from its wheel, loaded once per process."""
    from kernels.embedding import load_embedding_model
    return load_embedding_model()


def process_embedder() -> Any:
    """The model in a worker process (kernels.embedding.process), not started yet: the runtime starts
    it when it is given a model service and stops it with itself."""
    from kernels.embedding.process import EmbeddingProcess
    return EmbeddingProcess()


class EmbeddingBatcher:
    def __init__(self, embedder: Any = None) -> None:
        self.embedder = embedder
        self._queue: list[tuple[bytes, asyncio.Future]] = []
        self._task: Optional[asyncio.Task] = None

    @property
    def task(self) -> Optional[asyncio.Task]:
        return self._task

    async def embed(self, text: bytes):
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._queue.append((text, fut))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._loop())
        return await fut

    async def _loop(self) -> None:
        embedder = self.embedder or default_embedder()
        while self._queue:
            batch, self._queue = self._queue, []
            try:
                vectors = await asyncio.to_thread(mw.embed_many, embedder, [t for t, _ in batch])
            except Exception as exc:  # each input's own task records it as failed
                for _, fut in batch:
                    if not fut.done():
                        fut.set_exception(exc)
                continue
            for (_, fut), vector in zip(batch, vectors):
                if not fut.done():
                    fut.set_result(vector)
