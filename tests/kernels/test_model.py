"""The numpy Llama forward over the paged pool: chunking, decode and batching agree."""
import numpy as np
import pytest
from tests.kernels.pager import Pager, greedy_generate

PROMPTS = ["The quick brown fox jumps over the lazy dog because",
           "def fibonacci(n):\n    if n < 2:\n        return n\n",
           "Les fleurs du jardin sont très belles au printemps, et"]
ATOL = 2e-3


@pytest.fixture(scope="module")
def ids(bundle):
    return [bundle.tokenizer.encode(p) for p in PROMPTS]


def run_chunks(backend, tokens, chunks):
    pager = Pager(backend.num_pages, backend.page_size, seed=len(chunks))
    sid = pager.new_seq()
    i, logits = 0, None
    for n in chunks:
        logits = backend.forward(pager.build([(sid, tokens[i:i + n])]))
        i += n
    assert i == len(tokens)
    return logits[0]


def test_prefill_equals_chunked_equals_token_by_token(backend, ids):
    toks = ids[0]
    one = run_chunks(backend, toks, [len(toks)])
    assert one.dtype == np.float32 and one.shape == (49152,)
    chunked = run_chunks(backend, toks, [3, 5, 1, len(toks) - 9])
    single = run_chunks(backend, toks, [1] * len(toks))
    np.testing.assert_allclose(chunked, one, atol=ATOL, rtol=0)
    np.testing.assert_allclose(single, one, atol=ATOL, rtol=0)
    assert int(np.argmax(one)) == int(np.argmax(chunked)) == int(np.argmax(single))


def test_all_logits_rows(backend, ids):
    toks = ids[1]
    pager = Pager(backend.num_pages, backend.page_size)
    sid = pager.new_seq()
    every = backend.forward(pager.build([(sid, toks)], all_logits=True))
    assert every.shape == (len(toks), 49152) and every.dtype == np.float32
    np.testing.assert_allclose(every[-1], run_chunks(backend, toks, [len(toks)]), atol=ATOL, rtol=0)


def test_batched_mixed_and_decode_equal_alone(backend, ids):
    """3 sequences: prefill mixed with decode in one step, then batched decode, vs each alone."""
    steps = 4
    alone = []
    for toks in ids:
        pager = Pager(backend.num_pages, backend.page_size, seed=11)
        sid = pager.new_seq()
        rows = [backend.forward(pager.build([(sid, toks)]))[0]]
        for _ in range(steps):
            rows.append(backend.forward(pager.build([(sid, [int(np.argmax(rows[-1]))])]))[0])
        alone.append(rows)

    pager = Pager(backend.num_pages, backend.page_size, seed=5)
    sids = [pager.new_seq() for _ in ids]
    batched = [[] for _ in ids]
    # step 0: seq 0 prefills alone; step 1: seq 0 decodes while 1 and 2 prefill (mixed batch)
    batched[0].append(backend.forward(pager.build([(sids[0], ids[0])]))[0])
    out = backend.forward(pager.build([(sids[0], [int(np.argmax(batched[0][-1]))]),
                                       (sids[1], ids[1]), (sids[2], ids[2])]))
    for s in range(3):
        batched[s].append(out[s])
    while min(len(b) for b in batched) < steps + 1:
        live = [s for s in range(3) if len(batched[s]) < steps + 1]
        out = backend.forward(pager.build([(sids[s], [int(np.argmax(batched[s][-1]))]) for s in live]))
        for r, s in enumerate(live):
            batched[s].append(out[r])
    for s in range(3):
        for a, b in zip(alone[s], batched[s]):
            np.testing.assert_allclose(b, a, atol=ATOL, rtol=0)
            assert int(np.argmax(a)) == int(np.argmax(b))


def test_france_greedy(bundle, backend):
    tok = bundle.tokenizer
    prompt = tok.encode(bundle.chat_template.render(
        [{"role": "user", "content": "What is the capital of France?"}]))
    out = greedy_generate(backend, prompt, max_new=20, eos_id=tok.eos_id)
    text = tok.decode(out)
    assert "Paris" in text
    assert text == "The capital of France is Paris.<|im_end|>"


def test_rejects_float64_weights(bundle):
    from kernels import LlamaModel
    w = dict(bundle.weights)
    w["output_norm.weight"] = w["output_norm.weight"].astype(np.float64)
    with pytest.raises(TypeError, match="float32"):
        LlamaModel(bundle.config, w)
