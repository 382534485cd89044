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
    return detokenized(det, SCRIPT[:params.max_tokens])


def detokenized(det: Detokenizer, tokens: list[int], refused_at: int | None = None) -> tuple[str, list[int], str]:
    """`tokens` fed to `det` one by one until a finish, or until the token at `refused_at` (then "error")."""
    text, ids = "", []
    for p, t in enumerate(tokens):
        if p == refused_at:
            return text, ids + [t], "error"     # (its text never goes out: the final delta is empty)
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



# -- constrained rows (issue 14, session 13): a token its matcher allows takes the quiet path too ------------

JSON = '{"name": "Ann", "age": 31}'


class JsonScriptBackend(FakeBackend):
    """Over the real tokenizer's vocabulary: a greedy row draws script[p] as its p-th output token, the script
    chosen by its prompt's first token; the mask applies as in the numpy backend, except to a row at a
    (script, position) in `rogue`: it draws its scripted token even where its mask refuses it."""

    def __init__(self, vocab: int, scripts: dict[int, list[int]], prompt_len: int, rogue=frozenset()) -> None:
        super().__init__(num_pages=200, page_size=4)
        self.vocab, self.scripts, self.prompt_len, self.rogue = vocab, scripts, prompt_len, rogue
        self._keys: list[tuple[int, int]] = []

    def forward(self, batch):
        self.forward_calls += 1
        self.kv[batch.slot_mapping] = batch.token_ids
        seq_of_token = np.searchsorted(batch.query_start, np.arange(batch.num_tokens), side="right") - 1
        logits = np.full((len(batch.logits_rows), self.vocab), -50.0, dtype=np.float32)
        self._keys = []
        for r, t in enumerate(batch.logits_rows):
            table = batch.block_tables[seq_of_token[t]]
            first = int(self.kv[table[0] * self.page_size])      # the prompt's first token: which script
            p = int(batch.positions[t]) + 1 - self.prompt_len
            script = self.scripts[first]
            logits[r, script[p] if p < len(script) else script[-1]] = 0.0   # (a step past its end: one behind)
            self._keys.append((first, p))
        return logits

    def masked_logits(self, logits, mask):
        from kernels.token_mask import TokenMask, apply_token_mask
        assert len(logits) == len(self._keys)      # (every row samples: the mask's rows are the logits' rows)
        keep = [k for k, r in enumerate(np.asarray(mask.rows).tolist()) if self._keys[r] not in self.rogue]
        out = np.array(logits, dtype=np.float32, copy=True)
        apply_token_mask(out, TokenMask(np.asarray(mask.rows)[keep], np.asarray(mask.bits)[keep]))
        return out


def constrained_reference(tok, script, params, refused_at=None):
    """The detokenizer fed token by token (as the full path does), up to a refused token (then the request
    ends with the engine's constraint error): the text, the tokens delivered, the finish."""
    return detokenized(Detokenizer(tok, params.stop, {tok.eos_id}), script[:params.max_tokens], refused_at)


@pytest.mark.parametrize("loop", ["behind", "classic"])
async def test_a_constrained_rows_allowed_tokens_go_quiet_and_the_rest_ends_as_before(loop, bundle, monkeypatch):
    """json_schema rows over a scripted model: an accepted object then EOS ends with "stop" (EOS is allowed only
    once the object is complete), a token its mask refuses (drawn past the mask) ends the request with the
    constraint's error and none of its text, a budget ends it with "length", and a stop string (never quiet)
    with "stop" and the string. Every delta is what the detokenizer gives token by token, and each row's
    tokens after its first, while allowed, plain and not the last, went out as their parts (put_plain)."""
    from aotx.structured import ConstraintCompiler

    from .test_engine_structured import PERSON
    tok = bundle.tokenizer
    c = ConstraintCompiler(tok).json_schema(PERSON)
    path = tok.encode(JSON)
    bad = tok.encode("x")[0]
    probe = c.start()
    for t in path[:3]:
        assert probe.consume(t)
    assert probe.consume(bad) is False       # refused after '{"name":'
    rest = tok.encode(" and more")
    scripts = {10: path + [tok.eos_id], 11: path[:3] + [bad] + path[4:], 12: path, 13: path + [tok.eos_id]}
    # each: (its prompt's first token, params, the position of a refused token or None)
    cases = [(10, SamplingParams(max_tokens=40, temperature=0, constraint=c), None),
             (11, SamplingParams(max_tokens=40, temperature=0, constraint=c), 3),
             (12, SamplingParams(max_tokens=6, temperature=0, constraint=c), None),
             (13, SamplingParams(max_tokens=40, temperature=0, constraint=c, stop=('"age',)), None)]
    assert not set(rest) & {10, 11, 12, 13}
    backend = JsonScriptBackend(tok.vocab_size, scripts, 1 + len(rest), rogue={(11, 3)})
    config = EngineConfig(num_pages=200, page_size=4, max_model_len=128, overlap=loop == "behind")
    engine = Engine(backend, tok, config, launcher=ThreadLauncher(backend) if loop == "behind" else None)
    plain: dict[str, int] = {}
    real_put_plain = RequestHandle.put_plain

    def counted(self, text, ids, n):
        plain[self.request_id] = plain.get(self.request_id, 0) + 1
        real_put_plain(self, text, ids, n)
    monkeypatch.setattr(RequestHandle, "put_plain", counted)
    engine.start()

    async def run(first: int, params: SamplingParams):
        handle = engine.submit([first] + rest, params)
        return handle.request_id, [d async for d in handle]
    try:
        runs = await asyncio.gather(*(run(first, params) for first, params, _ in cases * 2))
    finally:
        await engine.stop()
    for (first, params, refused_at), (rid, deltas) in zip(cases * 2, runs):
        text, ids, reason = constrained_reference(tok, scripts[first], params, refused_at)
        assert "".join(d.text for d in deltas) == text
        delivered = ids[:-1] if reason == "error" else ids     # (a refused token: counted, never delivered)
        assert [t for d in deltas for t in d.token_ids] == delivered
        assert deltas[-1].finish_reason == reason and all(d.finish_reason is None for d in deltas[:-1])
        assert [d.completion_tokens for d in deltas] == list(range(1, len(ids) + 1))
        if reason == "error":
            assert deltas[-1] == Delta("", finish_reason="error", error="constraint violated",
                                       prompt_tokens=1 + len(rest), completion_tokens=len(ids))
        for d in deltas:
            assert d.prompt_tokens == 1 + len(rest)
            assert d == Delta(**{f.name: getattr(d, f.name) for f in dataclasses.fields(Delta)})
        quiet = {10: len(path) - 1, 11: 2, 12: params.max_tokens - 2, 13: 0}[first]
        assert plain.get(rid, 0) == quiet, (first, plain.get(rid, 0))
