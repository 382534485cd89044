"""Execution groups within a conservative page budget, against the real engine with a tiny KV pool.

With 16 pages of 16 tokens and a 120-token output budget, each input's conservative bound (its
prompt + what recall could add + its output budget, capped by its page limit) is more than half
the pool: an input is leased only once nothing else holds those pages — neither another input nor
a stateless request — and the rest stay queued. The journal shows it: each input's LEASE follows
the previous input's COMPLETION. 
"""

from __future__ import annotations

import asyncio

import pytest

from aotx.engine import SamplingParams
from aotx.journal import TransferKind
from aotx.journal.lease import decode_lease
from tests.conftest import started_service
from tests.waiting import wait_until_async

from .harness import fresh_spec, shared_app
from .test_inputs import _transfers, _wait
from .test_memory import _register, _space


@pytest.fixture(scope="module")
def small_pool(model_bundle):
    yield from started_service(model_bundle, max_batch=4, kv_pages=16, default_max_tokens=8)


async def test_inputs_wait_for_pages_and_run_one_group_at_a_time(nats_url, small_pool):
    async with shared_app(nats_url, fresh_spec(), service=small_pool) as (runtime, p, client):
        alice = p["alice"]
        await _register(alice)
        caps = (await alice.get("/capabilities"))[1]
        model, grant = caps["models"][0]["id"], caps["page_grant"]
        assert grant == 16
        cons = [(await _space(alice))[1] for _ in range(3)]   # one space each: nothing to recall
        # a stateless request holds pages first: no input is leased while it runs
        prompt = small_pool.text_prompt("Once upon a time")
        handle = small_pool.submit(prompt, SamplingParams(max_tokens=100, temperature=0.0), surface="chat",
                                   lane="stream")
        ops = []
        for con in cons:
            status, receipt = await alice.post(f"/conversations/{con}/inputs", alice.body(
                text="Reply with the single word yes.", model=model, max_output_tokens=120))
            assert status == 202
            ops.append(receipt)
        # the execution queue has weighed all three against the page budget and leased none: each pass
        # describes every queued input and takes the head at once when it fits
        queue = runtime.executor.queue
        await wait_until_async(lambda: len(queue) == 3 and all(r.user_tokens for r in queue),
                               "the execution queue to weigh the three inputs")
        for r in ops:
            assert (await alice.get(f"/operations/{r['operation']}"))[1]["execution"] == "queued"
        handle.cancel()   # its 7 pages return to the pool
        async for _ in handle:
            pass
        for r in ops:
            done = await _wait(alice, r["operation"])
            assert done["execution"] == "completed", done
        leases, dones = [], []
        for t in await _transfers(runtime):
            body = t.body
            if t.kind == TransferKind.LEASE:
                leases.append([row.sequence for row in decode_lease(body["lease"]).rows])
            elif t.kind == TransferKind.COMPLETION:
                dones.append(body["sequence"])
        seqs = [int(r["sequence"]) for r in ops]
        # each input claims the whole pool: one lease per input, in order (never two in one group); the
        # next is leased once the engine gave the pages back, which may be before the previous input's
        # completion is journalled (the engine frees pages when generation ends; the completion follows)
        assert leases == [[s] for s in seqs], leases
        assert dones == seqs, dones
        assert small_pool.engine.committed_pages() == 0


async def test_stateless_stream_cannot_starve_a_queued_input(nats_url, small_pool):
    """Three clients keep stateless requests in flight back to back: with each holding 6 of the 16 pages,
    the pool never has the 10 pages the input's bound needs beside them. Admission is one FIFO line
    across both kinds: stateless requests that arrive after the input was queued are admitted only
    into the pages its bound leaves free, so the pool drains to where it fits, and it is leased and
    completes while the stream goes on (and the stream keeps flowing after it)."""
    engine = small_pool.engine
    prompt = small_pool.text_prompt(" ".join(["word"] * 80))
    need = -(-(len(prompt) + 8) // 16)
    assert 2 * need <= 16 < 3 * need
    stop, finished = asyncio.Event(), []

    async def client() -> None:
        while not stop.is_set():
            handle = small_pool.submit(prompt, SamplingParams(max_tokens=8, temperature=0.0), surface="chat",
                                       lane="stream")
            async for _ in handle:
                pass
            finished.append(handle.finish_reason)

    async with shared_app(nats_url, fresh_spec(), service=small_pool) as (runtime, p, _):
        alice = p["alice"]
        await _register(alice)
        model = (await alice.get("/capabilities"))[1]["models"][0]["id"]
        con = (await _space(alice))[1]
        clients = [asyncio.create_task(client()) for _ in range(3)]
        try:
            await wait_until_async(lambda: len(finished) >= 3 and engine.committed_pages() > 16 - 10,
                                   "three stateless requests done and the pool too full for the input")
            status, receipt = await alice.post(f"/conversations/{con}/inputs", alice.body(
                text="Reply with the single word yes.", model=model, max_output_tokens=120))
            assert status == 202, receipt
            before = len(finished)
            done = await _wait(alice, receipt["operation"])
            assert done["execution"] == "completed", done
            during = len(finished) - before
            assert during >= 1          # the pool was full when it was queued: it waited for the stream
            await wait_until_async(lambda: len(finished) >= before + during + 3,   # the stream goes on after it
                                   "three more stateless requests after the input")
        finally:
            stop.set()
            await asyncio.gather(*clients)
        assert set(finished) == {"length"}
        assert engine.committed_pages() == 0


async def test_an_output_budget_over_the_context_is_refused_and_nothing_is_queued(nats_url, small_pool):
    """With a 16-page pool of 16 tokens the context one request can hold is 256 tokens: an input
    asking for more output than that is a 400 naming max_output_tokens, and its sequence stays free."""
    async with shared_app(nats_url, fresh_spec(), service=small_pool) as (runtime, p, _):
        alice = p["alice"]
        await _register(alice)
        caps = (await alice.get("/capabilities"))[1]
        model = caps["models"][0]
        assert model["context_tokens"] == 256
        con = (await _space(alice))[1]
        for budget in (1 << 20, 256):
            status, refusal = await alice.post(f"/conversations/{con}/inputs", alice.body(
                text="hi", model=model["id"], max_output_tokens=budget))
            assert status == 400 and refusal["error"]["type"] == "context_length_exceeded", refusal
            assert "max_output_tokens" in refusal["error"]["message"]
        status, receipt = await alice.post(f"/conversations/{con}/inputs", alice.body(
            text="hi", model=model["id"], max_output_tokens=4))
        assert status == 202, receipt            # the same sequence, now admitted
        assert (await _wait(alice, receipt["operation"]))["execution"] == "completed"
