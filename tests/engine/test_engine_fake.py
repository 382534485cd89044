"""The engine end to end over FakeBackend: batching, paging, lifecycle, errors."""
import asyncio

import pytest

from aotx.engine import Delta, Engine, EngineConfig, RequestRejected, SamplingParams
from aotx.engine.launch import InlineLauncher
from tests.engine.engine_fakes import (FailingBackend, FakeBackend, FakeTokenizer,
                                       reference_greedy)
from tests.waiting import DEFAULT_TIMEOUT, wait_until_async


# every test runs the classic loop, the one-step-behind loop with the device inline (deterministic
# bookkeeping) and the one-step-behind loop with a device thread (real overlap)
LOOPS = {"classic": False, "behind-inline": True, "behind-thread": True}
_loop = ["classic"]


@pytest.fixture(autouse=True, params=list(LOOPS))
def engine_loop(request):
    _loop[0] = request.param
    yield request.param
    _loop[0] = "classic"


def make_engine(backend=None, start=True, **cfg) -> tuple[Engine, FakeBackend]:
    backend = backend or FakeBackend(num_pages=cfg.get("num_pages", 64), page_size=4)
    config = EngineConfig(**{"num_pages": 64, "page_size": 4, "max_model_len": 256,
                             "overlap": LOOPS[_loop[0]], **cfg})
    engine = Engine(backend, FakeTokenizer(), config,
                    launcher=InlineLauncher(backend) if _loop[0] == "behind-inline" else None)
    if start:
        engine.start()
    return engine, backend


async def collect(handle) -> list[Delta]:
    return [d async for d in handle]


def greedy(n, **kw) -> SamplingParams:
    return SamplingParams(max_tokens=n, temperature=0, **kw)


async def test_greedy_matches_reference_across_pages_and_chunks():
    engine, backend = make_engine(prefill_token_budget=5)
    try:
        prompt = list(b"the quick brown fox")          # 19 tokens: 4 chunks of <= 5
        deltas = await collect(engine.submit(prompt, greedy(9)))
        ids = [t for d in deltas for t in d.token_ids]
        assert ids == reference_greedy(prompt, 9)
        assert "".join(d.text for d in deltas) == bytes(ids).decode()
        assert deltas[-1].finish_reason == "length"
        assert deltas[-1].completion_tokens == 9 and deltas[-1].prompt_tokens == 19
        assert [b.num_tokens for b in backend.batches[:4]] == [5, 5, 5, 4]
    finally:
        await engine.stop()
    stats = engine.stats()
    assert stats.kv_pages_in_use == 0 and stats.requests_finished_total == {"length": 1}
    assert stats.prompt_tokens_total == 19 and stats.generation_tokens_total == 9


async def test_concurrent_requests_share_steps():
    engine, backend = make_engine(num_pages=200, start=False)
    try:
        prompts = [list(f"prompt number {i}".encode()) for i in range(12)]
        handles = [engine.submit(p, greedy(6)) for p in prompts]
        assert engine.stats().queue_depth == 12
        engine.start()        # all twelve are queued: they are admitted in one step
        results = await asyncio.gather(*(collect(h) for h in handles))
        for p, deltas in zip(prompts, results):
            assert [t for d in deltas for t in d.token_ids] == reference_greedy(p, 6)
        stats = engine.stats()
        assert stats.max_batch_width == 12 and stats.running == 0
        assert stats.time_to_first_token.count == 12
        assert stats.inter_token_latency.count == 12 * 5
        assert backend.forward_calls == 6     # one prefill step, then 5 mixed decode steps
    finally:
        await engine.stop()


async def test_page_budget_queues_and_max_batch():
    # each request reserves ceil((8 + 8) / 4) = 4 pages; 10 pages -> 2 at a time
    engine, backend = make_engine(num_pages=10, max_batch=8, start=False)
    try:
        handles = [engine.submit(list(b"abcdefgh"), greedy(8)) for _ in range(5)]
        engine.start()
        await asyncio.gather(*(collect(h) for h in handles))
        assert engine.stats().max_batch_width == 2
        assert all(h.finish_reason == "length" for h in handles)
    finally:
        await engine.stop()
    engine, backend = make_engine(num_pages=200, max_batch=3, start=False)
    try:
        handles = [engine.submit(list(b"abc"), greedy(4)) for _ in range(7)]
        engine.start()
        await asyncio.gather(*(collect(h) for h in handles))
        assert engine.stats().max_batch_width == 3
    finally:
        await engine.stop()


async def test_sampling_is_seeded():
    engine, _ = make_engine()
    try:
        params = SamplingParams(max_tokens=12, temperature=1.5, seed=1234)
        runs = [[t for d in await collect(engine.submit(list(b"seed"), params)) for t in d.token_ids]
                for _ in range(2)]
        assert runs[0] == runs[1]
        other = await collect(engine.submit(list(b"seed"), SamplingParams(max_tokens=12, temperature=1.5, seed=99)))
        assert [t for d in other for t in d.token_ids] != runs[0]
    finally:
        await engine.stop()


async def test_rejections_and_clipping():
    engine, _ = make_engine(max_model_len=32, max_queue=2)
    try:
        with pytest.raises(RequestRejected) as e:
            engine.submit([], greedy(1))
        assert e.value.code == "empty_prompt"
        with pytest.raises(RequestRejected) as e:
            engine.submit([65] * 32, greedy(1))
        assert e.value.code == "context_length_exceeded"
        with pytest.raises(RequestRejected) as e:
            engine.submit([65], SamplingParams(max_tokens=1, top_p=0))
        assert e.value.code == "invalid_params"
        for bad in ([65, 300], [-1, 65], [300]):   # [0, vocab) at both ends (the fake vocabulary: 300)
            with pytest.raises(RequestRejected) as e:
                engine.submit(bad, greedy(1))
            assert e.value.code == "invalid_prompt"
        h = engine.submit([65] * 30, greedy(100))
        assert h.max_tokens == 2 and h.prompt_tokens == 30
        deltas = await collect(h)
        assert deltas[-1].completion_tokens == 2 and deltas[-1].finish_reason == "length"
    finally:
        await engine.stop()
    # the queue fills while the step thread is not running
    engine = Engine(FakeBackend(), FakeTokenizer(), EngineConfig(num_pages=64, page_size=4, max_queue=2))
    engine.submit([65], greedy(1))
    engine.submit([65], greedy(1))
    with pytest.raises(RequestRejected) as e:
        engine.submit([65], greedy(1))
    assert e.value.code == "queue_full" and engine.stats().queue_depth == 2


async def test_max_tokens_zero_runs_prefill_only():
    engine, backend = make_engine()
    try:
        deltas = await collect(engine.submit(list(b"hello"), greedy(0, prompt_logprobs=2)))
        assert len(deltas) == 1
        d = deltas[0]
        assert d.finish_reason == "length" and d.text == "" and d.token_ids == ()
        assert d.completion_tokens == 0 and backend.forward_calls == 1
        assert [lp.token_id for lp in d.prompt_logprobs] == list(b"hello")
        assert d.prompt_logprobs[0].logprob is None
        assert all(len(lp.top) == 2 and lp.logprob <= 0 for lp in d.prompt_logprobs[1:])
    finally:
        await engine.stop()


async def test_logprobs_and_prompt_logprobs_across_chunks():
    engine, _ = make_engine(prefill_token_budget=3)
    try:
        prompt = list(b"abcdefg")
        deltas = await collect(engine.submit(prompt, greedy(3, logprobs=2, prompt_logprobs=1)))
        assert [lp.token_id for lp in deltas[0].prompt_logprobs] == prompt
        assert all(d.prompt_logprobs == () for d in deltas[1:])
        lps = [lp for d in deltas for lp in d.logprobs]
        assert [lp.token_id for lp in lps] == [t for d in deltas for t in d.token_ids]
        for lp in lps:       # greedy: the chosen token is the most likely one
            assert lp.top[0].token_id == lp.token_id and lp.top[0].logprob == lp.logprob
            assert lp.top[0].logprob >= lp.top[1].logprob
    finally:
        await engine.stop()


async def test_stop_string_and_stop_token_and_eos():
    engine, _ = make_engine()
    try:
        prompt = list(b"stop test")
        expected = bytes(reference_greedy(prompt, 8)).decode()
        stop = expected[3:5]
        deltas = await collect(engine.submit(prompt, greedy(8, stop=(stop,))))
        assert "".join(d.text for d in deltas) == expected[: expected.index(stop)]
        assert deltas[-1].finish_reason == "stop" and deltas[-1].stop_sequence == stop
        token = reference_greedy(prompt, 8)[2]
        deltas = await collect(engine.submit(prompt, greedy(8, stop_token_ids=(token,))))
        assert deltas[-1].finish_reason == "stop" and deltas[-1].stop_sequence is None
        assert deltas[-1].token_ids == (token,) and deltas[-1].text == ""
        assert deltas[-1].completion_tokens == reference_greedy(prompt, 8).index(token) + 1
    finally:
        await engine.stop()


async def test_tokenizer_eos_ends_with_stop():
    prompt = list(b"eos test")
    eos = reference_greedy(prompt, 8)[3]

    class Tok(FakeTokenizer):
        eos_id = eos

    engine = Engine(FakeBackend(), Tok(), EngineConfig(num_pages=64, page_size=4))
    engine.start()
    try:
        deltas = await collect(engine.submit(prompt, greedy(8)))
        ids = [t for d in deltas for t in d.token_ids]
        assert ids[-1] == eos and len(ids) == reference_greedy(prompt, 8).index(eos) + 1
        assert deltas[-1].finish_reason == "stop"
        assert "".join(d.text for d in deltas) == bytes(ids[:-1]).decode()
    finally:
        await engine.stop()


async def test_cancel_frees_pages_and_is_idempotent():
    import threading

    release = threading.Event()

    class Gated(FakeBackend):
        def forward(self, batch):
            if self.forward_calls >= 2:
                # hold generation until the test has cancelled (a deadline only against a hang)
                assert release.wait(DEFAULT_TIMEOUT), "the test never released generation"
            return super().forward(batch)

    engine, _ = make_engine(backend=Gated(num_pages=64, page_size=4))
    try:
        h = engine.submit(list(b"long running"), greedy(200))
        first = await h.__anext__()
        assert first.finish_reason is None
        h.cancel()
        h.cancel()
        release.set()
        rest = await collect(h)
        assert rest[-1].finish_reason == "cancelled"
        h.cancel()
        await wait_until_async(lambda: engine.stats(), "the cancelled request's pages to return",
                               done=lambda st: st.kv_pages_in_use == 0)
        assert engine.stats().requests_finished_total["cancelled"] == 1
        deltas = await collect(engine.submit(list(b"next"), greedy(2)))
        assert deltas[-1].finish_reason == "length"
    finally:
        release.set()
        await engine.stop()


async def test_backend_failure_ends_affected_requests_and_engine_recovers():
    backend = FailingBackend(FakeBackend(num_pages=64, page_size=4), fail_at=3)
    engine, _ = make_engine(backend=backend, start=False)
    try:
        handles = [engine.submit(list(b"x" * (i + 1)), greedy(10)) for i in range(3)]
        engine.start()
        results = await asyncio.gather(*(collect(h) for h in handles))
        for deltas in results:
            assert deltas[-1].finish_reason == "error"
            assert "injected backend failure" in deltas[-1].error
        assert engine.stats().kv_pages_in_use == 0
        deltas = await collect(engine.submit(list(b"after"), greedy(3)))
        assert [t for d in deltas for t in d.token_ids] == reference_greedy(list(b"after"), 3)
    finally:
        await engine.stop()


async def test_stop_ends_pending_requests():
    engine, _ = make_engine()
    h = engine.submit(list(b"abc"), greedy(100))
    await engine.stop()
    deltas = await collect(h)
    assert deltas[-1].finish_reason in ("error", "length")
    with pytest.raises(RequestRejected):
        engine.submit(list(b"abc"), greedy(1))


async def test_request_whose_event_loop_closed_is_cancelled():
    import threading

    closed = threading.Event()

    class Gated(FakeBackend):
        def forward(self, batch):
            # no step runs until the caller's loop is gone (a deadline only against a hang)
            assert closed.wait(DEFAULT_TIMEOUT), "the caller's loop never closed"
            return super().forward(batch)

    engine, _ = make_engine(backend=Gated(num_pages=64, page_size=4))
    try:
        def submit_then_close_loop():
            loop = asyncio.new_event_loop()

            async def submit():
                return engine.submit(list(b"orphan"), greedy(50))

            loop.run_until_complete(submit())
            loop.close()
            closed.set()

        await asyncio.to_thread(submit_then_close_loop)
        # the finish is counted before the gauges (pages, running) are synced: wait for both
        stats = await wait_until_async(lambda: engine.stats(), "the orphaned request to be cancelled",
                                       done=lambda st: st.requests_finished_total.get("cancelled") == 1
                                       and st.kv_pages_in_use == 0 and st.running == 0)
        assert stats.requests_finished_total == {"cancelled": 1}
        assert stats.kv_pages_in_use == 0 and stats.running == 0
    finally:
        closed.set()
        await engine.stop()


async def test_pool_mismatch_is_refused_and_internal_errors_fail_requests():
    with pytest.raises(ValueError):
        Engine(FakeBackend(num_pages=8, page_size=4), FakeTokenizer(), EngineConfig(num_pages=64, page_size=4))
    engine, _ = make_engine(start=False)
    h = engine.submit(list(b"boom"), greedy(5))

    def broken_schedule():
        raise RuntimeError("scheduler bug")

    engine.scheduler.schedule = broken_schedule
    engine.start()
    try:
        deltas = await collect(h)
        assert deltas[-1].finish_reason == "error" and "scheduler bug" in deltas[-1].error
        assert engine.stats().kv_pages_in_use == 0 and engine.stats().running == 0
    finally:
        await engine.stop()


async def test_seed_outside_uint64_does_not_fail_the_batch():
    """A client seed is any integer (negative, or past 2**64): it is reduced mod 2**64
    as the sampler's spec says, never an error for it and the requests batched beside it."""
    engine, _ = make_engine(start=False)
    try:
        bystander = engine.submit(list(b"bystander"), greedy(4))
        odd = [engine.submit(list(b"seed"), SamplingParams(max_tokens=4, temperature=1.0, seed=s))
               for s in (-1, 2**64 - 1, 2**64 + 5)]
        engine.start()
        results = await asyncio.gather(*(collect(h) for h in [bystander, *odd]))
        assert [r[-1].finish_reason for r in results] == ["length"] * 4
        tokens = [[t for d in r for t in d.token_ids] for r in results]
        assert tokens[1] == tokens[2]          # -1 and 2**64 - 1 are the same seed
    finally:
        await engine.stop()


async def test_top_k_past_int32_does_not_fail_the_batch():
    """Anthropic's top_k has no upper bound; one past the vocabulary means "off" and must
    not overflow the runner's int32 row field (which failed the whole step)."""
    engine, _ = make_engine(start=False)
    try:
        bystander = engine.submit(list(b"bystander"), greedy(4))
        wide = engine.submit(list(b"wide"), SamplingParams(max_tokens=4, temperature=0.0,
                                                           top_k=2**40))
        engine.start()
        results = await asyncio.gather(collect(bystander), collect(wide))
        assert [r[-1].finish_reason for r in results] == ["length", "length"]
        assert [t for d in results[1] for t in d.token_ids] == reference_greedy(list(b"wide"), 4)
    finally:
        await engine.stop()


async def test_a_temperature_below_the_sampling_eps_is_greedy():
    """1/t overflows the logits' scale below ~3e-39 (every weight 0: no token to draw); the engine samples
    any temperature below SAMPLING_EPS greedily, as vLLM does."""
    from aotx.engine.request import SAMPLING_EPS
    engine, backend = make_engine(start=False)
    seen, real_sample = [], backend.sample
    backend.sample = lambda logits, rows: seen.extend(rows.temperature.tolist()) or real_sample(logits, rows)
    try:
        tiny = [engine.submit(list(b"tiny"), SamplingParams(max_tokens=4, temperature=t, seed=3))
                for t in (1e-40, SAMPLING_EPS / 2)]
        engine.start()
        results = await asyncio.gather(*(collect(h) for h in tiny))
        for r in results:
            assert r[-1].finish_reason == "length"
            assert [t for d in r for t in d.token_ids] == reference_greedy(list(b"tiny"), 4)
        assert seen and set(seen) == {0.0}
    finally:
        await engine.stop()


async def test_a_request_the_scheduler_refuses_ends_alone():
    """A refusal raised on the engine thread ends that request; the engine keeps serving."""
    engine, _ = make_engine(start=False)
    real_add = engine.scheduler.add

    def add(seq, claim=None, borrow=False):
        if seq.prompt_ids[:3] == list(b"bad"):
            raise ValueError("cannot place this sequence")
        return real_add(seq, claim, borrow)

    engine.scheduler.add = add
    engine.start()
    try:
        bad = await collect(engine.submit(list(b"bad prompt"), greedy(3)))
        assert bad[-1].finish_reason == "error" and "cannot place" in bad[-1].error
        good = await collect(engine.submit(list(b"good prompt"), greedy(3)))
        assert good[-1].finish_reason == "length"
    finally:
        await engine.stop()


async def test_page_claims_share_the_line_with_requests():
    """A claim is refused while what arrived before it holds the pool; requests that arrive after it
    then wait (even ones that would fit) until it fits; its request takes the claim over."""
    import time
    engine, _ = make_engine(num_pages=10, max_batch=8)
    try:
        first = engine.submit(list(b"abcdefgh"), greedy(8))          # 4 pages
        since = time.monotonic()
        assert engine.claim_pages(8, since) is None                  # 4 + 8 > 10: on hold
        late = engine.submit(list(b"abcdefgh"), greedy(8))           # 4 pages: would fit, but held
        await collect(first)
        claim = engine.claim_pages(8, since)
        assert claim is not None and engine.claimed_pages() == 8
        mine = engine.submit(list(b"abcdefgh"), greedy(20), claim=claim)   # 7 pages of the 8
        assert [d.finish_reason for d in await collect(mine)][-1] == "length"
        assert (await collect(late))[-1].finish_reason == "length"
        assert engine.claimed_pages() == 0
        # a refused request gives its claim back
        claim = engine.claim_pages(2, time.monotonic())
        with pytest.raises(RequestRejected):
            engine.submit([], greedy(1), claim=claim)
        assert engine.claimed_pages() == 0
        engine.release_hold()
    finally:
        await engine.stop()


async def test_a_request_that_does_not_fit_does_not_hold_back_one_that_does():
    # 10 pages of 4 tokens: a runs (6 pages); b needs 5 and waits; c needs 2 and runs beside a
    engine, backend = make_engine(num_pages=10, max_batch=8, start=False)
    try:
        handles = {"a": engine.submit(list(b"aaaaaaaa"), greedy(16)),
                   "b": engine.submit(list(b"bbbbbbbb"), greedy(12)),
                   "c": engine.submit(list(b"cccc"), greedy(4))}
        tasks = [collect(handles[name]) for name in "abc"]
        engine.start()
        results = await asyncio.gather(*tasks)

        def admitted(name: str) -> int:   # the step whose batch holds the request's first prompt token
            first = ord(name)
            return next(i for i, b in enumerate(backend.batches)
                        if any(t == first and p == 0 for t, p in zip(b.token_ids, b.positions)))
        # (the engine's order, not the order the collecting tasks happen to wake in)
        assert admitted("a") <= admitted("c") < admitted("b")   # c beside a; b only once a has gone
        assert [r[-1].finish_reason for r in results] == ["length"] * 3
        assert engine.stats().max_batch_width == 2
    finally:
        await engine.stop()
