"""Sampling parameters and the model's defaults through the official SDKs, `aotx serve` and the
real model: logit_bias and penalties on Chat and Completions, Anthropic top_k, and the SmolLM2
defaults (temperature 0.2, top_p 0.9) for a client that names no temperature."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx

MODEL = "smollm2-135m-instruct"
FRANCE = [{"role": "user", "content": "What is the capital of France?"}]
REPEAT = "1, 1, 1, 1, 1, 1, 1, 1, 1, 1,"


def test_anthropic_sdk_without_temperature_answers_paris(anthropic_client):
    """anthropic 2.x has no temperature argument: the model's default (0.2 / 0.9) decides. Unseeded
    draws, so a condition over 16: on this GGUF (Q4_1) the first token at 0.2 is "The" 0.545 / "L"
    0.362 (both inside top_p 0.9; "L'Étoile, ..." answers in French), and 18-22 of 32 seeded
    in-process draws named Paris; at least 3 of 16 fail to with probability < 5e-4. What the defaults
    decide exactly: top_p 0.9 at 0.2 keeps only those two first tokens (0.907 >= 0.9), so every
    answer starts with one of them (at 1.0 / 1.0 the first token is "The" 0.15, "L" 0.14, "La" 0.10,
    "Al" 0.06, "Le" 0.055, ...: 16 starts with "The" or "L" by chance ~1e-5)."""
    def one(_):
        m = anthropic_client.messages.create(model=MODEL, max_tokens=32, messages=FRANCE)
        return "".join(b.text for b in m.content if b.type == "text")
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(one, range(16)))
    assert sum("Paris" in a for a in answers) >= 3, answers
    assert all(a.startswith(("The", "L")) for a in answers), answers


def test_anthropic_top_k_one_is_the_greedy_answer(anthropic_client):
    greedy = anthropic_client.messages.create(model=MODEL, max_tokens=16, messages=FRANCE,
                                              extra_body={"temperature": 0})
    top1 = anthropic_client.messages.create(model=MODEL, max_tokens=16, messages=FRANCE,
                                            extra_body={"temperature": 1.0, "top_k": 1})
    assert top1.content[0].text == greedy.content[0].text


def test_models_show_the_sampling_defaults(base_url):
    model = httpx.get(f"{base_url}/v1/models/{MODEL}", timeout=30).json()
    assert model["sampling_defaults"] == {"temperature": 0.2, "top_p": 0.9}


def test_chat_logit_bias_bans_the_greedy_token_and_forces_another(openai_client, model_bundle):
    tok = model_bundle.tokenizer
    greedy = openai_client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0, max_tokens=6)
    first = tok.encode(greedy.choices[0].message.content)[0]
    banned = openai_client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0, max_tokens=6,
                                                   logit_bias={str(first): -100})
    assert tok.encode(banned.choices[0].message.content)[:1] != [first]
    forced_id = tok.encode(" Paris")[-1]
    forced = openai_client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0.8, seed=3,
                                                   max_tokens=4, logit_bias={str(forced_id): 100}, logprobs=True)
    assert [t.token for t in forced.choices[0].logprobs.content] == [tok.token_text(forced_id)] * 4


def test_bad_logit_bias_is_a_400_naming_it(openai_client):
    import openai
    import pytest

    with pytest.raises(openai.BadRequestError) as err:
        openai_client.chat.completions.create(model=MODEL, messages=FRANCE, max_tokens=4,
                                              logit_bias={"999999": 5})
    assert err.value.body["param"] == "logit_bias"


def _repeats(ids: list[int]) -> int:
    return len(ids) - len(set(ids))


def test_completions_frequency_penalty_breaks_a_greedy_repetition(openai_client, model_bundle):
    tok = model_bundle.tokenizer
    plain = openai_client.completions.create(model=MODEL, prompt=REPEAT, temperature=0, max_tokens=12)
    plain_ids = tok.encode(plain.choices[0].text)
    assert _repeats(plain_ids) >= 4                        # greedy keeps repeating " 1,"
    got = openai_client.completions.create(model=MODEL, prompt=REPEAT, temperature=0, max_tokens=12,
                                           frequency_penalty=2.0)
    assert got.choices[0].text != plain.choices[0].text
    assert _repeats(tok.encode(got.choices[0].text)) < _repeats(plain_ids)
    # a presence penalty is one constant per token seen: -2 does not outweigh this prompt's pull,
    # +2 toward what was said (negative penalty) keeps it repeating
    same = openai_client.completions.create(model=MODEL, prompt=REPEAT, temperature=0, max_tokens=12,
                                            presence_penalty=-2.0)
    assert same.choices[0].text == plain.choices[0].text


def test_chat_presence_penalty_changes_the_greedy_answer(openai_client):
    """A story repeats words ("the", "a"): +2 steers away from them, -2 toward them."""
    story = [{"role": "user", "content": "Tell me a short story about a cat."}]
    answers = [openai_client.chat.completions.create(model=MODEL, messages=story, temperature=0, max_tokens=24,
                                                     presence_penalty=x).choices[0].message.content
               for x in (0.0, 2.0, -2.0)]
    assert len(set(answers)) == 3, answers


def test_chat_frequency_penalty_and_min_p_top_k_are_honoured(openai_client):
    a = openai_client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0.9, seed=7, max_tokens=12,
                                              frequency_penalty=1.0, extra_body={"min_p": 0.1, "top_k": 40})
    b = openai_client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0.9, seed=7, max_tokens=12,
                                              frequency_penalty=1.0, extra_body={"min_p": 0.1, "top_k": 40})
    assert a.choices[0].message.content == b.choices[0].message.content   # seeded: reproducible
    top1 = openai_client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=1.5, seed=1,
                                                 max_tokens=8, extra_body={"min_p": 1.0})
    greedy = openai_client.chat.completions.create(model=MODEL, messages=FRANCE, temperature=0, max_tokens=8)
    assert top1.choices[0].message.content == greedy.choices[0].message.content   # min_p 1: only the top token
