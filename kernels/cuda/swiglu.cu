// SwiGLU: silu(gate) * up, silu(g) = g / (1 + exp(-g)).  Twin: kernels.ops_mlp.swiglu.
#pragma once
#include "common.cuh"

__device__ __forceinline__ float silu_mul(float g, float u) { return g / (1.f + expf(-g)) * u; }

// gate_up float32 [T, 2F] = [gate | up] (the numpy layout); out bf16 [T, F].
extern "C" __global__ void swiglu(const float *__restrict__ gate_up, bf16 *__restrict__ out, int n_tokens, int ffn) {
    pdl_wait();
    pdl_trigger();
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long)n_tokens * ffn) return;
    int t = (int)(i / ffn), j = (int)(i % ffn);
    const float *row = gate_up + (size_t)t * 2 * ffn;
    out[i] = f2bf(silu_mul(row[j], row[ffn + j]));
}
