"""Execution groups within a conservative page budget, against the real engine with a tiny KV pool.

With 64 pages of 16 tokens, every input's conservative bound (its prompt with the largest memory
context + its output budget, capped by its page limit) is the whole pool: an input is leased only
once nothing else holds pages — neither another input nor a stateless request — and the rest stay
queued. The journal shows it: each input's LEASE follows the previous input's COMPLETION.
"""

from __future__ import annotations

import asyncio

import pytest

from aotx.engine import SamplingParams
from aotx.journal import TransferKind
from aotx.journal.lease import decode_lease
from aotx.serving import ModelService, ServiceConfig

from .harness import fresh_spec, shared_app
from .test_inputs import _transfers, _wait
from .test_memory import _register, _space


@pytest.fixture(scope="module")
def small_pool(model_bundle):
    svc = ModelService.load(ServiceConfig(max_batch=4, kv_pages=64, default_max_tokens=8), bundle=model_bundle,
                            progress=False)
    svc.start()
    yield svc
    asyncio.run(svc.stop())


async def test_inputs_wait_for_pages_and_run_one_group_at_a_time(nats_url, small_pool):
    async with shared_app(nats_url, fresh_spec(), service=small_pool) as (runtime, p, client):
        alice = p["alice"]
        await _register(alice)
        caps = (await alice.get("/capabilities"))[1]
        model, grant = caps["models"][0]["id"], caps["page_grant"]
        assert grant == 64
        _, con = await _space(alice)
        # a stateless request holds pages first: no input is leased while it runs
        prompt = small_pool.text_prompt("Once upon a time")
        handle = small_pool.submit(prompt, SamplingParams(max_tokens=24, temperature=0.0), surface="chat",
                                   lane="stream")
        ops = []
        for text in ("One.", "Two.", "Three."):
            status, receipt = await alice.post(f"/conversations/{con}/inputs",
                                               alice.body(text=text, model=model, max_output_tokens=4))
            assert status == 202
            ops.append(receipt)
        await asyncio.sleep(0.2)
        for r in ops:
            assert (await alice.get(f"/operations/{r['operation']}"))[1]["execution"] == "queued"
        async for _ in handle:
            pass
        for r in ops:
            assert (await _wait(alice, r["operation"]))["execution"] == "completed"
        order = []
        for t in await _transfers(runtime):
            body = t.body
            if t.kind == TransferKind.LEASE:
                order += [("lease", row.sequence) for row in decode_lease(body["lease"]).rows]
            elif t.kind == TransferKind.COMPLETION:
                order.append(("done", body["sequence"]))
        seqs = [int(r["sequence"]) for r in ops]
        assert order == [(kind, s) for s in seqs for kind in ("lease", "done")], order
        assert small_pool.engine.committed_pages() == 0
