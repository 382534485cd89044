"""A gateway's engine pool (aotx.engine_pool, issue 15 part 3), on a real nats-server and the real model:
engines are found by their alive beats, a request goes to the engine with the most free capacity, an
engine that is gone is passed over for the next, no engine answers `engine_unavailable`, and the model
surfaces served over the pool answer an OpenAI client's chat completion."""
from __future__ import annotations

import secrets
from dataclasses import dataclass

import pytest

from aotx.chat_types import ChatMessage
from aotx.engine import RequestRejected, SamplingParams
from aotx.engine_pool import EnginePool, pooled_model_service
from aotx.engine_service import EngineService
from aotx.engine_wire import engine_facts, pool_engine_name
from tests.conftest import started_service
from tests.waiting import wait_until_async

GREEDY = SamplingParams(max_tokens=4, temperature=0.0)


@pytest.fixture(scope="module")
def service(model_bundle):
    yield from started_service(model_bundle, max_batch=8, kv_pages=256, default_max_tokens=16)


@dataclass
class _Stats:
    running: int
    queue_depth: int


class _Scheduler:
    max_batch = 16


class _Engine:
    """The load an engine reports in its beats (the real engine behind it runs the generations)."""
    scheduler = _Scheduler()

    def __init__(self, active: int) -> None:
        self.active = active

    def stats(self) -> _Stats:
        return _Stats(self.active, 0)


class _Served:
    """The real service, reporting another load: what EngineService uses of a ModelService."""

    def __init__(self, service, active: int) -> None:
        self._service, self.engine = service, _Engine(active)
        self.constraints = service.constraints
        self.submitted = 0

    def submit(self, *args, **kwargs):
        self.submitted += 1
        return self._service.submit(*args, **kwargs)


async def _engines(service, nats_url, runtime: str, loads: dict[str, int]) -> dict[str, EngineService]:
    facts = engine_facts(service)
    return {boot: await EngineService(_Served(service, active), nats_url, pool_engine_name(runtime, boot),
                                      facts=facts).start() for boot, active in loads.items()}


async def test_the_pool_sends_a_request_to_the_least_loaded_engine_and_past_one_that_is_gone(service, nats_url):
    runtime = f"rt{secrets.token_hex(3)}"
    engines = await _engines(service, nats_url, runtime, {"busy": 12, "idle": 2})
    pool = await EnginePool(nats_url, runtime).start()
    try:
        await wait_until_async(lambda: len(pool.ranked()) == 2, "both engines heard", timeout=30)
        assert [e.name for e in pool.ranked()] == [f"{runtime}.idle", f"{runtime}.busy"]
        assert (await pool.first_engine(1))["model"] == service.model_id
        prompt = service.chat_prompt([ChatMessage(role="user", content="Hi")])
        (handle,) = await pool.submit([prompt], [GREEDY], surface="chat", lane="buffered")
        assert [d async for d in handle][-1].finish_reason is not None
        assert (engines["idle"].service.submitted, engines["busy"].service.submitted) == (1, 0)

        await engines.pop("idle").stop()   # gone, though the pool heard it within ENGINE_TIMEOUT
        (handle,) = await pool.submit([prompt], [GREEDY], surface="chat", lane="buffered")
        assert [d async for d in handle][-1].finish_reason is not None
        assert engines["busy"].service.submitted == 1
        assert [e.name for e in pool.ranked()] == [f"{runtime}.busy"]   # passed over until it beats again
    finally:
        await pool.stop()
        for engine in engines.values():
            await engine.stop()


async def test_no_engine_answers_engine_unavailable(nats_url):
    pool = await EnginePool(nats_url, f"rt{secrets.token_hex(3)}").start()
    try:
        with pytest.raises(RequestRejected) as refused:
            await pool.submit([[1, 2, 3]], [GREEDY], surface="chat", lane="buffered")
        assert refused.value.code == "engine_unavailable" and "retry later" in refused.value.message
    finally:
        await pool.stop()


async def test_the_model_surfaces_over_the_pool_answer_a_chat_completion(service, nats_url, model_bundle):
    """What `aotx gateway --model-surfaces` serves: create_app over pooled_model_service."""
    from api.app import create_app
    from kernels.text_side import load_text_side

    runtime = f"rt{secrets.token_hex(3)}"
    engines = await _engines(service, nats_url, runtime, {"only": 0})
    pool = await EnginePool(nats_url, runtime).start()
    try:
        facts = await pool.first_engine(30)
        app = create_app(pooled_model_service(load_text_side(), pool, facts))
        client = app.test_client()
        got = await client.post("/v1/chat/completions", json={
            "model": service.model_id, "max_tokens": 4, "temperature": 0,
            "messages": [{"role": "user", "content": "What is the capital of France?"}]})
        body = await got.get_json()
        assert got.status_code == 200, body
        local = [d async for d in service.submit(
            service.chat_prompt([ChatMessage(role="user", content="What is the capital of France?")]),
            SamplingParams(max_tokens=4, temperature=0.0), surface="chat", lane="buffered")]
        assert body["choices"][0]["message"]["content"] == "".join(d.text for d in local)
        assert body["usage"]["completion_tokens"] == local[-1].completion_tokens
    finally:
        await pool.stop()
        for engine in engines.values():
            await engine.stop()
