"""The inference engine: continuous batching over a paged KV cache.

    engine = Engine(backend, tokenizer, EngineConfig(...)); engine.start()
    handle = engine.submit(prompt_ids, SamplingParams(max_tokens=32))
    async for delta in handle: ...
    await engine.stop()
"""
from aotx.engine.engine import ENGINE_STOPPED, Engine, EngineConfig
from aotx.engine.request import RequestHandle, RequestRejected
from aotx.engine.stats import EngineStats, HistogramSnapshot
from aotx.engine.types import Delta, SamplingParams, TokenLogprob, TopLogprob

__all__ = [
    "Delta", "ENGINE_STOPPED", "Engine", "EngineConfig", "EngineStats", "HistogramSnapshot", "RequestHandle",
    "RequestRejected", "SamplingParams", "TokenLogprob", "TopLogprob",
]
