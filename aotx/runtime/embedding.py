"""Embeddings of inputs' retained texts, batched: the texts of inputs waiting at the same time go to
the model in one call, from a worker thread. The model: in this process (`default_embedder`), or in a
worker process of its own (`process_embedder`, what `aotx serve` and `aotx boot` use unless
`--embedding-worker thread`), so that its forward never queues for this process's GIL behind the event
loop and the engine's thread (nor they behind it). A batch costs about its texts' tokens: one call, not
one per text."""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Optional

from . import memory_work as mw


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
