// Interleaved (adjacent-pair) RoPE, the GGUF convention.  Twin: kernels.ops_rope.apply_rope.
// cos/sin come from a table [max_pos, D/2] of float2 (cos, sin) built on the host by
// kernels.ops_rope.rope_cos_sin (float64 angles rounded to float32), so both sides use the same values.
#pragma once
#include "common.cuh"

__device__ __forceinline__ void rope_pair(float &x0, float &x1, float2 cs) {
    float a = x0 * cs.x - x1 * cs.y;
    float b = x0 * cs.y + x1 * cs.x;
    x0 = a;
    x1 = b;
}

// x float32 [T, n_heads, D] rotated in place; one thread per pair.
extern "C" __global__ void rope_inplace(float *__restrict__ x, const int *__restrict__ positions,
                                        const float2 *__restrict__ table, int n_tokens, int n_heads, int head_dim) {
    pdl_wait();
    pdl_trigger();
    int half = head_dim / 2;
    long i = (long)blockIdx.x * blockDim.x + threadIdx.x;
    long total = (long)n_tokens * n_heads * half;
    if (i >= total) return;
    int t = (int)(i / ((long)n_heads * half));
    int p = (int)(i % half);
    float *v = x + 2 * i;
    float x0 = v[0], x1 = v[1];
    rope_pair(x0, x1, table[(size_t)positions[t] * half + p]);
    v[0] = x0;
    v[1] = x1;
}
