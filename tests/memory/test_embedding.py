"""The numpy all-MiniLM-L6-v2: published similarity, batching, padding, and HF's BertModel as reference."""

import numpy as np
import pytest

from kernels.embedding import EMBEDDING_DIM, default_embedding_dir, load_embedding_model, read_safetensors

FOOD = "A man is eating food."
BREAD = "A man is eating a piece of bread."
SENTENCES = [FOOD, BREAD, "The new movie is awesome.", "A man is riding a white horse on an enclosed ground.",
             "Quarterly tax filings are due next Tuesday.", "Héllo wörld — ünïcode ✓ 数字", ""]


@pytest.fixture(scope="module")
def model():
    return load_embedding_model()


def test_published_similarity(model):
    e = model.embed([FOOD, BREAD])
    assert e.shape == (2, EMBEDDING_DIM) and e.dtype == np.float32
    assert float(e[0] @ e[1]) == pytest.approx(0.755, abs=0.003)


def test_unit_norm_and_unrelated_sentences_score_low(model):
    e = model.embed(SENTENCES)
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)
    assert float(e[0] @ e[4]) < 0.15 and float(e[2] @ e[4]) < 0.15 and float(e[1] @ e[4]) < 0.15
    assert float(e[0] @ e[1]) > float(e[0] @ e[3]) > float(e[0] @ e[4])


def test_batch_equals_one_by_one(model):
    batch = model.embed(SENTENCES)
    single = np.stack([model.embed([s])[0] for s in SENTENCES])
    np.testing.assert_allclose(batch, single, atol=2e-6)
    assert model.embed([]).shape == (0, EMBEDDING_DIM)


def test_padding_is_masked_not_pooled(model):
    # the tokenizer file pads to 128: mean pooling over that padding makes every pair ~0.8
    assert model.tokenizer.encode([FOOD]).ids.shape == (1, 8)
    hidden, mask = model.hidden_states([FOOD, BREAD + " " + BREAD])
    assert mask.sum(axis=1).tolist() == [8, 20]
    np.testing.assert_allclose(hidden[0, :8], model.hidden_states([FOOD])[0][0], atol=1e-5)


def test_truncation_at_256_tokens(model):
    long = "word " * 600
    assert model.tokenizer.encode([long]).ids.shape == (1, 256)
    e = model.embed([long, long + "tail that is cut off"])
    np.testing.assert_allclose(e[0], e[1], atol=1e-6)


def test_safetensors_reader_matches_the_reference_reader():
    st = pytest.importorskip("safetensors.numpy")
    path = default_embedding_dir() / "model.safetensors"
    ours, ref = read_safetensors(path), st.load_file(str(path))
    assert ours.keys() == ref.keys()
    for name in ref:
        assert ours[name].dtype == ref[name].dtype and np.array_equal(ours[name], ref[name]), name


@pytest.mark.fidelity
def test_matches_hf_bert_model_on_the_same_weights(model):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.set_num_threads(1)
    hf = transformers.BertModel.from_pretrained(str(default_embedding_dir()), local_files_only=True,
                                                add_pooling_layer=False).eval()
    texts = SENTENCES[:6]
    batch = model.tokenizer.encode(texts)
    with torch.no_grad():
        out = hf(input_ids=torch.from_numpy(batch.ids), attention_mask=torch.from_numpy(batch.mask.astype(np.int64)),
                 token_type_ids=torch.from_numpy(batch.type_ids)).last_hidden_state.numpy()
    ours, mask = model.hidden_states(texts)
    np.testing.assert_allclose(ours[mask], out[mask], atol=2e-4)
    m = batch.mask[:, :, None].astype(np.float32)
    pooled = (out * m).sum(1) / m.sum(1)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    np.testing.assert_allclose(model.embed(texts), pooled, atol=2e-5)


def test_embedding_path_override(monkeypatch, tmp_path):
    wheel = default_embedding_dir()
    (tmp_path / "copy").symlink_to(wheel)
    monkeypatch.setenv("AOTX_EMBEDDING_PATH", str(tmp_path / "copy"))
    assert default_embedding_dir() == tmp_path / "copy" != wheel
    monkeypatch.setenv("AOTX_EMBEDDING_PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="config.json"):
        default_embedding_dir()


def test_float32_erf_is_within_1e_6_of_math_erf():
    import math

    from kernels.embedding.bert import erf
    x = np.linspace(-8.0, 8.0, 40001, dtype=np.float32)
    got = erf(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [math.erf(float(v)) for v in x], rtol=0, atol=1e-6)
