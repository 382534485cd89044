"""Real-model fixtures: one model load per session, a fresh engine per test."""
from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def bundle():
    from kernels import load_model_cached
    return load_model_cached(progress=False)


@pytest.fixture(scope="session")
def numpy_backend(bundle):
    """One KV pool for the session: engines run one at a time and overwrite pages before reading."""
    from kernels import create_backend
    return create_backend("numpy", bundle, num_pages=256, page_size=16)


@pytest.fixture
def chat_prompt(bundle):
    def render(question: str) -> list[int]:
        text = bundle.chat_template.render([{"role": "user", "content": question}],
                                           add_generation_prompt=True)
        return bundle.tokenizer.encode(text)
    return render


@pytest.fixture
async def make_real_engine(bundle, numpy_backend):
    from aotx.engine import Engine, EngineConfig
    engines = []

    def make(backend=None, start=True, launcher=None, **cfg):
        config = EngineConfig(**{"num_pages": numpy_backend.num_pages, "page_size": numpy_backend.page_size,
                                 "max_model_len": 2048, **cfg})
        engine = Engine(backend or numpy_backend, bundle.tokenizer, config, launcher=launcher)
        if start:
            engine.start()
        engines.append(engine)
        return engine

    yield make
    for engine in engines:
        await engine.stop()
