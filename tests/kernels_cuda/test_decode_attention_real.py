"""decode_attention's roundings on the real model's attention inputs (ops.gpu.decode_attention_real), on the CPU
through the twin: with q and P split into bf16 hi + lo (the default variants) only outputs near a bf16 rounding
boundary differ from the scalar path's; with one bf16 each (session 11, the _bf16 peer) a large share does. The
GPU holds the kernel to the same measure (ops/gpu/decode_attention_check.real_inputs: <= 1 %, rel <= 3e-4; an
H100 gave 0.291 %, 1.07e-4)."""
from __future__ import annotations

from kernels import load_model_cached
from ops.gpu.decode_attention_real import real_prompts, twin_figures


def test_split_rounding_keeps_real_outputs_at_the_scalar_paths_bits():
    bundle = load_model_cached(progress=False)
    figures = twin_figures(bundle, real_prompts(bundle)[:6])   # 30 layers x 6 decode tokens
    share, err = figures["split"]
    assert share < 0.01 and err < 2e-4, figures     # measured on 20 prompts: 0.29 %, 8.9e-5
    share, err = figures["bf16"]
    assert share > 0.2 and err > 1e-3, figures      # measured on 20 prompts: 46 %, 3.8e-3
