import numpy as np
import pytest

from kernels import LlamaConfig, default_model_path, load_model
from kernels.gguf_loader import ENV_MODEL_PATH

SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"


def test_config_from_metadata(bundle):
    assert bundle.config == LlamaConfig(
        n_layers=30, hidden=576, ffn=1536, n_heads=9, n_kv_heads=3, head_dim=64,
        rope_base=100000.0, rms_eps=bundle.config.rms_eps, vocab_size=49152,
        context_length=8192, bos_id=1, eos_id=2)
    assert bundle.config.rms_eps == pytest.approx(1e-5)


def test_weights_fused_float32_contiguous(bundle):
    cfg, w = bundle.config, bundle.weights
    assert "output.weight" not in w and "blk.0.attn_q.weight" not in w
    assert w["token_embd.weight"].shape == (49152, 576)
    assert w["lm_head.weight_t"].shape == (576, 49152)
    np.testing.assert_array_equal(w["lm_head.weight_t"][:, 1234], w["token_embd.weight"][1234])
    assert w["blk.0.attn_qkv.weight_t"].shape == (576, 576 + 2 * 192)
    assert w["blk.29.ffn_gate_up.weight_t"].shape == (576, 2 * 1536)
    assert w["blk.29.ffn_down.weight_t"].shape == (1536, 576)
    assert len(w) == 3 + 6 * cfg.n_layers
    for name, arr in w.items():
        assert arr.dtype == np.float32, name
        assert arr.flags.c_contiguous, name
        assert np.isfinite(arr).all(), name


def test_bundle_identity(bundle):
    assert bundle.sha256 == SHA256
    assert bundle.path.name == "SmolLM2-135M-Instruct.Q4_1.gguf"
    assert "<|im_start|>" in bundle.chat_template.source


def test_env_override(monkeypatch, tmp_path):
    missing = tmp_path / "nope.gguf"
    monkeypatch.setenv(ENV_MODEL_PATH, str(missing))
    assert default_model_path() == missing
    with pytest.raises(FileNotFoundError):
        load_model(progress=False)


def test_unsupported_arch():
    with pytest.raises(ValueError, match="architecture"):
        LlamaConfig.from_metadata({"general.architecture": "gpt2"})
