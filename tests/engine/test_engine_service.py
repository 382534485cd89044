"""The engine over NATS for HTTP workers (aotx.engine_service + aotx.serving_remote), against a real nats-server
and the real model: deltas arrive whole and coalesced (at most one NATS message per worker per engine step),
refusals come back before anything runs, a cancel reaches the engine, a silent worker's generations are
cancelled, and a worker whose engine is gone answers `engine_unavailable` / ends its open generations."""
from __future__ import annotations

import asyncio
import secrets
from types import SimpleNamespace

import msgpack
import nats
import pytest

from aotx.chat_types import ChatMessage
from aotx.engine import RequestRejected, SamplingParams
from aotx.engine_service import EngineService
from aotx.engine_wire import (
    ENGINE_UNAVAILABLE,
    WIRE_VERSION,
    ctl_subject,
    gen_subject,
    params_to_wire,
    step_from_wire,
)
from aotx.serving_remote import EngineClient
from tests.conftest import started_service
from tests.waiting import wait_until_async

PROMPT = "What is the capital of France?"
COUNTING = "1, 2, 3, 4, 5, 6, 7, 8, 9, 10,"   # greedy: counts on, never an early EOS
LONG = SamplingParams(max_tokens=2000, temperature=0.0)


@pytest.fixture(scope="module")
def service(model_bundle):
    yield from started_service(model_bundle, max_batch=16, kv_pages=512, default_max_tokens=32)


def _finished(service, reason: str) -> int:
    return service.engine.stats().requests_finished_total.get(reason, 0)


async def _collect(handle) -> list:
    return [d async for d in handle]


async def test_streams_come_back_whole_in_one_message_per_step(service, nats_url):
    name = secrets.token_hex(4)
    engine = await EngineService(service, nats_url, name).start()
    client = await EngineClient(nats_url, name).start()
    try:
        prompt = service.chat_prompt([ChatMessage(role="user", content=PROMPT)])
        steps0 = service.engine.stats().steps_total
        greedy = SamplingParams(max_tokens=12, temperature=0.0)
        handles = await client.submit([prompt] * 6, [greedy] * 6, surface="chat", lane="stream")
        outs = await asyncio.gather(*(_collect(h) for h in handles))
        local = await _collect(service.submit(prompt, greedy, surface="chat", lane="stream"))
        steps = service.engine.stats().steps_total - steps0
        text = "".join(d.text for d in local)
        for out in outs:   # the same deltas as an in-process handle's, token ids and counts included
            assert "".join(d.text for d in out) == text
            assert [d.token_ids for d in out] == [d.token_ids for d in local]
            assert (out[-1].finish_reason, out[-1].completion_tokens) == (local[-1].finish_reason,
                                                                          local[-1].completion_tokens)
        assert handles[0].prompt_tokens == len(prompt) and handles[0].request_id
        # 6 streams x ~12 tokens: one message per engine step at most, not one per token
        assert 0 < engine.messages_out <= steps
        assert client.messages_in == engine.messages_out
        assert engine.generations == 0 and client.open_generations == 0
    finally:
        await client.stop()
        await engine.stop()


async def test_refusal_cancel_and_a_silent_worker(service, nats_url):
    name = secrets.token_hex(4)
    engine = await EngineService(service, nats_url, name, worker_timeout=1.5).start()
    client = await EngineClient(nats_url, name).start()
    raw = await nats.connect(nats_url)
    try:
        with pytest.raises(RequestRejected) as refused:
            await client.submit([[]], [SamplingParams(max_tokens=4)], surface="chat", lane="buffered")
        assert refused.value.code == "empty_prompt" and client.open_generations == 0
        prompt = service.text_prompt(COUNTING)
        cancelled0 = _finished(service, "cancelled")
        (handle,) = await client.submit([prompt], [LONG], surface="chat", lane="stream")
        first = await handle.__anext__()
        assert first.finish_reason is None
        handle.cancel()
        rest = await _collect(handle)
        assert rest[-1].finish_reason == "cancelled"
        await wait_until_async(lambda: _finished(service, "cancelled") > cancelled0, "the engine to cancel it")
        # a worker that submits and then goes silent (killed): the engine cancels its generation itself
        req = {"v": WIRE_VERSION, "w": "ghost", "inbox": "ghost.inbox", "surface": "chat", "lane": "stream",
               "items": [[1, prompt, params_to_wire(LONG)]]}
        reply = msgpack.unpackb((await raw.request(gen_subject(name), msgpack.packb(req), timeout=10)).data)
        assert "ok" in reply and engine.generations == 1
        await wait_until_async(lambda: engine.generations == 0, "the silent worker's generation to be cancelled")
        await wait_until_async(lambda: _finished(service, "cancelled") > cancelled0 + 1, "the engine to end it")
        # a malformed control message changes nothing
        await raw.publish(ctl_subject(name), b"\xc1")
        await raw.flush()
    finally:
        await raw.close()
        await client.stop()
        await engine.stop()


async def test_no_engine_is_engine_unavailable_and_a_lost_engine_ends_open_generations(service, nats_url):
    name = secrets.token_hex(4)
    client = await EngineClient(nats_url, name).start()
    try:
        with pytest.raises(RequestRejected) as refused:
            await client.submit([[1, 2, 3]], [SamplingParams(max_tokens=4)], surface="chat", lane="buffered")
        assert refused.value.code == "engine_unavailable"
        engine = await EngineService(service, nats_url, name).start()
        prompt = service.text_prompt(COUNTING)
        (handle,) = await client.submit([prompt], [LONG], surface="chat", lane="stream")
        await handle.__anext__()
        await engine.stop()   # its heartbeats stop: the worker ends what it still has open
        rest = await _collect(handle)
        assert rest[-1].finish_reason == "error" and rest[-1].error.startswith(ENGINE_UNAVAILABLE)
        assert client.open_generations == 0
    finally:
        await client.stop()


async def test_a_cancel_that_arrives_before_its_generation_still_cancels_it(service, nats_url):
    """A worker whose client left while the submit was on the way cancels it at once; the engine may read that
    cancel before the submit (two subjects): it remembers it and cancels the generation when it arrives."""
    name = secrets.token_hex(4)
    engine = await EngineService(service, nats_url, name).start()
    raw = await nats.connect(nats_url)
    ends: list = []

    async def on_deltas(msg):
        ends.extend(d for _, d in step_from_wire(msgpack.unpackb(msg.data, raw=False)) if d.finish_reason)

    async def heartbeat():   # a live worker: only the early cancel can end its generation
        while True:
            await raw.publish(ctl_subject(name), msgpack.packb({"op": "hb", "w": "early"}))
            await asyncio.sleep(0.5)

    beating = asyncio.ensure_future(heartbeat())
    try:
        await raw.subscribe("early.inbox", cb=on_deltas)
        await raw.publish(ctl_subject(name), msgpack.packb({"op": "cancel", "w": "early", "rids": [9]}))
        await raw.flush()
        counting = service.text_prompt(COUNTING)
        req = {"v": WIRE_VERSION, "w": "early", "inbox": "early.inbox", "surface": "chat", "lane": "stream",
               "items": [[9, counting, params_to_wire(SamplingParams(max_tokens=4000, temperature=0.0))]]}
        await wait_until_async(lambda: len(engine._early) == 1, "the engine to hear the cancel")
        reply = msgpack.unpackb((await raw.request(gen_subject(name), msgpack.packb(req), timeout=10)).data)
        assert "ok" in reply
        await wait_until_async(lambda: ends, "the generation to end")
        assert ends[0].finish_reason == "cancelled" and engine.generations == 0
    finally:
        beating.cancel()
        await raw.close()
        await engine.stop()


async def test_a_new_grammar_compiles_off_the_engine_loop(service, nats_url):
    """The engine process compiles a constraint's grammar it has not seen in a thread: while that
    compile is in flight (held at a gate), a plain generation is accepted and runs to its end."""
    import llguidance

    from tests.api.test_structured_requests import GatedCompiler

    schema = {"type": "object", "properties": {"gated_engine": {"type": "integer"}}, "required": ["gated_engine"]}
    # what a worker sends: the constraint's kind and grammar (aotx.engine_wire)
    constraint = SimpleNamespace(kind="json_schema", grammar=llguidance.LLMatcher.grammar_from_json_schema(schema))
    gated = GatedCompiler(service._tokenizer)
    # llguidance's tokenizer (~0.3 s here, holding the GIL) is built before the engine's heartbeats start: built
    # by the gated build's thread, on the loaded CI box it once kept them silent past ENGINE_TIMEOUT (3 s)
    assert gated.ll_tokenizer is not None
    saved, service._constraints = service._constraints, gated
    name = secrets.token_hex(4)
    engine = await EngineService(service, nats_url, name).start()
    client = await EngineClient(nats_url, name).start()
    try:
        prompt = service.chat_prompt([ChatMessage(role="user", content=PROMPT)])
        slow = asyncio.create_task(client.submit(
            [prompt], [SamplingParams(max_tokens=8, temperature=0.0, constraint=constraint)],
            surface="chat", lane="stream"))
        await wait_until_async(gated.entered.is_set, "the engine's compile to start")
        [plain] = await client.submit([prompt], [SamplingParams(max_tokens=4, temperature=0.0)],
                                      surface="chat", lane="stream")
        out = await _collect(plain)
        assert out[-1].finish_reason == "length" and not slow.done()
        gated.gate.set()
        [handle] = await slow
        out = await _collect(handle)
        assert out[-1].finish_reason in ("stop", "length")
    finally:
        gated.gate.set()
        service._constraints = saved
        await client.stop()
        await engine.stop()


async def test_a_started_engine_answers_at_once_a_worker_connected_before_it(nats_url):
    """start() returns once the server has its subscriptions: a request from a connection opened before
    it is answered, never `no responders` (nats-py's flush() alone wrote its PING ahead of the SUB)."""
    raw = await nats.connect(nats_url)
    try:
        for _ in range(100):   # the race lost about one start in twenty
            name = secrets.token_hex(4)
            engine = await EngineService(None, nats_url, name).start()
            try:
                reply = msgpack.unpackb((await raw.request(gen_subject(name), msgpack.packb({"v": 0}),
                                                           timeout=10)).data)
                assert reply["rejected"] == "invalid_request"
            finally:
                await engine.stop()
    finally:
        await raw.close()
