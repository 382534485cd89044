"""The engine over the real SmolLM2-135M numpy backend (small token counts: ~30 tok/s)."""
import asyncio

from aotx.engine import SamplingParams
from tests.engine.engine_fakes import FailingBackend

QUESTIONS = ["What is the capital of France?", "Name a primary colour.",
             "What is 2 + 2?", "Say hello in Spanish."]


async def run(handle):
    deltas = [d async for d in handle]
    return "".join(d.text for d in deltas), [t for d in deltas for t in d.token_ids], deltas


def greedy(n, **kw):
    return SamplingParams(max_tokens=n, temperature=0, **kw)


async def test_greedy_france_says_paris(make_real_engine, chat_prompt):
    engine = make_real_engine()
    text, ids, deltas = await run(engine.submit(chat_prompt(QUESTIONS[0]), greedy(12)))
    assert "Paris" in text
    assert deltas[-1].finish_reason in ("stop", "length")
    if deltas[-1].finish_reason == "stop":         # <|im_end|> is EOS: never emitted as text
        assert "<|im_end|>" not in text and ids[-1] == 2


async def test_sixteen_concurrent_requests_batch_and_match_solo_runs(make_real_engine, chat_prompt):
    prompts = [chat_prompt(QUESTIONS[i % 4]) for i in range(16)]
    engine = make_real_engine(start=False)
    handles = [engine.submit(p, greedy(6)) for p in prompts]
    engine.start()
    batched = await asyncio.gather(*(run(h) for h in handles))
    stats = engine.stats()
    assert stats.max_batch_width >= 16
    assert stats.requests_finished_total.get("length", 0) + stats.requests_finished_total.get("stop", 0) == 16
    assert stats.kv_pages_in_use == 0 and stats.generation_tokens_total == sum(len(b[1]) for b in batched)
    assert "Paris" in batched[0][0]
    for i in range(4):                     # identical prompts in one batch give identical output
        assert all(batched[j][1] == batched[i][1] for j in range(i, 16, 4))
    for i in range(4):                     # batched greedy == the request run alone
        _, solo, _ = await run(engine.submit(prompts[i], greedy(6)))
        assert solo == batched[i][1], QUESTIONS[i]


async def test_seeded_sampling_is_reproducible_alone_and_in_a_batch(make_real_engine, chat_prompt):
    engine = make_real_engine()
    prompt = chat_prompt("Write a word.")
    params = SamplingParams(max_tokens=6, temperature=0.9, top_p=0.95, seed=7)
    _, first, _ = await run(engine.submit(prompt, params))
    other = engine.submit(chat_prompt(QUESTIONS[1]), greedy(6))
    (_, second, _), _ = await asyncio.gather(run(engine.submit(prompt, params)), run(other))
    assert first == second and len(first) > 0


async def test_cancel_mid_generation_frees_pages(make_real_engine, chat_prompt):
    engine = make_real_engine()
    handle = engine.submit(chat_prompt("Tell me a long story about a dragon."), greedy(500))
    got = [await handle.__anext__() for _ in range(3)]
    assert all(d.finish_reason is None for d in got)
    assert engine.stats().kv_pages_in_use > 0
    handle.cancel()
    _, _, rest = await run(handle)
    assert rest[-1].finish_reason == "cancelled"
    assert engine.stats().kv_pages_in_use == 0 and engine.stats().running == 0


async def test_max_tokens_zero_is_prefill_only(make_real_engine, chat_prompt):
    engine = make_real_engine()
    prompt = chat_prompt(QUESTIONS[0])
    text, ids, deltas = await run(engine.submit(prompt, greedy(0, prompt_logprobs=1)))
    assert text == "" and ids == [] and len(deltas) == 1
    assert deltas[0].finish_reason == "length" and deltas[0].completion_tokens == 0
    plp = deltas[0].prompt_logprobs
    assert [lp.token_id for lp in plp] == prompt and plp[0].logprob is None
    assert all(lp.logprob < 0 or lp.logprob == 0 for lp in plp[1:])
    assert engine.stats().prompt_tokens_total == len(prompt)


async def test_stop_string_cuts_the_answer(make_real_engine, chat_prompt):
    engine = make_real_engine()
    text, ids, deltas = await run(engine.submit(chat_prompt(QUESTIONS[0]), greedy(12, stop=("Paris",))))
    assert text == "The capital of France is "       # greedy: "The capital of France is Paris."
    assert deltas[-1].finish_reason == "stop" and deltas[-1].stop_sequence == "Paris"


async def test_logprobs_of_greedy_tokens_are_top(make_real_engine, chat_prompt):
    engine = make_real_engine()
    _, ids, deltas = await run(engine.submit(chat_prompt(QUESTIONS[2]), greedy(3, logprobs=3)))
    lps = [lp for d in deltas for lp in d.logprobs]
    assert [lp.token_id for lp in lps] == ids
    assert all(lp.top[0].token_id == lp.token_id and len(lp.top) == 3 for lp in lps)


async def test_backend_failure_mid_generation_then_recovery(make_real_engine, numpy_backend, chat_prompt):
    engine = make_real_engine(backend=FailingBackend(numpy_backend, fail_at=3), start=False)
    handles = [engine.submit(chat_prompt(q), greedy(8)) for q in QUESTIONS[:2]]
    engine.start()
    results = await asyncio.gather(*(run(h) for h in handles))
    for _, _, deltas in results:
        assert deltas[-1].finish_reason == "error" and "injected" in deltas[-1].error
    assert engine.stats().kv_pages_in_use == 0
    text, _, deltas = await run(engine.submit(chat_prompt(QUESTIONS[0]), greedy(12)))
    assert "Paris" in text and deltas[-1].finish_reason in ("stop", "length")


async def test_chunked_prefill_matches_whole_prefill(make_real_engine, chat_prompt):
    prompt = chat_prompt(QUESTIONS[0])
    whole = make_real_engine()
    _, expected, ref = await run(whole.submit(prompt, greedy(4, prompt_logprobs=0)))
    await whole.stop()
    chunked = make_real_engine(prefill_token_budget=7)
    _, got, deltas = await run(chunked.submit(prompt, greedy(4, prompt_logprobs=0)))
    assert got == expected
    assert chunked.stats().steps_total >= -(-len(prompt) // 7) + 3
    assert [lp.token_id for lp in deltas[0].prompt_logprobs] == prompt
    for a, b in zip(ref[0].prompt_logprobs[1:], deltas[0].prompt_logprobs[1:]):
        assert abs(a.logprob - b.logprob) < 1e-3


async def test_one_step_behind_matches_the_classic_loop_token_for_token(make_real_engine, chat_prompt):
    """The numpy backend one step behind (a device thread: EngineConfig.overlap=True) against its
    default, the classic loop:
    greedy and seeded streams, EOS, a stop string and max_tokens, several at once."""
    prompts = [chat_prompt(q) for q in QUESTIONS]
    params = [greedy(24), SamplingParams(max_tokens=10, temperature=0.9, top_p=0.95, seed=3),
              greedy(24, stop=("Spanish", "4")), SamplingParams(max_tokens=7, temperature=0.7, seed=11, stop=("o",))]
    outputs = {}
    for overlap in (True, None):
        engine = make_real_engine(start=False, overlap=overlap)
        assert engine._one_behind is (overlap is True)
        handles = [engine.submit(p, sp) for p, sp in zip(prompts, params)]
        engine.start()
        results = await asyncio.gather(*(run(h) for h in handles))
        outputs[overlap] = [(ids, text, d[-1].finish_reason, d[-1].completion_tokens, d[-1].stop_sequence)
                            for text, ids, d in results]
        stats = engine.stats()
        assert stats.generation_tokens_total == sum(len(ids) for _, ids, _ in results)
        await engine.stop()
    assert outputs[True] == outputs[None]
    for ids, _, reason, count, _ in outputs[True]:
        assert count == len(ids)
    assert {o[2] for o in outputs[True]} >= {"stop", "length"}
