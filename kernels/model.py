"""The Llama forward pass over a flattened StepBatch and the paged KV pool, on numpy.

Definition only: weights come from ``kernels.gguf_loader`` (fused QKV and
gate/up, [out, in] float32), math from the ``kernels.ops_*`` reference kernels.
"""
from __future__ import annotations

import numpy as np

from kernels.config import LlamaConfig
from kernels.kv_cache import PagedKVCache
from kernels.ops_attention import kv_write, paged_attention
from kernels.ops_embed import embedding, lm_head
from kernels.ops_mlp import swiglu
from kernels.ops_norm import add_rmsnorm, rmsnorm
from kernels.ops_rope import apply_rope, rope_cos_sin
from kernels.step_batch import StepBatch


class _Layer:
    __slots__ = ("attn_norm", "wqkv_t", "wo_t", "ffn_norm", "wgu_t", "wdown_t")

    def __init__(self, w: dict[str, np.ndarray], i: int):
        p = f"blk.{i}."
        self.attn_norm = w[p + "attn_norm.weight"]
        self.ffn_norm = w[p + "ffn_norm.weight"]
        # [in, out] C-contiguous (see kernels.gguf_loader): y = x @ w_t.
        self.wqkv_t = w[p + "attn_qkv.weight_t"]
        self.wo_t = w[p + "attn_output.weight_t"]
        self.wgu_t = w[p + "ffn_gate_up.weight_t"]
        self.wdown_t = w[p + "ffn_down.weight_t"]


class LlamaModel:
    def __init__(self, config: LlamaConfig, weights: dict[str, np.ndarray]):
        for name, arr in weights.items():
            if arr.dtype != np.float32:
                raise TypeError(f"{name} is {arr.dtype}, expected float32")
        self.config = config
        self.embed = weights["token_embd.weight"]
        self.lm_head_t = weights["lm_head.weight_t"]
        self.output_norm = weights["output_norm.weight"]
        self.layers = [_Layer(weights, i) for i in range(config.n_layers)]
        self.scale = 1.0 / float(config.head_dim) ** 0.5  # a Python float: keeps float32

    def forward(self, batch: StepBatch, kv: PagedKVCache) -> np.ndarray:
        """Run one step: write every token's K/V at ``batch.slot_mapping`` and return
        float32 logits ``[len(batch.logits_rows), vocab]`` for the requested rows."""
        cfg = self.config
        t_count = batch.num_tokens
        positions = np.asarray(batch.positions)
        cos, sin = rope_cos_sin(positions, cfg.head_dim, cfg.rope_base)
        q_end, k_end = cfg.q_size, cfg.q_size + cfg.kv_size

        x = embedding(batch.token_ids, self.embed)
        residual = None
        for li, layer in enumerate(self.layers):
            if residual is None:
                residual, h = x, rmsnorm(x, layer.attn_norm, cfg.rms_eps)
            else:
                residual, h = add_rmsnorm(x, residual, layer.attn_norm, cfg.rms_eps)
            qkv = h @ layer.wqkv_t
            q = apply_rope(qkv[:, :q_end].reshape(t_count, cfg.n_heads, cfg.head_dim), cos, sin)
            k = apply_rope(qkv[:, q_end:k_end].reshape(t_count, cfg.n_kv_heads, cfg.head_dim), cos, sin)
            v = qkv[:, k_end:].reshape(t_count, cfg.n_kv_heads, cfg.head_dim)
            kv_write(kv.k[li], kv.v[li], k, v, batch.slot_mapping)
            attn = paged_attention(q, kv.k[li], kv.v[li], positions, batch.query_start,
                                   batch.context_lens, batch.block_tables, kv.page_size, self.scale)
            residual, h = add_rmsnorm(attn.reshape(t_count, cfg.q_size) @ layer.wo_t, residual,
                                      layer.ffn_norm, cfg.rms_eps)
            x = swiglu(h @ layer.wgu_t) @ layer.wdown_t

        rows = np.asarray(batch.logits_rows)
        final = rmsnorm(x[rows] + residual[rows], self.output_norm, cfg.rms_eps)
        return lm_head(final, self.lm_head_t)
