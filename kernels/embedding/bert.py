"""A numpy BERT encoder forward (post-LayerNorm, absolute positions, exact-erf GELU).

embeddings = LayerNorm(word[ids] + position[0..T) + token_type[type_ids]); then per layer
  h = LayerNorm(x + Wo·softmax(QKᵀ/√d + mask)·V),  x' = LayerNorm(h + W2·gelu(W1·h))
Padded key positions get a large negative score, so a padded batch gives every row the
same hidden states at its real tokens as that row alone. float32 throughout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

_NEG = np.float32(-1e30)


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    intermediate_size: int
    max_position_embeddings: int
    type_vocab_size: int
    layer_norm_eps: float
    hidden_act: str
    pad_token_id: int

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> "BertConfig":
        if doc.get("model_type") != "bert":
            raise ValueError(f"config model_type is {doc.get('model_type')!r}, not 'bert'")
        if doc.get("position_embedding_type", "absolute") != "absolute":
            raise ValueError("only absolute position embeddings are supported")
        if doc.get("hidden_act") != "gelu":
            raise ValueError(f"hidden_act {doc.get('hidden_act')!r} is not the exact-erf 'gelu'")
        cfg = cls(**{name: doc[name] for name in cls.__dataclass_fields__ if name != "pad_token_id"},
                  pad_token_id=int(doc.get("pad_token_id", 0)))
        if cfg.hidden_size % cfg.num_attention_heads:
            raise ValueError("hidden_size is not a multiple of num_attention_heads")
        return cfg

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads


@dataclass(frozen=True)
class LayerWeights:
    wqkv: np.ndarray      # [H, 3H]  (x @ wqkv = [q | k | v])
    bqkv: np.ndarray      # [3H]
    wo: np.ndarray        # [H, H]
    bo: np.ndarray
    ln1: tuple[np.ndarray, np.ndarray]
    w1: np.ndarray        # [H, I]
    b1: np.ndarray
    w2: np.ndarray        # [I, H]
    b2: np.ndarray
    ln2: tuple[np.ndarray, np.ndarray]


@dataclass(frozen=True)
class BertWeights:
    word: np.ndarray
    position: np.ndarray
    token_type: np.ndarray
    ln: tuple[np.ndarray, np.ndarray]
    layers: tuple[LayerWeights, ...]

    @classmethod
    def from_tensors(cls, t: Mapping[str, np.ndarray], cfg: BertConfig) -> "BertWeights":
        def get(name: str, shape: tuple[int, ...]) -> np.ndarray:
            for key in (name, f"bert.{name}"):
                if key in t:
                    arr = np.asarray(t[key], dtype=np.float32)
                    if arr.shape != shape:
                        raise ValueError(f"tensor {key} has shape {arr.shape}, expected {shape}")
                    return arr
            raise ValueError(f"tensor {name} is missing")

        H, I = cfg.hidden_size, cfg.intermediate_size

        def ln(prefix: str) -> tuple[np.ndarray, np.ndarray]:
            return get(f"{prefix}.weight", (H,)), get(f"{prefix}.bias", (H,))

        layers = []
        for i in range(cfg.num_hidden_layers):
            p = f"encoder.layer.{i}"
            q, k, v = (get(f"{p}.attention.self.{n}.weight", (H, H)) for n in ("query", "key", "value"))
            bq, bk, bv = (get(f"{p}.attention.self.{n}.bias", (H,)) for n in ("query", "key", "value"))
            layers.append(LayerWeights(
                wqkv=np.ascontiguousarray(np.concatenate([q, k, v], axis=0).T), bqkv=np.concatenate([bq, bk, bv]),
                wo=np.ascontiguousarray(get(f"{p}.attention.output.dense.weight", (H, H)).T),
                bo=get(f"{p}.attention.output.dense.bias", (H,)), ln1=ln(f"{p}.attention.output.LayerNorm"),
                w1=np.ascontiguousarray(get(f"{p}.intermediate.dense.weight", (I, H)).T),
                b1=get(f"{p}.intermediate.dense.bias", (I,)),
                w2=np.ascontiguousarray(get(f"{p}.output.dense.weight", (H, I)).T),
                b2=get(f"{p}.output.dense.bias", (H,)), ln2=ln(f"{p}.output.LayerNorm")))
        return cls(word=get("embeddings.word_embeddings.weight", (cfg.vocab_size, H)),
                   position=get("embeddings.position_embeddings.weight", (cfg.max_position_embeddings, H)),
                   token_type=get("embeddings.token_type_embeddings.weight", (cfg.type_vocab_size, H)),
                   ln=ln("embeddings.LayerNorm"), layers=tuple(layers))


def layer_norm(x: np.ndarray, wb: tuple[np.ndarray, np.ndarray], eps: float) -> np.ndarray:
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = np.mean(centered * centered, axis=-1, keepdims=True)
    return (centered / np.sqrt(var + np.float32(eps))) * wb[0] + wb[1]


def erf(x: np.ndarray) -> np.ndarray:
    """erf (Abramowitz & Stegun 7.1.26) in float32, in place over few temporaries: |error| < 1e-6
    (in float64 it cost as much as every matmul of the forward together)."""
    z = np.abs(x).astype(np.float32)
    t = z * np.float32(0.3275911)
    t += np.float32(1.0)
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.square(z, out=z)
    np.negative(z, out=z)
    np.exp(z, out=z)
    poly *= z
    np.subtract(np.float32(1.0), poly, out=poly)
    return np.copysign(poly, x, out=poly).astype(x.dtype, copy=False)


def gelu(x: np.ndarray) -> np.ndarray:
    return np.float32(0.5) * x * (np.float32(1.0) + erf(x * np.float32(0.7071067811865476)))


def _softmax(x: np.ndarray) -> np.ndarray:
    x = x - x.max(axis=-1, keepdims=True)
    np.exp(x, out=x)
    x /= x.sum(axis=-1, keepdims=True)
    return x


def bert_forward(w: BertWeights, cfg: BertConfig, ids: np.ndarray, type_ids: np.ndarray,
                 mask: np.ndarray) -> np.ndarray:
    """Last hidden states, float32 [n, T, H]. ids/type_ids int [n, T]; mask bool [n, T] (True = real)."""
    n, T = ids.shape
    if T > cfg.max_position_embeddings:
        raise ValueError(f"{T} tokens exceed the model's {cfg.max_position_embeddings} positions")
    H, nh, hd = cfg.hidden_size, cfg.num_attention_heads, cfg.head_dim
    eps = cfg.layer_norm_eps
    x = w.word[ids] + w.position[:T][None, :, :] + w.token_type[type_ids]
    x = layer_norm(x.astype(np.float32), w.ln, eps)
    bias = np.where(mask, np.float32(0.0), _NEG).astype(np.float32)[:, None, None, :]   # [n,1,1,T]
    scale = np.float32(1.0 / np.sqrt(hd))
    for L in w.layers:
        qkv = x.reshape(n * T, H) @ L.wqkv + L.bqkv                                   # [n*T, 3H]
        qkv = qkv.reshape(n, T, 3, nh, hd).transpose(2, 0, 3, 1, 4)                   # [3,n,nh,T,hd]
        scores = (qkv[0] @ qkv[1].transpose(0, 1, 3, 2)) * scale + bias               # [n,nh,T,T]
        ctx = _softmax(scores) @ qkv[2]                                               # [n,nh,T,hd]
        ctx = ctx.transpose(0, 2, 1, 3).reshape(n * T, H)
        h = layer_norm(x + (ctx @ L.wo + L.bo).reshape(n, T, H), L.ln1, eps)
        f = gelu(h.reshape(n * T, H) @ L.w1 + L.b1) @ L.w2 + L.b2
        x = layer_norm(h + f.reshape(n, T, H), L.ln2, eps)
    return x
