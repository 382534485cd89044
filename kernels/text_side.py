"""The model's text side alone: config, tokenizer and chat template from the GGUF metadata, no weights.

An HTTP worker of `aotx serve --http-workers N` renders and tokenizes prompts itself but runs no model:
reading the metadata takes a fraction of the ~4 s a full load (dequantization) takes, and nothing
where the model's disk cache (``kernels.model_cache``) already holds it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kernels import model_cache
from kernels.chat_template import ChatTemplate
from kernels.config import LlamaConfig
from kernels.gguf_loader import _metadata, default_model_path
from kernels.tokenizer import Tokenizer


@dataclass(frozen=True)
class TextSide:
    config: LlamaConfig
    tokenizer: Tokenizer
    chat_template: ChatTemplate
    path: Path


def load_text_side(path: str | os.PathLike | None = None) -> TextSide:
    path = Path(path) if path is not None else default_model_path()
    record = model_cache.read_meta(path)
    if record is not None:
        meta = record["meta"]
    else:
        from gguf import GGUFReader
        meta = _metadata(GGUFReader(str(path)))
    cfg = LlamaConfig.from_metadata(meta)
    tokenizer = Tokenizer.from_gguf_metadata(meta)
    template = ChatTemplate(meta["tokenizer.chat_template"], bos_token=tokenizer.token_text(cfg.bos_id),
                            eos_token=tokenizer.token_text(cfg.eos_id))
    return TextSide(config=cfg, tokenizer=tokenizer, chat_template=template, path=path)
