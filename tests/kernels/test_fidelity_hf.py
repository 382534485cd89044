"""Fidelity: our numpy forward against HF transformers' Llama on the same GGUF.

HF is an independent reference for every part that matters: its GGUF loader
dequantizes with its own name mapping and UN-permutes Q/K (so its model uses
``rotate_half`` RoPE, while ours keeps llama.cpp's permutation and rotates
adjacent pairs), and its Llama modules are its own code.

``AutoModelForCausalLM.from_pretrained(dir, gguf_file=...)`` insists on the
``accelerate`` package, which the fidelity extra does not pull in; we therefore
call the two pieces ``from_pretrained`` runs for a GGUF ourselves:
``AutoConfig.from_pretrained(dir, gguf_file=...)`` and
``load_gguf_checkpoint(path, return_tensors=True, model_to_load=model)``.
"""
import importlib.util
import os

import numpy as np
import pytest

from tests.kernels.pager import Pager

pytestmark = pytest.mark.fidelity
# torch and transformers are imported where a test runs, not at collection: every xdist worker collects
# every module, and importing them cost the worker that never runs this module ~2-3 s of CPU.
if importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None:
    pytest.skip("the fidelity extra (torch, transformers) is not installed", allow_module_level=True)

PROMPTS = [
    [{"role": "user", "content": "What is the capital of France?"}],
    "Once upon a time, in a small village by the sea, there lived an old fisherman who",
]


@pytest.fixture(scope="module", autouse=True)
def one_gguf_parse():
    """HF parses the GGUF once for this module, not three times: ``AutoConfig``, ``AutoTokenizer`` and
    ``load_gguf_checkpoint`` each build a ``gguf.GGUFReader`` (~3.7 s of CPU here: a numpy view of every
    vocabulary string and merge) and the two metadata-only reads each walk every field again (~1 s).
    The reader is shared (read-only, memory-mapped) and a metadata-only result is handed out again as a
    deep copy, so HF's own loader and converter still produce every value the tests compare against.

    HF's ``get_gguf_hf_weights_map`` also asks gguf-py for the same ``TensorNameMap(arch, 30 blocks)`` once for
    every submodule of the model (397 times: each formats every tensor name of every block, ~3.4 M strings,
    about half of ``load_gguf_checkpoint``'s CPU); one map per (arch, blocks) is handed out again: HF only reads
    it (``get_name``), and still maps every tensor name itself."""
    import copy
    import functools

    import gguf
    from transformers import modeling_gguf_pytorch_utils as hf_gguf

    readers: dict[str, gguf.GGUFReader] = {}
    metadata: dict[str, dict] = {}
    reader_class, load_checkpoint = gguf.GGUFReader, hf_gguf.load_gguf_checkpoint

    def shared_reader(path, *args, **kwargs):
        if args or kwargs:
            return reader_class(path, *args, **kwargs)
        key = os.path.realpath(path)
        if key not in readers:
            readers[key] = reader_class(path)
        return readers[key]

    def metadata_once(path, return_tensors=False, **kwargs):
        if return_tensors or kwargs:
            return load_checkpoint(path, return_tensors=return_tensors, **kwargs)
        key = os.path.realpath(path)
        if key not in metadata:
            metadata[key] = load_checkpoint(path, return_tensors=False)
        return copy.deepcopy(metadata[key])

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gguf, "GGUFReader", shared_reader)
        mp.setattr(gguf, "get_tensor_name_map", functools.lru_cache(maxsize=None)(gguf.get_tensor_name_map))
        mp.setattr(hf_gguf, "load_gguf_checkpoint", metadata_once)
        yield


@pytest.fixture(scope="module")
def hf_model(bundle):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoConfig, LlamaForCausalLM
    from transformers.initialization import no_init_weights
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

    torch.set_num_threads(max(1, int(os.environ.get("OPENBLAS_NUM_THREADS", "1"))))
    path = bundle.path
    config = AutoConfig.from_pretrained(str(path.parent), gguf_file=path.name)
    assert config.tie_word_embeddings
    # no random init of 135 M weights (~2 s of CPU) that the checkpoint overwrites: from_pretrained builds the
    # model the same way; a weight left unloaded could only fail the logits check (missing is checked below)
    with no_init_weights():
        model = LlamaForCausalLM(config).eval()
    tensors = load_gguf_checkpoint(str(path), return_tensors=True, model_to_load=model,
                                   torch_dtype=torch.float32)["tensors"]
    missing, unexpected = model.load_state_dict(tensors, strict=False)
    assert not unexpected and set(missing) <= {"lm_head.weight"}
    model.lm_head.weight = model.model.embed_tokens.weight  # tied: the GGUF has no output.weight
    return model.float()


def prompt_ids(bundle, prompt):
    text = bundle.chat_template.render(prompt) if isinstance(prompt, list) else prompt
    return bundle.tokenizer.encode(text)


@pytest.mark.parametrize("which", range(len(PROMPTS)))
def test_logits_match_hf(bundle, backend, hf_model, which):
    import torch

    ids = prompt_ids(bundle, PROMPTS[which])
    pager = Pager(backend.num_pages, backend.page_size)
    ours = backend.forward(pager.build([(pager.new_seq(), ids)], all_logits=True))
    assert ours.dtype == np.float32
    with torch.no_grad():
        ref = hf_model(torch.tensor([ids])).logits[0].float().numpy()
    assert ref.shape == ours.shape
    diff = np.abs(ours - ref)
    scale = np.abs(ref).max()
    print(f"prompt {which}: {len(ids)} tokens, max |ours - hf| = {diff.max():.2e}, max |logit| = {scale:.1f}")
    assert diff.max() < 2e-5 * scale, (diff.max(), scale)  # measured ~2.5e-6 * scale
    np.testing.assert_array_equal(ours.argmax(-1), ref.argmax(-1))


def test_tokenizer_matches_hf(bundle):
    from transformers import AutoTokenizer

    path = bundle.path
    hf_tok = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    for text in ["Hello world, 12345!", "日本語 🤗 tabs\tand\nnewlines",
                 bundle.chat_template.render(PROMPTS[0])]:
        assert bundle.tokenizer.encode(text) == hf_tok.encode(text, add_special_tokens=False), text
