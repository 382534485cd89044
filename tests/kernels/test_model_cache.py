"""The model's disk cache (kernels.model_cache): one GGUF read fills it; a load from it is the same model,
read-only; a damaged or foreign entry is never used; the cache can be turned off."""
from __future__ import annotations

import logging

import msgpack
import numpy as np
import pytest

from kernels import model_cache
from kernels.gguf_loader import default_model_path, load_model
from kernels.text_side import load_text_side


@pytest.fixture(scope="module")
def cached(tmp_path_factory):
    root = tmp_path_factory.mktemp("model-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(model_cache.ENV_CACHE, str(root))
        assert model_cache.read_meta(default_model_path()) is None
        first = load_model(progress=False)                  # reads the GGUF, fills the cache
        yield root, first


def test_a_load_from_the_cache_is_the_same_model_read_only(cached, monkeypatch):
    root, first = cached
    monkeypatch.setenv(model_cache.ENV_CACHE, str(root))
    entries = [p for p in root.iterdir() if not p.name.startswith(".")]
    assert len(entries) == 1 and (entries[0] / model_cache.META).is_file()
    again = load_model(progress=False)
    assert again.sha256 == first.sha256 and again.config == first.config
    assert set(again.weights) == set(first.weights)
    for name, arr in first.weights.items():
        assert again.weights[name].dtype == np.float32 and np.array_equal(again.weights[name], arr), name
    w = again.weights["output_norm.weight"]
    assert not w.flags.writeable
    with pytest.raises(ValueError):
        w[0] = 1.0
    text = "<|im_start|>user\nWhat is the capital of France?<|im_end|>"
    assert again.tokenizer.encode(text) == first.tokenizer.encode(text)
    side = load_text_side()
    assert side.config == first.config and side.tokenizer.encode(text) == first.tokenizer.encode(text)


def test_a_damaged_entry_is_not_used(cached, monkeypatch, caplog):
    root, first = cached
    monkeypatch.setenv(model_cache.ENV_CACHE, str(root))
    path = default_model_path()
    record = model_cache.read_meta(path)
    assert record is not None and "lm_head.weight_t" in record["weights"]
    entry = root / model_cache.entry_key(path)
    npy = entry / "lm_head.weight_t.npy"
    whole = npy.read_bytes()
    try:
        npy.write_bytes(whole[: len(whole) // 2])             # cut short, as by a full disk
        with caplog.at_level(logging.WARNING, logger="kernels.model_cache"):
            assert model_cache.read_weights(path, record) is None
        assert "damaged" in caplog.text
    finally:
        npy.write_bytes(whole)
    meta = entry / model_cache.META
    good = meta.read_bytes()
    try:
        meta.write_bytes(msgpack.packb({**record, "format": model_cache.FORMAT + 1}))
        assert model_cache.read_meta(path) is None            # another format: the GGUF is read instead
        meta.write_bytes(b"\xc1 not msgpack")
        assert model_cache.read_meta(path) is None
    finally:
        meta.write_bytes(good)


def test_the_key_follows_the_file_and_the_cache_can_be_turned_off(tmp_path, monkeypatch):
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"one")
    key = model_cache.entry_key(gguf)
    gguf.write_bytes(b"other")                                  # another size: another entry
    assert model_cache.entry_key(gguf) != key
    monkeypatch.setenv(model_cache.ENV_CACHE, "off")
    assert model_cache.cache_root() is None and model_cache.read_meta(gguf) is None
    model_cache.write(gguf, {}, "", {"x": np.zeros(2, np.float32)})   # nothing written, nothing raised
    monkeypatch.delenv(model_cache.ENV_CACHE)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert model_cache.cache_root() == tmp_path / "xdg" / "aotx" / "models"
