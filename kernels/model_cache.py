"""A disk cache of a loaded GGUF: its metadata and its fused float32 weights, read back whole.

Reading a GGUF with ``gguf.GGUFReader`` costs about 5 s of CPU for SmolLM2 (the reader builds a numpy
view for every part of every metadata field: 49,152 vocabulary strings and as many merges), and the
dequantization as much again. Every ``aotx serve``, HTTP worker and benchmark paid that at start. The
cache keeps what the loader made, keyed by the GGUF's resolved path, size and modification time:

    <root>/<key>/meta.msgpack        the metadata fields, the GGUF's sha256, the format version
    <root>/<key>/<weight name>.npy   one float32 array per fused weight (``kernels.gguf_loader``)

An entry is written into a temporary directory and renamed into place, so a reader sees a whole entry
or none; two processes filling the same entry at once both succeed (the second rename loses and its
copy is removed). Weights are read into the process's own memory, not memory-mapped: the numpy forward
streams every weight each step, and over the file's page-cache pages `make bench-cpu` ran 5-9 % slower
at batch 16 than over anonymous memory (same run, 2026-12-01). They come back read-only, so a caller
that tries to write into a shared bundle's weight gets an error. A load from the cache takes ~2 s of
CPU (reading 620 MB), against ~10 s from the GGUF.

``$AOTX_MODEL_CACHE`` names the root (default ``$XDG_CACHE_HOME/aotx/models`` or
``~/.cache/aotx/models``); ``AOTX_MODEL_CACHE=off`` turns the cache off. A damaged or foreign entry
is ignored (logged) and the GGUF is read again.
"""
from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
from pathlib import Path

import msgpack
import numpy as np

ENV_CACHE = "AOTX_MODEL_CACHE"
FORMAT = 1
META = "meta.msgpack"
log = logging.getLogger(__name__)


def cache_root() -> Path | None:
    env = os.environ.get(ENV_CACHE, "")
    if env.lower() in ("off", "0", "false", "no"):
        return None
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "aotx" / "models"


def entry_key(path: Path) -> str:
    st = path.stat()
    ident = f"{FORMAT}\0{path.resolve()}\0{st.st_size}\0{st.st_mtime_ns}"
    return hashlib.sha256(ident.encode()).hexdigest()[:32]


def _entry(path: Path) -> Path | None:
    root = cache_root()
    return None if root is None else root / entry_key(path)


def read_meta(path: Path) -> dict | None:
    """The cached entry's meta record for the GGUF at ``path``, or None (no cache, no entry, damaged)."""
    entry = _entry(path)
    if entry is None or not (entry / META).is_file():
        return None
    try:
        record = msgpack.unpackb((entry / META).read_bytes(), raw=False, strict_map_key=False)
    except (OSError, ValueError, msgpack.UnpackException) as exc:
        log.warning("model cache entry %s unreadable (%s): reading the GGUF", entry, exc)
        return None
    if not isinstance(record, dict) or record.get("format") != FORMAT:
        log.warning("model cache entry %s has another format: reading the GGUF", entry)
        return None
    return record


def read_weights(path: Path, record: dict) -> dict[str, np.ndarray] | None:
    """The entry's weights (named by its ``record``), read-only, or None if damaged."""
    entry = _entry(path)
    if entry is None:
        return None
    names = record.get("weights") or []
    if not names:
        return None
    weights = {}
    try:
        for name in names:
            arr = np.load(entry / f"{name}.npy", allow_pickle=False)   # into the process's own memory
            arr.setflags(write=False)
            weights[name] = arr
    except (OSError, ValueError) as exc:
        log.warning("model cache entry %s damaged (%s): reading the GGUF", entry, exc)
        return None
    return weights


def write(path: Path, meta: dict, sha256: str, weights: dict[str, np.ndarray]) -> None:
    """Store ``meta`` and ``weights`` for the GGUF at ``path``; a failure is logged, not raised:
    the cache only saves time."""
    entry = _entry(path)
    if entry is None:
        return
    record = {"format": FORMAT, "sha256": sha256, "meta": meta, "weights": sorted(weights)}
    tmp = None
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", dir=entry.parent))
        for name, arr in weights.items():
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(arr, dtype=np.float32), allow_pickle=False)
        (tmp / META).write_bytes(msgpack.packb(record, use_bin_type=True))
        try:
            os.rename(tmp, entry)
        except OSError:
            if not (entry / META).is_file():
                raise
            shutil.rmtree(tmp, ignore_errors=True)        # another process filled it first: same bytes
    except OSError as exc:
        log.warning("model cache: could not write %s (%s); the next start reads the GGUF again", entry, exc)
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
