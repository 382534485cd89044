"""The model service: the one object the wire surfaces use to reach the engine.

It owns the loaded model bundle and the engine, builds prompts (chat template
plus tool rendering; off the event loop for the surfaces: aotx.prompt_work) and
counts routed requests. Nothing here speaks HTTP.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from aotx.chat_types import ChatMessage, ToolSpec
from aotx.engine import Engine, EngineConfig, RequestHandle, SamplingParams
from aotx.prompt_work import PromptWork
from aotx.request_latency import RequestLatency
from aotx.route_metrics import RouteMetrics
from aotx.sampling_defaults import SamplingDefaults, defaults_for

MODEL_ID = "smollm2-135m-instruct"
PREFILL_TOKENS = 1024     # the prompt a default request is sized for (kernels.pool_size.default_max_batch)


@dataclass(frozen=True)
class ServiceConfig:
    backend: str = "auto"
    max_batch: int | None = None         # None: from the pool (kernels.pool_size.default_max_batch)
    kv_pages: int | None = None          # None: numpy 2,048; cuda gpu_memory_utilization of free memory
    gpu_memory_utilization: float = 0.5  # of the device memory free at start, for the KV pool
    page_size: int = 16
    default_max_tokens: int = 512
    default_temperature: float | None = None   # None: the model's (aotx.sampling_defaults)
    default_top_p: float | None = None
    model_path: str | None = None
    overlap: bool | None = None          # EngineConfig.overlap (None: the backend's choice)


class ModelService:
    def __init__(self, bundle, engine: Engine, *, model_id: str = MODEL_ID,
                 default_max_tokens: int = 512, backend_name: str = "numpy",
                 sampling_defaults: SamplingDefaults | None = None) -> None:
        self.bundle = bundle
        self.engine = engine
        self.model_id = model_id
        self.backend_name = backend_name
        self.created = int(time.time())
        self.context_length = int(bundle.config.context_length)
        self.default_max_tokens = int(default_max_tokens)
        self.sampling_defaults = sampling_defaults or defaults_for(model_id)
        self.routes = RouteMetrics()
        self.latency = RequestLatency()   # TTFT / ITL / queue / duration by surface and lane
        self._tokenizer = bundle.tokenizer
        self.prompts = PromptWork(bundle.tokenizer, bundle.chat_template)
        self._constraints = None

    @classmethod
    def load(cls, config: ServiceConfig, *, progress: bool = True, bundle=None) -> "ModelService":
        from kernels import create_backend, load_model  # heavy: imported only when a model is loaded
        from kernels.pool_size import default_max_batch

        bundle = bundle if bundle is not None else load_model(config.model_path, progress=progress)
        backend = create_backend(config.backend, bundle, num_pages=config.kv_pages, page_size=config.page_size,
                                 gpu_memory_utilization=config.gpu_memory_utilization)
        # a default request (a prompt of PREFILL_TOKENS and default_max_tokens) at the pool's size,
        # at most the largest CUDA-graph batch (numpy: 64)
        max_batch = config.max_batch or default_max_batch(
            backend.num_pages, config.page_size, PREFILL_TOKENS + config.default_max_tokens,
            getattr(backend, "largest_bucket", None))
        engine = Engine(backend, bundle.tokenizer, EngineConfig(
            max_batch=max_batch, num_pages=backend.num_pages, page_size=config.page_size,
            max_model_len=int(bundle.config.context_length), overlap=config.overlap))
        return cls(bundle, engine, default_max_tokens=config.default_max_tokens,
                   backend_name=backend.name,
                   sampling_defaults=defaults_for(MODEL_ID, config.default_temperature, config.default_top_p))

    def start(self) -> None:
        self.engine.start()

    async def stop(self) -> None:
        await self.engine.stop()
        self.prompts.close()

    @property
    def constraints(self):
        """Structured outputs: request constraints compiled once per grammar (aotx.structured;
        llguidance is loaded by the first request that asks for one)."""
        if self._constraints is None:
            from aotx.structured import ConstraintCompiler
            self._constraints = ConstraintCompiler(self._tokenizer)
        return self._constraints

    @property
    def context_tokens(self) -> int:
        """Prompt + completion tokens one request may hold: the model's context window within the
        KV pool."""
        return int(self.engine.max_model_len)

    def busy(self) -> bool:
        """Requests (of any interface) that the engine has not ended yet."""
        return self.engine.committed_pages() > 0

    @property
    def vocab_size(self) -> int:
        return int(self.bundle.config.vocab_size)

    def known_model(self, name: str) -> bool:
        return name == self.model_id

    def chat_prompt(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (),
                    tool_choice: str | None = None, primer: str = "") -> list[int]:
        """The chat template's rendering, ending in an open assistant turn; `primer`
        (aotx.tool_calls.forced_call_primer) is appended when a tool call is forced."""
        return self._tokenizer.encode(self.prompts.render(messages, tools, tool_choice, primer))

    def text_prompt(self, text: str) -> list[int]:
        return self._tokenizer.encode(text)

    async def chat_prompt_ids(self, messages: Sequence[ChatMessage], tools: Sequence[ToolSpec] = (),
                              tool_choice: str | None = None, *, primer: str = "", prefill: str = "",
                              limit: int | None = None) -> list[int]:
        """chat_prompt (+ `prefill` tokenized on its own) in a worker thread; a prompt whose cheap
        token bound is over `limit` raises aotx.prompt_work.PromptTooLong before it is tokenized."""
        return await self.prompts.chat(messages, tools, tool_choice, primer=primer, prefill=prefill,
                                       limit=limit)

    async def text_prompt_ids(self, text: str, *, limit: int | None = None) -> list[int]:
        return await self.prompts.text(text, limit=limit)

    def token_bytes(self, token_id: int) -> bytes:
        return self._tokenizer.token_bytes(token_id)

    def token_text(self, token_id: int) -> str:
        return self._tokenizer.token_text(token_id)

    def submit(self, prompt_ids: list[int], params: SamplingParams, *, surface: str,
               lane: str, claim=None, borrow: bool = False) -> RequestHandle:
        """`claim`/`borrow`: a page claim of the engine's admission line (aotx.engine.Engine.submit)."""
        watch = self.latency.observer(surface, lane)   # from before the submission
        handle = self.engine.submit(list(prompt_ids), params, claim=claim, borrow=borrow)
        self.routes.record(surface, lane)
        handle.observe(watch)
        return handle
