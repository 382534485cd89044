"""The engine's quiet path (aotx.engine.step_output): once a sequence's token went out as a plain delta, its
later plain tokens are handed to the loop as their parts (RequestHandle.put_plain). Split UTF-8 characters,
a silent EOS, stop ids and the budget leave it for the full path; what a caller gets is what the
detokenizer gives token by token, on both loops."""
import asyncio
import dataclasses

import numpy as np
import pytest

from aotx.engine import Delta, Engine, EngineConfig, SamplingParams
from aotx.engine.detokenizer import Detokenizer
from aotx.engine.launch import ThreadLauncher
from aotx.engine.request import RequestHandle
from tests.engine.engine_fakes import EOS, VOCAB, FakeBackend, FakeTokenizer

PROMPT = list(b"say it")
# "hzé 😀 中" with é and the emoji split across tokens, EOS, then "!x", a broken character (c3 then "z": U+FFFD
# and "z" from the decoder, where the whole token "z", cached by then, alone is "z"), "中" again
SCRIPT = [ord("h"), ord("z"), 256, 257, ord(" "), 258, 259, 260, ord(" "), 261, EOS, ord("!"), ord("x"), 256,
          ord("z"), 261, ord("y")]


class ScriptBackend(FakeBackend):
    """Greedy rows draw SCRIPT[i] as their i-th output token, whatever the context (one-token prompts of
    the same length: the position says which)."""

    def forward(self, batch):
        self.forward_calls += 1
        logits = np.full((len(batch.logits_rows), VOCAB), -50.0, dtype=np.float32)
        for r, t in enumerate(batch.logits_rows):
            logits[r, SCRIPT[(int(batch.positions[t]) + 1 - len(PROMPT)) % len(SCRIPT)]] = 0.0
        return logits


def reference(params: SamplingParams) -> tuple[str, list[int], str]:
    """The detokenizer fed token by token (its full path): the text, the tokens delivered, the finish."""
    stop_ids = {*params.stop_token_ids} | (set() if params.ignore_eos else {EOS})
    det = Detokenizer(FakeTokenizer(), params.stop, stop_ids,
                      silent_ids=frozenset({EOS} - stop_ids) if params.ignore_eos else frozenset())
    text, ids = "", []
    for t in SCRIPT[:params.max_tokens]:
        step = det.add(t)
        text, ids = text + step.text, ids + [t]
        if step.finish_reason is not None:
            return text, ids, step.finish_reason
    tail = det.flush()
    return text + tail.text, ids, tail.finish_reason or "length"


CASES = [SamplingParams(max_tokens=17, temperature=0, ignore_eos=True),      # EOS silent, the budget ends it
         SamplingParams(max_tokens=17, temperature=0),                       # EOS ends it
         SamplingParams(max_tokens=17, temperature=0, ignore_eos=True, stop_token_ids=(261,)),
         SamplingParams(max_tokens=6, temperature=0),                        # the budget ends it mid-emoji
         SamplingParams(max_tokens=3, temperature=0, stop=("😀",))]         # a stop string: never quiet


@pytest.mark.parametrize("loop", ["behind", "classic"])
async def test_quiet_tokens_are_what_the_detokenizer_gives(loop):
    backend = ScriptBackend(num_pages=200, page_size=4)
    config = EngineConfig(num_pages=200, page_size=4, max_model_len=128, overlap=loop == "behind")
    engine = Engine(backend, FakeTokenizer(), config, launcher=ThreadLauncher(backend) if loop == "behind" else None)
    engine.start()

    async def run(params: SamplingParams) -> list[Delta]:
        return [d async for d in engine.submit(PROMPT, params)]
    try:
        runs = await asyncio.gather(*(run(p) for p in CASES * 3))    # three of each share the steps
    finally:
        await engine.stop()
    for params, deltas in zip(CASES * 3, runs):
        text, ids, reason = reference(params)
        assert "".join(d.text for d in deltas) == text
        assert [t for d in deltas for t in d.token_ids] == ids
        assert deltas[-1].finish_reason == reason and [d.finish_reason for d in deltas[:-1]] == [None] * (len(deltas) - 1)
        assert [d.completion_tokens for d in deltas] == list(range(1, len(ids) + 1))
        for d in deltas:
            assert d.prompt_tokens == len(PROMPT)
            assert d == Delta(**{f.name: getattr(d, f.name) for f in dataclasses.fields(Delta)})
    assert engine.stats().generation_tokens_total == sum(len(reference(p)[1]) for p in CASES * 3)


async def test_put_plain_makes_the_delta_or_hands_its_parts_to_plain_hooks():
    loop = asyncio.get_running_loop()
    made = Delta("ab", (7,), prompt_tokens=30, completion_tokens=4)

    seen: list = []
    iterated = RequestHandle("r1", 30, 10, loop, lambda: None)
    iterated.observe(seen.append)                      # an observer without a plain hook: it gets the Delta
    iterated.put_plain("ab", (7,), 4)
    iterated.put(Delta("", finish_reason="length"))
    got = [d async for d in iterated]
    assert got[0] == made and vars(got[0]) != vars(made)   # equal, with only its own fields in the instance
    assert seen[0] == made and got[0].logprobs == () and got[0].queued_s is None

    plain_calls, sunk, parts = [], [], []

    def observer(delta):
        seen.append(delta)
    observer.plain = lambda: plain_calls.append(1)
    redirected = RequestHandle("r2", 30, 10, loop, lambda: None)
    redirected.observe(observer)
    redirected.redirect(sunk.append, lambda text, ids, n: parts.append((text, ids, n)))
    redirected.put_plain("ab", (7,), 4)
    assert parts == [("ab", (7,), 4)] and plain_calls == [1] and sunk == []

    no_plain_sink = RequestHandle("r3", 30, 10, loop, lambda: None)
    no_plain_sink.redirect(sunk.append)
    no_plain_sink.put_plain("ab", (7,), 4)
    assert sunk == [made]

