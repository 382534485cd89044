"""kernels: SmolLM2 (Llama) on numpy — loader, tokenizer, chat template, reference kernels,
paged KV pool, model, counter-based sampler and backends. Imports nothing else of ours."""
from kernels.backend import BackendUnavailable, NumpyBackend, available_backends, create_backend
from kernels.chat_template import ChatTemplate, ChatTemplateError
from kernels.config import LlamaConfig
from kernels.gguf_loader import ModelBundle, default_model_path, load_model, load_model_cached
from kernels.kv_cache import PagedKVCache
from kernels.model import LlamaModel
from kernels.sampler import log_softmax, logprobs, sample, sample_row, splitmix64, uniform24
from kernels.sampling_rows import SamplingRows
from kernels.step_batch import StepBatch
from kernels.tokenizer import Tokenizer

__all__ = [
    "BackendUnavailable", "ChatTemplate", "ChatTemplateError", "LlamaConfig", "LlamaModel",
    "ModelBundle", "NumpyBackend", "PagedKVCache", "SamplingRows", "StepBatch", "Tokenizer",
    "available_backends", "create_backend", "default_model_path", "load_model",
    "load_model_cached", "log_softmax", "logprobs", "sample", "sample_row", "splitmix64",
    "uniform24",
]
